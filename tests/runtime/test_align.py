"""Word timings (``omnivoice_rt.align``): every word of a text placed in a recording of it, on
speech eSpeak NG makes with each word at its own rate, pauses and noise (``bench/align.py``'s),
whose true word starts eSpeak reports; and what is not speech places no word."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from bench.align import TEXTS, measure, onsets
from omnivoice_rt.align import AlignError, align, dtw, espeak, words_of
from omnivoice_rt.limits import MAX_ALIGN_S, MAX_ALIGN_WORDS
from omnivoice_rt.speech import Speech

ROOT = Path(__file__).resolve().parents[2]
TWO_SENTENCES = "The train leaves in ten minutes. Please hurry to the second platform."


@pytest.mark.parametrize(
    "text, words",
    [
        ("Hello,  world!  ", ["Hello,", "world!"]),
        ("« Bonjour » dit-il.", ["«Bonjour»", "dit-il."]),  # lone marks join a word
        ("每天早上，我很好。", ["每", "天", "早", "上，", "我", "很", "好。"]),
        ("I paid $5 for 小明's book", ["I", "paid", "$5", "for", "小", "明's", "book"]),
        ("花了¥5和$3。", ["花", "了", "¥5", "和", "$3。"]),  # a currency sign starts its number
        ("नमस्ते दुनिया", ["नमस्ते", "दुनिया"]),  # combining signs stay with their letters
        ("... ?", []),
    ],
)
def test_words_are_the_text_as_written(text, words):
    assert words_of(text) == words
    assert "".join(words_of(text)) == "".join(text.split()) or not words


@pytest.mark.parametrize("language", list(TEXTS))
def test_words_are_found_within_the_targets_on_speech_unlike_the_template(language):
    """The issue's targets, per language, on two renderings of each text (bench/align.py runs
    eight): mean start error at most 50 ms, 95th percentile at most 150 ms, at most one word in
    a hundred unplaced, or one where there are fewer words (a word the warp put in a pause, as Chinese "子" 410 ms late in one
    rendering, is unplaced: ``HEARD_SHARE``)."""
    errors, lost = [], 0
    for text in TEXTS[language]:
        e, unplaced, _took, _audio = measure(language, text, seeds=2)
        errors.append(e)
        lost += unplaced
    ms = np.concatenate(errors) * 1000
    assert lost <= max(1, 0.01 * (ms.size + lost)), (lost, ms.size)
    assert ms.mean() <= 50 and np.percentile(ms, 95) <= 150, (ms.mean(), np.percentile(ms, 95))


def test_a_word_after_a_sentence_end_is_placed_and_times_are_in_order():
    """eSpeak loses the mark at a sentence's start; the word's own event stands in for it. On
    clean speech (its pauses digital silence), eight renderings: each word within 100 ms of
    where its sound starts (without c0, a frame's level, among the features, about one
    rendering in two put a word 100-180 ms off, "Please" in the pause before it)."""
    words = words_of(TWO_SENTENCES)
    for _ in range(8):  # eSpeak's renderings differ a little from call to call
        spoken = espeak.engine().speak(words, "en+f3", pitch=70)
        truth = onsets(spoken.samples, spoken.sample_rate, spoken.starts)
        assert np.isfinite(spoken.starts).all()
        found = align(spoken.samples, spoken.sample_rate, TWO_SENTENCES, "en")
        assert [w.word for w in found] == words
        assert all(w.start is not None for w in found), found
        starts = np.array([w.start for w in found])
        error = np.abs(starts - truth)
        assert error.mean() < 0.05 and error.max() < 0.1, np.round(starts - truth, 3)
    ends = np.array([w.end for w in found])
    assert (np.diff(starts) >= 0).all() and (ends > starts).all()
    assert (ends[:-1] <= starts[1:] + 1e-9).all()
    assert ends[-1] <= spoken.samples.size / spoken.sample_rate
    # "minutes." ends where the sentence's pause starts, not where "Please" does
    assert starts[6] - ends[5] > 0.1


def test_the_same_recording_at_another_rate_gives_the_same_times():
    words = words_of(TWO_SENTENCES)
    spoken = espeak.engine().speak(words, "en+f3", pitch=70)
    import soxr

    at_24k = soxr.resample(spoken.samples, spoken.sample_rate, 24_000)
    a = align(spoken.samples, spoken.sample_rate, TWO_SENTENCES, "en")
    b = align(at_24k, 24_000, TWO_SENTENCES, "en")
    assert_close([w.start for w in a], [w.start for w in b])


def test_the_missing_word_bench_measures_each_setting_and_leaves_the_defaults():
    """``bench/missing.py``'s measure: one rendering of the English text whole and with words
    cut, under the default and under ``SKIP_SCALE`` and ``HEARD_SHARE`` None (a word never left
    out nor unheard, so no cut word is found); the module's settings are its own again
    afterwards."""
    from bench import missing
    from omnivoice_rt import align as aligner

    default = missing.current()
    assert default == (aligner.HOP_WEIGHT, aligner.SKIP_SCALE, aligner.HEARD_SHARE)
    never = (default[0], None, None)  # no word left out, none unplaced for being unheard
    text = TEXTS["en"][0]
    cases = [(text, "en", *case) for case in missing.trials("en", text, 1, "+f3", 70)]
    assert [len(case[4]) for case in cases] == [0, 1, 2]  # whole, one word cut, two cut
    results = missing.measure([default, never], cases)
    assert missing.current() == default
    assert results[never]["found"] == 0.0
    for r in results.values():
        assert r["false_whole"] == 0.0
        assert r["mean_ms"] <= 50 and r["p95_ms"] <= 150


def test_the_pocketsphinx_bench_aligns_english_both_ways():
    """``bench/sphinx_align.py``'s measure, one seed (docs/design.md section 10): eSpeak's
    template and pocketsphinx's forced alignment each place whole speech's words within the
    targets, each placing every spoken word, and pocketsphinx's forced alignment of a text with a
    word missing unplaces over five times as many spoken words as eSpeak's (its alignment of the
    whole text fails or goes astray)."""
    pytest.importorskip("pocketsphinx", reason="a trained English recogniser (dev extra)")
    from bench import sphinx_align

    stats = sphinx_align.measure(seeds=1, optional_seeds=0)
    assert stats["optional"]["missing"] == 0 and stats["espeak"]["missing"] == 4
    for name in ("espeak", "forced"):
        ms = 1000 * np.array(stats[name]["errors"])
        assert stats[name]["false_whole"] == 0 and ms.mean() <= 50, (name, stats[name])
    assert stats["forced"]["false_cut"] > 5 * max(stats["espeak"]["false_cut"], 1), stats


def test_japanese_with_kanji_is_placed_by_a_stand_in_for_each_kanji():
    """eSpeak's Japanese voice says "Chinese letter" for a kanji; with ``KANJI_STAND_IN`` the
    text as written (kanji and kana) is placed in speech of its reading (``bench/kanji.py``, two
    renderings, each against templates of its own): its groups' starts within 0.6 of eSpeak's
    own reading's error (81 against 154 ms with Debian's eSpeak NG 1.51), at most one unplaced,
    where eSpeak's reading unplaced a third."""
    from bench.kanji import TEXTS as JAPANESE
    from bench.kanji import measure as kanji_errors
    from omnivoice_rt import align as aligner

    found = kanji_errors(JAPANESE["main"], [None, aligner.KANJI_STAND_IN], seeds=2)
    (k0, a0, lost0), (k1, a1, lost1) = found[None], found[aligner.KANJI_STAND_IN]
    assert lost1 <= 1 and lost0 >= 10, (lost0, lost1)
    assert np.mean(k1 + a1) < 0.6 * np.mean(k0 + a0) and np.mean(k1 + a1) < 0.12


