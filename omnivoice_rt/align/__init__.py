"""Word timings: every word of a text placed in a recording of it, by warping the recording onto
eSpeak NG's rendering of the same text (the template), whose words' places eSpeak reports.

    words = align(waveform, 24_000, "The train leaves at 5 pm.", language="en")
    # [Word("The", 0.12, 0.25), Word("train", 0.25, 0.61), ...]; None where a word was not found

The steps, one module each: ``espeak.py`` speaks the template with a mark before each word;
``features.py`` makes both signals' spectra comparable (the recording's level and noise given to
the template, cepstra normalised per signal); ``dtw.py`` warps one onto the other in a band.
Chosen by measurement (``bench/align.py``; docs/design.md "Word timings"): on speech whose every
word has its own rate, with pauses and noise, a word's start is found within 17-25 ms on
average, 95% within 68 ms, in six languages of six scripts; the warp may leave out a word the
recording never says (``SKIP_SCALE``), and such a word is unplaced, as is one it places where
the recording is silent (``HEARD_SHARE``).

Which words: the text as written, split at spaces; a script written without them (Chinese,
Japanese kana, Thai) character by character. eSpeak reads what it is given ("5 pm" as "five
p m"), so a word's time covers its reading; a result's words (:func:`speech_words`) align
each piece as the model read it, each written word given its reading's span. eSpeak NG is
GPL-3.0: an optional extra (``espeak.py``)."""

from __future__ import annotations

import logging
import os
import unicodedata
from dataclasses import dataclass

import numpy as np

from omnivoice_rt.align import dtw, features
from omnivoice_rt.errors import AlignError  # raised here, and named as this package's
from omnivoice_rt.limits import MAX_ALIGN_S, MAX_ALIGN_WORDS
from omnivoice_rt.text.written import origins, script, unspaced

logger = logging.getLogger(__name__)

AUDIBLE_DB = 3.0  # a template frame is sound where it is this far over the recording's noise
VIRTUAL_GAP = 4  # silent frames put before each word of the template (a pause's landing place)
BAND_S, BAND_SHARE = 2.0, 0.15  # the warp's band: this much either side of the diagonal
# a word placed where the recording has no sound over its noise within this is not placed
NEAR_S = 0.05
ONSET_DB = 35.0  # a template word's sound starts where it comes within this of the loudest
# what the warp pays to leave a word out (a word never spoken): SKIP_SCALE x (SKIP_BASE +
# SKIP_PER_FRAME a frame of the word's sound), in the frames' distance; None: never (such a word
# is squeezed between its neighbours). With HOP_WEIGHT 0.5, 2.0 found 68% of missing words and
# unplaced no spoken word in 4,000 (0.9 without it: 60%, 2 in 4,000; bench/missing.py's trials,
# docs/design.md section 10)
SKIP_SCALE: float | None = 2.0
# a two-frame step of the warp also pays this share of the distance of the frame it hops over:
# a missing word squeezed in at double speed costs more, a word said fast barely more
HOP_WEIGHT = 0.5
SKIP_BASE, SKIP_PER_FRAME = 2.0, 0.15
# a word whose sound in the template is shorter than this is never left out, and placed where
# nothing sounds it is said with the next word: eSpeak runs such a word (Russian "в", "и") into
# the next one, the warp then took it for unspoken, and no missing word this short was found
SKIP_SHORTEST_S = 0.06
# a word placed where the recording is heard over its noise in less than this share of its
# frames is unplaced (a missing word the warp kept, or a spoken one placed in a pause); None:
# never. A word shorter than SKIP_SHORTEST_S is left to the rule above (bench/missing.py
# --heard; docs/design.md section 10)
HEARD_SHARE: float | None = 0.2

# eSpeak NG's Japanese voice has no kanji readings: it says "Chinese letter" (in English, 0.8 s)
# for each, three to four times a kanji's length, so a text's words were placed 210-300 ms off on
# average and 38% of them unplaced. Each kanji is given to it as this instead: one
# mora, shorter than most readings (one to four), as the warp may stretch a template without
# limit but hurry it only twofold; 65-95 ms off, a word in a hundred unplaced (bench/kanji.py;
# docs/design.md section 10). None: eSpeak's own reading
KANJI_STAND_IN: str | None = "か"

