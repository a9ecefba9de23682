"""Captions: where each piece of a result was placed, and its text, as SRT, WebVTT or JSON.

    speech = voice.generate("Hello there. [pause:1s] How are you?")
    for caption in speech.captions:
        print(caption.start, caption.end, caption.text)
    Path("hello.srt").write_text(captions.write(speech.captions, "srt"))

A caption's times are the samples its piece's audio occupies in the result (after silence
trimming, fades and pauses), exact: ``start_sample`` to ``end_sample``. ``text`` is what the
model read (numbers as words, with ``normalize_text``), ``written`` the text as written (a
long segment's piece: the written words read as its words, ``text/written.py``; None where the
two texts could not be matched); the files show ``written`` where known. Words' times within a
piece come from aligning its audio with its text (``omnivoice_rt.align``), asked for apart:
:func:`write_words`.
``speaker`` names who says it (a dialogue script's turn, a dub's "Name:" cue): SRT writes
"Name: text", WebVTT its voice tag ``<v Name>``, JSON a ``speaker`` field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

FORMATS = ("srt", "vtt", "json")


class CaptionError(ValueError):
    """A caption format this runtime does not write."""


@dataclass(frozen=True)
class Caption:
    """One spoken piece: the samples it occupies in its result, and what it says."""

    start_sample: int
    end_sample: int  # one past its last sample
    sample_rate: int
    text: str  # as the model read it
    written: str | None = None  # as written, where known
    speaker: str | None = None  # who says it, in a dialogue script or a dub's "Name:" cue

    @property
    def start(self) -> float:
        """Seconds from the start of the result."""
        return self.start_sample / self.sample_rate

    @property
    def end(self) -> float:
        return self.end_sample / self.sample_rate

    @property
    def shown(self) -> str:
        """The text a caption file shows: as written where known, on one line."""
        return " ".join((self.written or self.text).split())

    def at_rate(self, rate: int, ahead: int, length: int, last: bool = True) -> Caption:
        """This caption in its audio resampled to ``rate``, whose first sample is at ``ahead``
        of an output ``length`` samples long (a streaming resampler's delay moves it): the same
        seconds, in the output's samples, within it; but where more of the stream follows
        (``last`` False), its end may pass ``length`` by the samples the resampler still holds,
        which come out with the next piece."""

        def sample(at: int) -> int:
            return max(round(at * rate / self.sample_rate) + ahead, 0)

        start, end = min(sample(self.start_sample), length), sample(self.end_sample)
        if last:
            end = min(end, length)
        return replace(self, start_sample=start, end_sample=max(end, start), sample_rate=rate)

    def moved(self, samples: int) -> Caption:
        """This caption ``samples`` later (a piece placed after others)."""
        return replace(
            self, start_sample=self.start_sample + samples, end_sample=self.end_sample + samples
        )


def format_of(path: str | Path) -> str:
    """The caption format a file name asks for (``.srt``, ``.vtt``, ``.json``)."""
    kind = Path(path).suffix.lower().lstrip(".")
    if kind not in FORMATS:
        raise CaptionError(
            f"captions are written as {', '.join('.' + f for f in FORMATS)}; "
            f"{Path(path).name!r} is none of them"
        )
    return kind


def write(captions: list[Caption], kind: str) -> str:
    """``captions`` as a document of ``kind`` (``FORMATS``)."""
    if kind == "srt":
        return "".join(
            f"{n}\n{_clock(c.start_sample, c.sample_rate, ',')} --> "
            f"{_clock(c.end_sample, c.sample_rate, ',')}\n"
            f"{c.speaker + ': ' if c.speaker else ''}{c.shown}\n\n"
            for n, c in enumerate(captions, 1)
        )
    if kind == "vtt":
        cues = "".join(
            f"{n}\n{_clock(c.start_sample, c.sample_rate, '.')} --> "
            f"{_clock(c.end_sample, c.sample_rate, '.')}\n{_voice(c)}{_vtt_text(c.shown)}\n\n"
            for n, c in enumerate(captions, 1)
        )
        return "WEBVTT\n\n" + cues
    if kind == "json":
        return json.dumps(as_json(captions), ensure_ascii=False, indent=1) + "\n"
    raise CaptionError(f"unknown caption format {kind!r}; use one of {', '.join(FORMATS)}")


def write_words(captions: list[Caption], words: list, kind: str) -> str:
    """A result's words (``align.speech_words``: each caption's words in order) as a document of
    ``kind``: SRT a cue a placed word (:func:`_word_cues`); WebVTT a cue a caption, each placed
    word after its timestamp tag (``<00:00:01.250>word``, karaoke style), an unplaced one with
    none; JSON ``{"words": [...]}`` with null times for a word not placed."""
    if kind == "json":
        return json.dumps({"words": [w.as_dict() for w in words]}, ensure_ascii=False, indent=1)
    if kind == "srt":
        cues = _word_cues(captions, words)
        return "".join(
            f"{n}\n{_seconds(start, ',')} --> {_seconds(end, ',')}\n{text}\n\n"
            for n, (start, end, text) in enumerate(cues, 1)
        )
    if kind == "vtt":
        cues, split = [], words_by_caption(captions, words)
        for n, (c, own) in enumerate(zip(captions, split, strict=True), 1):
            text = "".join(
                space + (f"<{_seconds(w.start, '.')}>" if w.start is not None else "")
                + _vtt_text(shown)
                for w, (space, shown) in zip(own, as_shown(c, own), strict=True)
            )  # fmt: skip
            cues.append(
                f"{n}\n{_clock(c.start_sample, c.sample_rate, '.')} --> "
                f"{_clock(c.end_sample, c.sample_rate, '.')}\n{_voice(c)}{text}\n\n"
            )
        return "WEBVTT\n\n" + "".join(cues)
    raise CaptionError(f"unknown caption format {kind!r}; use one of {', '.join(FORMATS)}")


def _word_cues(captions: list[Caption], words: list) -> list[tuple[float, float, str]]:
    """SRT's word cues (start, end, text): a cue a placed word, a word not placed shown in the
    cue of the placed word before it in its caption (the first's after it), so that no word
    is lost and none is given a time of its own; words placed at one span (written words read
    as one, "1 000") one cue; a caption with no word placed, one cue of its span (none for a
    caption with no word)."""
    cues: list[tuple[float, float, str]] = []
    for c, own in zip(captions, words_by_caption(captions, words), strict=True):
        shown = as_shown(c, own)
        placed = [k for k, w in enumerate(own) if w.start is not None]
        if not placed:
            cues += [(c.start, c.end, _joined(shown))] if own else []
            continue
        bounds = [0, *placed[1:], len(own)]  # each cue's words: a placed word and those after
        for k, a, b in zip(placed, bounds, bounds[1:], strict=False):
            if a and cues[-1][:2] == (own[k].start, own[k].end):  # words read as one ("1 000")
                cues[-1] = (*cues[-1][:2], cues[-1][2] + shown[a][0] + _joined(shown[a:b]))
            else:
                cues.append((own[k].start, own[k].end, _joined(shown[a:b])))
    return cues


def _joined(shown: list[tuple[str, str]]) -> str:
    """Words as :func:`as_shown` gives them, joined as the caption shows them."""
    return "".join(space + word for space, word in shown).strip()


def as_shown(caption: Caption, own: list) -> list[tuple[str, str]]:
    """Each of a caption's words as its text shows it: the space before it ("" between two
    Chinese characters) and the word with any space inside it ("(aside) &", which
    ``align.words_of`` joins as one word), walked along ``caption.shown``."""
    shown, at, found = caption.shown, 0, []
    for w in own:
        start = at
        while at < len(shown) and shown[at].isspace():
            at += 1
        begin, left = at, sum(not ch.isspace() for ch in w.word)
        while left and at < len(shown):
            left -= not shown[at].isspace()
            at += 1
        found.append((shown[start:begin], shown[begin:at]))
    return found


def words_by_caption(captions: list[Caption], words: list) -> list[list]:
    """A result's words (``align.speech_words``) split back into its captions: each caption's
    own, as they were aligned (``align.words_of`` its shown text); ``CaptionError`` where they
    are not this result's words."""
    from omnivoice_rt.align import words_of

    counts = [len(words_of(c.shown)) for c in captions]
    if sum(counts) != len(words):
        raise CaptionError(
            f"{len(words)} words for captions of {sum(counts)}: the words of another result"
        )
    left = iter(words)
    return [[next(left) for _ in range(count)] for count in counts]