def test_the_same_alignment_twice_gives_the_same_times_and_templates_kept_are_bounded():
    """eSpeak's renderings of one text vary a little from call to call (its state carries over),
    which moved a Chinese word by up to 490 ms between two alignments of one recording; a text's
    template is kept (``Espeak.template``), so aligning it again gives the same times; at most
    ``TEMPLATES_KEPT`` are kept, none longer than ``TEMPLATE_KEPT_S``."""
    from bench.align import varied

    text = TEXTS["cmn"][0]
    x, rate, _truth = varied(words_of(text), "cmn", "", np.random.default_rng(3))
    first = align(x, rate, text, "cmn")
    engine = espeak.engine()
    engine.speak(words_of(text), "cmn", joiner="")  # eSpeak's state moves on
    assert align(x, rate, text, "cmn") == first
    for n in range(espeak.TEMPLATES_KEPT + 3):
        engine.template([f"word{n}"], "en")
    assert len(engine._kept) == espeak.TEMPLATES_KEPT
    again = engine.template(["word3"], "en")
    assert again is engine.template(["word3"], "en") and not again.samples.flags.writeable
    long = ["word"] * 200  # about a minute of speech: made, not kept
    assert engine.template(long, "en") is not engine.template(long, "en")


@pytest.mark.parametrize("missing", ["minutes.", "hurry"])
def test_a_word_the_recording_never_says_is_unplaced_and_the_others_placed(missing):
    """The text read without one of its words, three renderings: that word has null times,
    every other word is placed within 100 ms of where its sound starts (with ``SKIP_SCALE``
    None the word is squeezed between its neighbours)."""
    words = words_of(TWO_SENTENCES)
    cut = words.index(missing)
    said = words[:cut] + words[cut + 1 :]
    for _ in range(3):
        spoken = espeak.engine().speak(said, "en+f3", pitch=70)
        truth = onsets(spoken.samples, spoken.sample_rate, spoken.starts)
        found = align(spoken.samples, spoken.sample_rate, TWO_SENTENCES, "en")
        assert [w.word for w in found] == words
        assert found[cut].start is None and found[cut].end is None
        assert all(w.start is not None for w in found[:cut] + found[cut + 1 :]), found
        starts = np.array([w.start for w in found[:cut] + found[cut + 1 :]], np.float64)
        assert np.abs(starts - truth).max() < 0.1, np.round(starts - truth, 3)