# languages whose eSpeak NG voice has another name than their code
_VOICES = {"zh": "cmn", "arb": "ar", "cmn": "cmn", "yue": "yue", "nb": "nb", "fil": "tl"}
# a text with no language named: the voice for its script
_SCRIPTS = {
    "CYRILLIC": "ru",
    "GREEK": "el",
    "ARABIC": "ar",
    "HEBREW": "he",
    "DEVANAGARI": "hi",
    "BENGALI": "bn",
    "TAMIL": "ta",
    "CJK": "cmn",
    "HIRAGANA": "ja",
    "KATAKANA": "ja",
    "HANGUL": "ko",
    "THAI": "th",
    "GEORGIAN": "ka",
    "ARMENIAN": "hy",
}


ESPEAK = "espeak"  # the default aligner, which needs no download (the ``align`` extra)
_configured: list[str] = []  # the process's aligner where a server's flag chose it


def configure(source: str | None) -> None:
    """The process's aligner: ``ESPEAK``, or a CTC model's folder or Hub repo (``ctc.py``);
    None: ``OMNIVOICE_ALIGN_MODEL``, else ``ESPEAK``."""
    _configured[:] = [source] if source else []


def aligner_source() -> str:
    source = (_configured or [os.environ.get("OMNIVOICE_ALIGN_MODEL") or ESPEAK])[0]
    return ESPEAK if source.lower() == ESPEAK else source


def load_aligner(source: str | None = None, start_espeak: bool = True) -> str:
    """The aligner ``source`` (None: the process's, :func:`aligner_source`) loaded now, so that
    one that cannot be is one line before any work: a CTC model read (``ArtifactError`` naming
    what is missing), eSpeak NG started where ``start_espeak`` (``EspeakMissing`` naming the
    extra; a server leaves that to the first words asked for). Returns the source."""
    source = source or aligner_source()
    if source.lower() == ESPEAK:
        if start_espeak:
            from omnivoice_rt.align import espeak

            espeak.engine()
        return ESPEAK
    from omnivoice_rt.align import ctc

    ctc.loaded(source)
    return source


@dataclass
class Word:
    """A word as written and where it is spoken, in seconds (None: not found in the audio)."""

    word: str
    start: float | None
    end: float | None

    def as_dict(self) -> dict:
        return {"word": self.word, "start": self.start, "end": self.end}

    def moved(self, seconds: float) -> Word:
        """The same word ``seconds`` later (an unplaced word stays unplaced)."""
        if self.start is None:
            return self
        return Word(self.word, round(self.start + seconds, 3), round(self.end + seconds, 3))


def words_of(text: str) -> list[str]:
    """The words of ``text`` as written: split at spaces, a script without them character by
    character; punctuation stays with the word before it (or the first word after it)."""
    words: list[str] = []
    pending = ""  # punctuation before any word
    for token in text.split():
        for piece in _pieces(token):
            if words and not any(c.isalnum() for c in piece):
                words[-1] += piece
            elif not any(c.isalnum() for c in piece):
                pending += piece
            else:
                words.append(pending + piece)
                pending = ""
    return words


def _pieces(token: str) -> list[str]:
    """A token cut into characters where its script writes no spaces; a combining mark or a
    punctuation mark stays with the character before it, a currency sign with the number after
    it ("了¥5。": "了", "¥5。")."""
    pieces: list[str] = []
    for char in token:
        after_unspaced = bool(pieces) and _unspaced(pieces[-1][-1])
        category = unicodedata.category(char)
        joins = category.startswith("M") or not char.isalnum()
        starts = _unspaced(char) or after_unspaced
        if pieces and (joins or not starts) and not (category == "Sc" and after_unspaced):
            pieces[-1] += char
        else:
            pieces.append(char)
    return pieces


def _unspaced(piece: str) -> bool:
    return any(map(unspaced, piece))