def _seconds(seconds: float, separator: str) -> str:
    return _clock(round(seconds * 1000), 1000, separator)


def as_json(captions: list[Caption]) -> list[dict]:
    """The captions as JSON values: seconds (to the microsecond), samples and texts."""
    return [
        {
            "start": round(c.start, 6),
            "end": round(c.end, 6),
            "start_sample": c.start_sample,
            "end_sample": c.end_sample,
            "sample_rate": c.sample_rate,
            "text": c.text,
            "written": c.written,
            **({"speaker": c.speaker} if c.speaker else {}),
        }
        for c in captions
    ]


def from_json(entries: list[dict]) -> list[Caption]:
    """Captions from :func:`as_json`'s values."""
    return [
        Caption(
            e["start_sample"],
            e["end_sample"],
            e["sample_rate"],
            e["text"],
            e["written"],
            e.get("speaker"),
        )
        for e in entries
    ]


def _clock(sample: int, rate: int, separator: str) -> str:
    """HH:MM:SS,mmm (SRT) or HH:MM:SS.mmm (WebVTT): the millisecond at or before ``sample``."""
    milliseconds = sample * 1000 // rate
    seconds, ms = divmod(milliseconds, 1000)
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}{separator}{ms:03d}"


def _voice(caption: Caption) -> str:
    """WebVTT's voice tag naming the caption's speaker (``<v Ann>``), where it has one (a
    speaker's name has no markup: ``text.script.is_name``)."""
    return f"<v {caption.speaker}>" if caption.speaker else ""


def _vtt_text(text: str) -> str:
    """A cue's text as WebVTT takes it: &, < and > escaped (so no "-->" and no tags)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