def test_a_word_whose_time_is_silent_is_unplaced_and_the_others_placed(monkeypatch):
    """The text read with one word muted in place (its time silent, as a pause): the warp keeps
    that word where its time is, but the recording hears it in none of its frames, so it is
    unplaced (``HEARD_SHARE``); every other word is placed within 100 ms of where its sound
    starts. With ``HEARD_SHARE`` None it is given the silence as its time."""
    from omnivoice_rt import align as aligner

    words = words_of(TWO_SENTENCES)
    cut = words.index("to")  # 90 ms: the silence 50 ms either side of it reaches its neighbours
    spoken = espeak.engine().speak(words, "en+f3", pitch=70)
    truth = onsets(spoken.samples, spoken.sample_rate, spoken.starts)
    muted = spoken.samples.copy()
    muted[int(truth[cut] * spoken.sample_rate) : int(truth[cut + 1] * spoken.sample_rate)] = 0
    noise = np.random.default_rng(0).normal(0, 1e-3, muted.shape).astype(np.float32)
    found = align(muted + noise, spoken.sample_rate, TWO_SENTENCES, "en")
    assert found[cut].start is None and found[cut].end is None
    others = found[:cut] + found[cut + 1 :]
    starts = np.array([w.start for w in others], np.float64)
    assert np.abs(starts - np.r_[truth[:cut], truth[cut + 1 :]]).max() < 0.1, starts
    monkeypatch.setattr(aligner, "HEARD_SHARE", None)
    given = align(muted + noise, spoken.sample_rate, TWO_SENTENCES, "en")[cut]
    assert given.start is not None and truth[cut] - 0.1 < given.start < truth[cut + 1]