def voice_for(language: str | None, text: str, engine) -> str:
    """eSpeak NG's voice for ``language`` (a code), else for the text's script, else English."""
    candidates = []
    if language:
        candidates += [_VOICES.get(language, language), language.split("-")[0]]
    letters = [c for c in text if c.isalpha()]
    if letters:
        scripts = [script(c) for c in letters]
        candidates.append(_SCRIPTS.get(max(set(scripts), key=scripts.count), "en"))
    for voice in [*candidates, "en"]:
        if engine.has_voice(voice):
            return voice
    return "en"


def align(
    waveform: np.ndarray,
    sample_rate: int,
    text: str,
    language: str | None = None,
    model: str | None = None,
) -> list[Word]:
    """Each word of ``text`` (:func:`words_of`) placed in ``waveform``: start and end in seconds,
    None for a word that could not be placed. ``language``: a code ('en', 'zh'), else the
    text's script decides eSpeak's voice. ``model``: the aligner (``ESPEAK``, or a CTC model's
    folder or Hub repo); None: the process's (:func:`aligner_source`)."""
    waveform = _mono(waveform, sample_rate)
    seconds = waveform.size / sample_rate
    if seconds > MAX_ALIGN_S:
        raise AlignError(
            f"the recording is {seconds:.0f} s; one alignment takes at most {MAX_ALIGN_S:.0f} s: "
            "align it in parts (a piece of speech at a time)"
        )
    words = words_of(text)
    if len(words) > MAX_ALIGN_WORDS:
        raise AlignError(
            f"the text has {len(words)} words; one alignment takes at most {MAX_ALIGN_WORDS}: "
            "align it in parts"
        )
    if not words:
        return []
    source = model or aligner_source()
    if str(source).lower() != ESPEAK:  # an acoustic model the user added
        from omnivoice_rt.align import ctc

        spans = ctc.loaded(str(source)).align(waveform, sample_rate, words)
        return [Word(w, *(span or (None, None))) for w, span in zip(words, spans, strict=True)]
    from omnivoice_rt.align import espeak  # the optional extra, loaded only when asked for

    engine = espeak.engine()
    voice = voice_for(language, text, engine)
    joiner = "" if all(map(_unspaced, words)) else " "
    template = engine.template(_readable(words, voice), voice, joiner)
    recording = features.log_mel(waveform, sample_rate)
    if len(recording) < 2 or not np.isfinite(template.starts).any():
        return unplaced(words)
    return _placed(words, recording, template)


def _readable(words: list[str], voice: str) -> list[str]:
    """``words`` as eSpeak's ``voice`` is given them: in Japanese, each kanji (and the
    iteration mark "々") as ``KANJI_STAND_IN``."""
    if voice != "ja" or KANJI_STAND_IN is None:
        return words
    return ["".join(KANJI_STAND_IN if _kanji(c) else c for c in word) for word in words]


def _kanji(char: str) -> bool:
    return unicodedata.name(char, "").startswith(
        ("CJK UNIFIED", "CJK COMPATIBILITY IDEO", "IDEOGRAPHIC ITERATION")
    )


def unplaced(words: list[str]) -> list[Word]:
    """``words`` with no place found: null times."""
    return [Word(w, None, None) for w in words]


def _mono(waveform, sample_rate) -> np.ndarray:
    """A recording as one channel of finite float32 samples: (samples,), or (channels, samples)
    or (samples, channels) mixed down."""
    if not isinstance(sample_rate, (int, np.integer)) or sample_rate <= 0:
        raise AlignError(
            f"the sample rate must be a whole number of samples a second, not {sample_rate!r}"
        )
    audio = np.asarray(waveform, np.float32)
    if audio.ndim == 2:
        audio = audio.mean(axis=int(np.argmin(audio.shape)))  # the shorter axis: the channels
    if audio.ndim != 1:
        raise AlignError(
            f"a recording is one or a few channels of samples, not shape {audio.shape}"
        )
    if not np.isfinite(audio).all():
        raise AlignError("the recording holds samples that are not numbers (NaN or infinite)")
    return audio


def speech_words(
    waveform: np.ndarray,
    sample_rate: int,
    captions,
    language: str | None = None,
    model: str | None = None,
) -> list[Word]:
    """The words of a result (``Speech``'s waveform and captions), piece by piece: each
    caption's words as written placed in the samples it occupies (:func:`_caption_words`), in
    the result's seconds (``model``: ``align``'s). A piece that cannot be aligned (longer than
    ``MAX_ALIGN_S``, or the aligner failed while it ran) has its words unplaced; the synthesis
    stands. The aligner is loaded first: one that cannot be (eSpeak NG missing: the extra
    named; a CTC model's folder wrong) is raised, once (:func:`load_aligner`)."""
    model = load_aligner(model)
    waveform = np.asarray(waveform, np.float32).reshape(-1)
    words: list[Word] = []
    for caption in captions:
        piece = waveform[caption.start_sample : caption.end_sample]
        try:
            found = _caption_words(piece, sample_rate, caption, language, model)
        except Exception as exc:  # an aligner's fault never costs the synthesis its audio
            logger.warning("a piece's words were not aligned: %s", exc)
            found = unplaced(words_of(caption.written or caption.text))
        words += [w.moved(caption.start) for w in found]
    return words


def _caption_words(piece, sample_rate, caption, language, model) -> list[Word]:
    """A caption's words as written placed in its samples. Where the model read the text
    otherwise (``caption.text``, numbers read as words), the reading is aligned (what was said)
    and each written word takes its reading's span ("$5" read "five dollars": from "five"'s
    start to "dollars"' end), unplaced unless the first and last word of its reading are placed;
    written words read as one ("1 000 000") share it. Where the two texts cannot be matched
    (``written.origins``), the written text is aligned as eSpeak reads it."""
    written = caption.written or caption.text
    read, wrote = words_of(caption.text), words_of(written)
    origin = origins(read, wrote) if read and wrote and read != wrote else None
    if origin is None:
        return align(piece, sample_rate, written, language, model)
    placed = align(piece, sample_rate, caption.text, language, model)
    owner = np.array(_owners(read, wrote, origin))  # each read word's written word
    firsts = np.unique(owner)  # the written words whose reading starts a group
    found = []
    for first, stop in zip(firsts, [*firsts[1:], len(wrote)], strict=True):
        said = placed[np.searchsorted(owner, first) : np.searchsorted(owner, first, "right")]
        start, end = said[0].start, said[-1].end
        if start is None or end is None:
            start = end = None
        found += [Word(w, start, end) for w in wrote[first:stop]]
    return found


def _owners(read: list[str], wrote: list[str], origin: list[int | None]) -> list[int]:
    """Each read word's written word: its origin (``written.origins``), else the one before's,
    but the written word after it where the word before was read as written and that one is
    not another read word's origin ("now 1 000" read "now one thousand": "one" starts "1")."""
    upcoming, nexts = len(wrote), [0] * len(origin)  # the next origin after each read word
    for i in range(len(origin) - 1, -1, -1):
        nexts[i] = upcoming
        upcoming = upcoming if origin[i] is None else origin[i]
    owner: list[int] = []
    for i, o in enumerate(origin):  # origin[0] is 0: the texts start together
        if o is None:
            last = owner[-1]
            o = last + 1 if read[i - 1] == wrote[last] and last + 1 < nexts[i] else last
        owner.append(o)
    return owner