@pytest.mark.parametrize(
    "recording",
    [
        np.zeros(3 * 16_000, np.float32),
        np.random.default_rng(0).normal(0, 0.1, 3 * 16_000).astype(np.float32),
    ],
    ids=["silence", "noise"],
)
def test_no_word_is_placed_where_nothing_is_said(recording):
    found = align(recording, 16_000, "Nothing is said here at all.", "en")
    assert [w.as_dict() for w in found] == [
        {"word": w, "start": None, "end": None} for w in words_of("Nothing is said here at all.")
    ]


def test_the_input_is_bounded_and_an_empty_text_has_no_words():
    long = np.zeros(int((MAX_ALIGN_S + 1) * 8_000), np.float32)
    with pytest.raises(AlignError, match="at most 120 s"):
        align(long, 8_000, "Too long.")
    with pytest.raises(AlignError, match=f"at most {MAX_ALIGN_WORDS}"):
        align(np.zeros(16_000, np.float32), 16_000, "word " * (MAX_ALIGN_WORDS + 1))
    assert align(np.zeros(16_000, np.float32), 16_000, " ... ") == []


def assert_close(starts, others):
    """Two alignments of one recording: eSpeak NG carries a little state from one synthesis to
    the next, so its template differs by a few milliseconds a call, and a word at an unclear
    boundary may move by a few frames."""
    difference = np.abs(np.array(starts) - np.array(others))
    assert difference.mean() < 0.02 and difference.max() < 0.12, np.round(difference, 3)


def test_far_more_text_than_was_said_places_no_word_and_bad_input_is_one_line():
    """(Mixing a recording's channels is tested with a model that hears exactly what it is
    given, ``test_align_ctc``: eSpeak's template moves a little from one call to the next.)"""
    words = words_of(TWO_SENTENCES)
    spoken = espeak.engine().speak(words, "en+f3", pitch=70)
    short = spoken.samples[: spoken.sample_rate]  # one second of it, and a hundred words
    found = align(short, spoken.sample_rate, " ".join([TWO_SENTENCES] * 8), "en")
    assert len(found) == 8 * len(words) and all(w.start is None for w in found)
    with pytest.raises(AlignError, match="not numbers"):
        align(np.full(16_000, np.nan, np.float32), 16_000, "Hello.")
    with pytest.raises(AlignError, match="sample rate"):
        align(spoken.samples, 0, "Hello.")


# a Python program's first lines that take eSpeak NG away: neither the extra's wheel nor a
# system libespeak-ng
NO_ESPEAK = (
    "import builtins, ctypes.util, sys\n"
    "real = builtins.__import__\n"
    "def blocked(name, *a, **k):\n"
    "    if name == 'espeakng_loader': raise ImportError(name)\n"
    "    return real(name, *a, **k)\n"
    "builtins.__import__ = blocked\n"
    "ctypes.util.find_library = lambda name: None\n"
)