def _placed(words: list[str], recording: np.ndarray, template) -> list[Word]:
    """The words of ``template`` (eSpeak's rendering, with each word's mark) found in
    ``recording`` (its log-mel spectra)."""
    clean = features.log_mel(template.samples, template.sample_rate)
    noise = features.noise_floor(recording)
    known = np.isfinite(template.starts)
    onsets = _onsets(template.starts[known], clean)
    spectra, sounds, gaps, lead = _prepared(clean, recording, noise, onsets)
    ours, theirs = features.cepstra(recording), features.cepstra(spectra)
    half = dtw.band_width(len(ours), len(theirs), BAND_S, BAND_SHARE, features.HOP_S)
    if not dtw.reachable(len(ours), len(theirs), half):  # far more text than was said
        logger.info("alignment: the text is too long for its recording; no word placed")
        return unplaced(words)
    lengths = np.r_[gaps[1:], len(theirs)] - sounds  # each word's sound in the template, frames
    skips = _skip_costs(lengths)
    path = dtw.warp(ours, theirs, sounds, gaps, half, skips, HOP_WEIGHT)
    # a word starts where its sound is reached, less the faint frames before that sound
    reached = np.searchsorted(path, sounds)
    starts = np.clip(reached - lead, 0, len(path) - 1)
    heard = _over(spectra, noise)
    tail = np.flatnonzero(heard)[-1] + 1 if heard.any() else len(heard)
    stops = np.maximum(np.searchsorted(path, np.r_[gaps[1:], tail]), starts + 1)
    # a word found only where the recording holds no sound over its noise was not spoken there
    loud, near = _over(recording, noise), round(NEAR_S / features.HOP_S)
    spans = zip(np.maximum(starts - near, 0), stops + near, strict=True)
    lost = np.array([not loud[a:b].any() for a, b in spans])
    lost |= _unheard(loud, reached, stops, lengths)
    if skips is not None:
        lost |= dtw.skipped(path, sounds, gaps, skips)
    lost = _said_with_next(lost, starts, stops, lengths)
    # in order, and no word ends after the next one starts
    starts = np.maximum.accumulate(starts)
    stops = np.maximum(np.minimum(stops, np.r_[starts[1:], len(path)]), starts)
    found = iter(zip(starts * features.HOP_S, stops * features.HOP_S, lost, strict=True))
    result = []
    for word, marked in zip(words, known, strict=True):
        start, stop, missed = next(found) if marked else (0.0, 0.0, True)
        placed = not missed
        result.append(Word(word, _seconds(start, placed), _seconds(stop, placed)))
    missing = sum(w.start is None for w in result)
    if missing:
        logger.info("alignment: %d of %d words not placed", missing, len(result))
    return result


def _said_with_next(lost, starts, stops, lengths) -> np.ndarray:
    """A word too short to tell apart (:func:`_too_short`: eSpeak runs it into the next word, as
    Russian "в") placed where nothing sounds is said with the next word where that one is
    placed (heard, not left out): it ends where the next starts, taking its template length
    before it (none at the recording's start). ``starts``, ``stops``: frames, moved in place;
    ``lost``: each word silent or left out; the next word: the next whose eSpeak mark is known.
    Returns which words stay lost (a last word, or one before a lost word)."""
    lost = lost.copy()
    for k in np.flatnonzero(lost[:-1] & _too_short(lengths[:-1]))[::-1]:
        if not lost[k + 1]:
            stops[k] = starts[k + 1]
            starts[k] = max(starts[k + 1] - int(lengths[k]), 0)
            lost[k] = False
    return lost


def _unheard(loud, starts, stops, lengths) -> np.ndarray:
    """Which words the recording hears (``loud``, a flag a frame) in less than ``HEARD_SHARE``
    of their frames ``[starts, stops)`` (where their sound is reached to where the next word's
    silence is), of those not :func:`_too_short` (``lengths``: frames of sound in the
    template); a word whose sound the warp never reaches is heard in none."""
    if HEARD_SHARE is None:
        return np.zeros(len(starts), bool)
    shares = [
        loud[a : max(b, a + 1)].mean() if a < len(loud) else 0.0
        for a, b in zip(starts, stops, strict=True)
    ]
    return (np.array(shares) < HEARD_SHARE) & ~_too_short(lengths)


def _too_short(lengths: np.ndarray) -> np.ndarray:
    """Which words' sound in the template (``lengths``, frames) is shorter than
    ``SKIP_SHORTEST_S``."""
    return lengths < round(SKIP_SHORTEST_S / features.HOP_S)


def _skip_costs(lengths: np.ndarray) -> np.ndarray | None:
    """What the warp pays to leave each word out (``SKIP_SCALE``; ``lengths``: each word's
    sound in the template, frames); inf: never, for the first and last word and one
    :func:`_too_short`."""
    if SKIP_SCALE is None:
        return None
    costs = SKIP_SCALE * (SKIP_BASE + SKIP_PER_FRAME * lengths)
    costs[[0, -1]] = np.inf
    costs[_too_short(lengths)] = np.inf
    return costs.astype(np.float32)


def _seconds(value: float, placed: bool) -> float | None:
    return round(float(value), 3) if placed else None


def _over(spectra: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """The frames of ``spectra`` whose power is ``AUDIBLE_DB`` over the noise's."""
    return np.exp(spectra).sum(1) > noise.sum() * 10 ** (AUDIBLE_DB / 10)


def _prepared(clean: np.ndarray, recording: np.ndarray, noise: np.ndarray, onsets: np.ndarray):
    """The template as the warp takes it: at the recording's level with its noise, and
    ``VIRTUAL_GAP`` frames of that noise before every word but the first (a landing place for a
    pause the template does not have). Returns it, the frame where each word's sound is first
    heard over the noise, where the silence before that starts, and how many faint frames of the
    word come before its sound (its start is moved back by them)."""
    spectra = features.matched(clean, recording, noise)
    ends = np.r_[onsets[1:], len(spectra)]
    heard = _over(spectra, noise)
    sounds = np.array([_first(heard, a, b) for a, b in zip(onsets, ends, strict=True)])
    parts = [spectra[: onsets[0]]]
    for k in range(len(onsets)):
        if k:
            parts.append(np.repeat(np.log(noise)[None], VIRTUAL_GAP, 0))
        parts.append(spectra[onsets[k] : ends[k]])
    spectra = np.vstack(parts).astype(np.float32)
    lead = sounds - onsets
    sounds = sounds + np.arange(len(onsets)) * VIRTUAL_GAP
    heard = _over(spectra, noise)
    gaps = np.array([_silence_before(heard, s) for s in sounds])
    gaps = np.maximum(gaps, np.r_[0, sounds[:-1] + 1])  # a gap never reaches the word before
    return spectra, sounds, gaps, lead


def _onsets(marks: np.ndarray, clean: np.ndarray) -> np.ndarray:
    """Each mark's frame moved past the silence at it to the first sound (eSpeak puts a clause's
    pause after the next word's mark); ``clean``: the template's own spectra."""
    power = np.exp(clean).sum(1)
    sound = power > power.max() * 10 ** (-ONSET_DB / 10)
    frames = np.clip(np.floor(marks / features.HOP_S).astype(np.int64), 0, len(clean) - 1)
    frames = np.array([_first(sound, f, len(clean)) for f in frames])
    return _spread(frames, sound)


def _spread(onsets: np.ndarray, sound: np.ndarray) -> np.ndarray:
    """Words that eSpeak read as one with the word before them ("风筝", two characters, one
    word) get their marks where that word ends, with no sound of their own; share its sound
    among them evenly instead."""
    onsets = onsets.astype(np.float64)
    bounds = np.r_[onsets, len(sound)].astype(np.int64)
    silent = [k > 0 and sound[bounds[k] : bounds[k + 1]].sum() < 2 for k in range(len(onsets))]
    k = 1
    while k < len(onsets):
        if not silent[k]:
            k += 1
            continue
        last = k
        while last + 1 < len(onsets) and silent[last + 1]:
            last += 1
        low, count = bounds[k - 1], last - k + 2  # words k-1..last share word k-1's sound
        heard = np.flatnonzero(sound[low : bounds[k]])
        high = low + (heard[-1] + 1 if heard.size else bounds[k] - low)
        onsets[k : last + 1] = low + (high - low) * np.arange(1, count) / count
        k = last + 1
    return np.round(onsets).astype(np.int64)


def _first(flags: np.ndarray, start: int, stop: int) -> int:
    """The first index in ``[start, stop)`` where ``flags`` holds, else ``stop - 1``."""
    hits = np.flatnonzero(flags[start:stop])
    return int(start + hits[0]) if hits.size else max(start, stop - 1)


def _silence_before(heard: np.ndarray, index: int) -> int:
    """Where the silence before ``index`` starts."""
    while index > 0 and not heard[index - 1]:
        index -= 1
    return index