def test_without_espeak_ng_asking_for_words_names_the_extra():
    """Neither the extra's wheel nor a system libespeak-ng: one line naming the extra."""
    code = NO_ESPEAK + (
        "import numpy as np\n"
        "from omnivoice_rt.align import align\n"
        "try:\n"
        "    align(np.zeros(16000, np.float32), 16000, 'Hello.')\n"
        "except ValueError as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.startswith("EspeakMissing word timings need eSpeak NG"), done.stderr
    assert "pip install 'omnivoice-onnx[align]'" in done.stdout


def cli(*args, cwd=ROOT):
    return subprocess.run(
        [sys.executable, "-m", "omnivoice_rt", "align", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_hopped_frame_costs_a_squeezed_word_more_than_a_fast_one():
    """Three words of ten frames (ramps 0-9 and 40-49 around a flat 30); a recording of the
    first and last: at a cost of leaving the middle out that squeezing it at double speed
    undercuts, the warp squeezes it, unless the frames it hops over pay their distance too
    (``hop_weight``); all three said at double speed are followed frame for frame either way."""
    template = np.r_[np.arange(10.0), np.full(10, 30.0), 40 + np.arange(10.0)][:, None]
    template = template.astype(np.float32)
    onsets = gaps = np.array([0, 10, 20])
    said = np.r_[template[:10], template[20:]]
    skips = np.array([np.inf, 80.0, np.inf], np.float32)
    squeezed = dtw.warp(said, template, onsets, gaps, half=30, skips=skips)
    assert dtw.skipped(squeezed, onsets, gaps, skips).tolist() == [False, False, False]
    hopped = dtw.warp(said, template, onsets, gaps, half=30, skips=skips, hop_weight=1.0)
    assert dtw.skipped(hopped, onsets, gaps, skips).tolist() == [False, True, False]
    fast = dtw.warp(template[::2], template, onsets, gaps, half=30, hop_weight=1.0)
    assert fast[:-1].tolist() == list(range(0, 28, 2))  # the last frame may end the template


def test_the_warp_leaves_out_a_word_never_spoken_only_where_that_is_cheaper():
    """Three words of ten frames each (features 0, 5, 10); a recording of the first and last:
    without a cost to leave a word out the middle one is squeezed between them; with one, it is
    left out and found so; a recording of all three keeps every word at any cost."""
    template = np.repeat([0.0, 5.0, 10.0], 10)[:, None].astype(np.float32)
    onsets = gaps = np.array([0, 10, 20])
    said = np.repeat([0.0, 10.0], 10)[:, None].astype(np.float32)
    skips = np.array([np.inf, 1.0, np.inf], np.float32)
    squeezed = dtw.warp(said, template, onsets, gaps, half=30)
    assert dtw.skipped(squeezed, onsets, gaps, skips).tolist() == [False, False, False]
    left_out = dtw.warp(said, template, onsets, gaps, half=30, skips=skips)
    assert dtw.skipped(left_out, onsets, gaps, skips).tolist() == [False, True, False]
    assert left_out[:10].max() < 10 and left_out[10:].min() >= 20
    free = np.array([np.inf, 0.0, np.inf], np.float32)
    whole = dtw.warp(template, template, onsets, gaps, half=30, skips=free)
    assert dtw.skipped(whole, onsets, gaps, free).tolist() == [False, False, False]


def test_a_word_too_short_to_leave_out_is_never_reported_left_out():
    """A word whose template sound is shorter than ``SKIP_SHORTEST_S`` (eSpeak runs Russian "в"
    into the next word: one frame) costs inf to leave out, and a path that hops its one frame
    in an ordinary two-frame step has not left it out (eSpeak NG 1.51's "в" was reported
    unspoken so)."""
    from omnivoice_rt.align import SKIP_SHORTEST_S, _skip_costs, features

    short = round(SKIP_SHORTEST_S / features.HOP_S)  # frames
    costs = _skip_costs(np.array([20, short - 1, short, 28, 20]))  # each word's sound, frames
    assert np.isinf(costs[[0, 1, 4]]).all() and np.isfinite(costs[[2, 3]]).all()  # first, last
    template = np.repeat([0.0, 5.0, 10.0], [10, 1, 10])[:, None].astype(np.float32)
    onsets = gaps = np.array([0, 10, 11])
    said = np.repeat([0.0, 10.0], 10)[:, None].astype(np.float32)
    never = np.full(3, np.inf, np.float32)
    path = dtw.warp(said, template, onsets, gaps, half=30, skips=never)
    assert 10 not in path  # hopped
    assert dtw.skipped(path, onsets, gaps, never).tolist() == [False, False, False]
    assert dtw.skipped(path, onsets, gaps, np.zeros(3)).tolist() == [False, True, False]


def test_a_short_word_placed_where_nothing_sounds_is_said_with_the_next_word():
    """eSpeak runs Russian "в" into the next word (one frame of its own); placed in a pause
    before that word it was unplaced, though spoken: a word too short to tell apart is said
    with the next word where that one is heard, ending where it starts. A longer word, one
    before a word not heard either, and a last word stay unplaced."""
    from omnivoice_rt.align import _said_with_next

    lost = np.array([False, True, False, True, True, True, False, True, True, False, True])
    starts = np.array([0, 30, 50, 80, 90, 100, 120, 140, 141, 150, 170])
    stops = starts + np.array([20, 1, 20, 1, 1, 10, 10, 1, 1, 10, 1])
    lengths = np.array([20, 1, 20, 1, 1, 20, 10, 2, 3, 10, 1])  # template sound, frames
    still = _said_with_next(lost, starts, stops, lengths)
    assert still.tolist() == [False] * 3 + [True] * 3 + [False] * 4 + [True]
    assert lost[1] and lost[7]  # the caller's flags are its own
    assert (starts[1], stops[1]) == (49, 50)  # just before the next word's start
    assert (starts[3], stops[3]) == (80, 81)  # untouched: the word after it is lost too
    # two short words before a heard one: each ends where the next starts
    assert starts[7:10].tolist() == [145, 147, 150] and stops[7:9].tolist() == [147, 150]


def test_the_align_tool_writes_every_word_with_its_times(tmp_path):
    words = words_of(TWO_SENTENCES)
    spoken = espeak.engine().speak(words, "en+f3", pitch=70)
    sf.write(tmp_path / "speech.wav", spoken.samples, spoken.sample_rate)
    out = tmp_path / "words.json"
    done = cli(
        "--audio", str(tmp_path / "speech.wav"), "--text", TWO_SENTENCES, "--output", str(out)
    )
    assert done.returncode == 0, done.stderr
    assert "12 of 12 words placed" in done.stdout
    document = json.loads(out.read_text(encoding="utf-8"))
    assert [w["word"] for w in document["words"]] == words
    assert all(set(w) == {"word", "start", "end"} for w in document["words"])
    library = align(spoken.samples, spoken.sample_rate, TWO_SENTENCES)  # the same code
    assert_close([w["start"] for w in document["words"]], [w.start for w in library])


def test_the_align_tool_reads_the_aac_the_product_writes(tmp_path):
    """An AAC (ADTS) file, as ``--format aac`` and the OpenAI door write it, is decoded by FFmpeg
    through PyAV (libsndfile reads no AAC): every word placed, most of them AAC's 1024 priming
    samples (46 ms at 22.05 kHz) later than in the wav, within a frame or two. Both aligned by
    the tool, each in a new process, whose first template of a text is the same (one made after
    other eSpeak calls may differ a little: ``Espeak.template``)."""
    from omnivoice_rt.audio.formats import AudioWriter

    pytest.importorskip("av", reason="PyAV (the server extra)")
    words = words_of(TWO_SENTENCES)
    spoken = espeak.engine().speak(words, "en+f3", pitch=70)
    writer = AudioWriter("aac", spoken.sample_rate, False)
    data = writer.write(spoken.samples) + writer.close()
    (tmp_path / "speech.aac").write_bytes(data)
    sf.write(tmp_path / "speech.wav", spoken.samples, spoken.sample_rate)
    found = {}
    for name in ("speech.aac", "speech.wav"):
        done = cli("--audio", str(tmp_path / name), "--text", TWO_SENTENCES)
        assert done.returncode == 0, done.stderr
        found[name] = [w["start"] for w in json.loads(done.stdout)["words"]]
    starts, wav = found["speech.aac"], found["speech.wav"]
    assert None not in starts and None not in wav, found
    late = np.array(starts) - np.array(wav)
    assert abs(np.median(late) - 1024 / spoken.sample_rate) <= 0.015, late
    assert np.all(np.abs(late) <= 0.08), late  # the first word: at 0 in both


def test_the_align_tool_refuses_bad_input_in_one_line(tmp_path):
    sf.write(tmp_path / "long.wav", np.zeros(int((MAX_ALIGN_S + 5) * 8_000)), 8_000)
    (tmp_path / "not.wav").write_text("not audio")
    for args, said in [
        (["--audio", str(tmp_path / "long.wav"), "--text", "x"], "at most 120 s"),
        (["--audio", str(tmp_path / "not.wav"), "--text", "x"], "not audio"),
        (["--audio", str(tmp_path / "long.wav"), "--text", "x", "--language", "xx-q"], "language"),
    ]:
        done = cli(*args)
        assert done.returncode == 2, done.stderr
        assert said in done.stderr and "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr


# ------------------------------------------------------------- a result's words, and their files

SPOKEN = "Hello there, friend. [pause:0.5s] How are you today?"


@pytest.fixture(scope="module")
def spoken(fp32_voice):
    """A result of two pieces (the pause between them) with its words (random weights: their
    places are whatever the aligner finds, but each lies in its own piece)."""
    speech = fp32_voice.generate(SPOKEN, seed=0, num_step=4, language="en")
    speech.align_words("en")
    return speech


def test_a_results_words_are_its_pieces_words_each_in_its_piece(spoken):
    assert len(spoken.captions) == 2
    expected = [words_of(c.written or c.text) for c in spoken.captions]
    assert [w.word for w in spoken.words] == [w for piece in expected for w in piece]
    words = iter(spoken.words)
    for caption, own in zip(spoken.captions, expected, strict=True):
        for word in [next(words) for _ in own]:
            if word.start is not None:
                assert caption.start - 1e-3 <= word.start <= word.end <= caption.end + 1e-3
    placed = [w for w in spoken.words if w.start is not None]
    assert all(a.end <= b.start + 1e-9 for a, b in zip(placed, placed[1:], strict=False))


def test_word_captions_read_back_with_their_own_parsers(spoken):
    import io

    from omnivoice_rt import captions

    srt = pytest.importorskip("srt", reason="the srt parser (dev extra)")
    webvtt = pytest.importorskip("webvtt", reason="the webvtt-py parser (dev extra)")

    placed = [w for w in spoken.words if w.start is not None]
    cues = list(srt.parse(captions.write_words(spoken.captions, spoken.words, "srt")))
    assert [c.content for c in cues] == [w.word for w in placed]
    assert [c.start.total_seconds() for c in cues] == pytest.approx([w.start for w in placed])
    vtt = list(
        webvtt.from_buffer(io.StringIO(captions.write_words(spoken.captions, spoken.words, "vtt")))
    )
    assert len(vtt) == 2
    # each word after its timestamp tag, karaoke style: the tags are the words' starts
    first = vtt[0].raw_text
    assert first.startswith(f"<{_stamp(spoken.words[0].start)}>Hello")
    stamps = [w.start for w in spoken.words[:3] if w.start is not None]
    assert all(f"<{_stamp(s)}>" in first for s in stamps)
    document = json.loads(captions.write_words(spoken.captions, spoken.words, "json"))
    assert document == {"words": [w.as_dict() for w in spoken.words]}


def test_srt_word_captions_lose_no_word_and_time_none_unplaced():
    """An unplaced word is shown in the cue of the placed word before it in its caption (the
    first in the next's), a caption with no word placed is one cue of its span, words read as
    one ("1 000") one cue, a caption with no word none: every word is in the document, read
    back by the srt parser, and no cue starts at an unplaced word."""
    from omnivoice_rt import captions
    from omnivoice_rt.align import Word

    srt = pytest.importorskip("srt", reason="the srt parser (dev extra)")
    said = [
        captions.Caption(0, 24000, 24000, "Hello big world."),
        captions.Caption(24000, 48000, 24000, "Bye now."),
        captions.Caption(48000, 60000, 24000, "Gone."),
        captions.Caption(60000, 72000, 24000, "♪ ♪"),  # no word: no cue
        captions.Caption(72000, 96000, 24000, "one thousand times", "1 000 times"),
    ]
    words = [Word("Hello", 0.1, 0.3), Word("big", None, None), Word("world.", 0.5, 0.8),
             Word("Bye", None, None), Word("now.", 1.2, 1.5), Word("Gone.", None, None),
             Word("1", 3.1, 3.6), Word("000", 3.1, 3.6), Word("times", 3.6, 3.9)]  # fmt: skip
    cues = list(srt.parse(captions.write_words(said, words, "srt")))
    assert [(c.start.total_seconds(), c.end.total_seconds(), c.content) for c in cues] == [
        (0.1, 0.3, "Hello big"), (0.5, 0.8, "world."), (1.2, 1.5, "Bye now."), (2.0, 2.5, "Gone."),
        (3.1, 3.6, "1 000"), (3.6, 3.9, "times"),
    ]  # fmt: skip


def test_word_captions_show_the_text_as_written_between_the_words():
    """Chinese characters are not spaced apart, and a word holding a space ("(aside) &", one
    word to ``words_of``) keeps it, in WebVTT's cue text (read back by webvtt-py) and SRT's."""
    import html
    import io

    from omnivoice_rt import captions
    from omnivoice_rt.align import Word, words_of

    srt = pytest.importorskip("srt", reason="the srt parser (dev extra)")
    webvtt = pytest.importorskip("webvtt", reason="webvtt-py (dev extra)")
    said = [captions.Caption(0, 24000, 24000, "你好，世界。", speaker="小明"),
            captions.Caption(24000, 48000, 24000, "an (aside) & more")]  # fmt: skip
    words = [Word(w, 0.2 * k, 0.2 * k + 0.1) for k, w in enumerate(words_of("你好，世界。"))]
    words += [Word("an", 1.1, 1.2), Word("(aside)&", None, None), Word("more", 1.6, 1.8)]
    vtt = list(webvtt.from_buffer(io.StringIO(captions.write_words(said, words, "vtt"))))
    # webvtt-py leaves the cue's character references as they are ("&amp;")
    assert [html.unescape(c.text) for c in vtt] == ["你好，世界。", "an (aside) & more"]
    assert vtt[0].voice == "小明"
    cues = list(srt.parse(captions.write_words(said, words, "srt")))
    assert [c.content for c in cues] == ["你", "好，", "世", "界。", "an (aside) &", "more"]


def test_words_of_another_result_are_refused_by_the_caption_writer(spoken):
    from omnivoice_rt import captions

    with pytest.raises(captions.CaptionError, match="words of another result"):
        captions.write_words(spoken.captions, spoken.words[:-1], "vtt")


def _stamp(seconds: float) -> str:
    ms = round(seconds * 1000)
    return f"{ms // 3_600_000:02d}:{ms // 60_000 % 60:02d}:{ms // 1000 % 60:02d}.{ms % 1000:03d}"


def test_joined_pieces_keep_their_words_where_they_landed(fp32_voice):
    pieces = list(fp32_voice.stream(SPOKEN, seed=0, num_step=4, language="en"))
    for piece in pieces:
        piece.align_words("en")
    joined = Speech.join(pieces)
    offset = pieces[0].seconds
    assert joined.words[: len(pieces[0].words)] == pieces[0].words
    for word, own in zip(joined.words[len(pieces[0].words) :], pieces[1].words, strict=True):
        assert word.word == own.word
        if own.start is not None:
            assert word.start == pytest.approx(own.start + offset, abs=1e-3)


def test_the_command_line_writes_word_captions_beside_the_captions(fp32_artifacts, tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "omnivoice_rt",
            "synthesize",
            "--model-dir",
            str(fp32_artifacts),
            "--precision",
            "fp32",
            "--text",
            SPOKEN,
            "--language",
            "English",
            "--seed",
            "0",
            "--num-step",
            "4",
            "--output",
            str(tmp_path / "out.wav"),
            "--captions",
            str(tmp_path / "out.srt"),
            "--word-captions",
            str(tmp_path / "words.json"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    words = json.loads((tmp_path / "words.json").read_text(encoding="utf-8"))["words"]
    assert [w["word"] for w in words] == words_of("Hello there, friend.") + words_of(
        "How are you today?"
    )
    assert (tmp_path / "out.srt").read_text().count(" --> ") == 2  # --captions keeps its meaning
    bad = subprocess.run(
        [sys.executable, "-m", "omnivoice_rt", "synthesize", "--model-dir", str(fp32_artifacts)]
        + ["--text", "Hi.", "--output", str(tmp_path / "x.wav"), "--word-captions", "w.txt"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 2 and "written as .srt, .vtt, .json" in bad.stderr
