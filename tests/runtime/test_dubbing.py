"""Dubbing from subtitles (``omnivoice_rt.text.subtitles``, ``omnivoice_rt.dubbing``, ``dub`` on
the command line): files written by the ``srt`` and ``webvtt-py`` libraries read back as their
cues; bad files named by their first bad cue, bounded; on the tiny fixture every cue's speech
starts at its cue's time (to the sample) and ends before the next cue, one speaker is one voice,
and a cue that cannot fit is reported with what it needs, nothing made."""

from __future__ import annotations

import datetime
import json
import subprocess
import sys

import numpy as np
import pytest

from omnivoice_rt.dubbing import DubError, dub
from omnivoice_rt.text import subtitles
from omnivoice_rt.text.subtitles import Cue, SubtitleError

FAST = dict(num_step=4, seed=2, normalize_text=False)


def cue(number, start, end, text) -> Cue:
    return Cue(number, start, end, text)


@pytest.fixture(scope="module")
def voice(fp32_voice):
    """The session's fp32 model (conftest)."""
    return fp32_voice


# ----------------------------------------------------------------------------- reading


def test_srt_written_by_the_srt_library_reads_back_as_its_cues(tmp_path):
    srt = pytest.importorskip("srt", reason="the srt library (dev extra)")
    written = [
        srt.Subtitle(1, datetime.timedelta(seconds=1.25), datetime.timedelta(seconds=3), "Hello."),
        srt.Subtitle(
            2,
            datetime.timedelta(hours=1, seconds=4.5),
            datetime.timedelta(hours=1, seconds=6.001),
            "<i>Two</i>\nlines & more",
        ),
    ]
    path = tmp_path / "film.srt"
    path.write_text(srt.compose(written), encoding="utf-8")
    assert subtitles.read(path) == [
        Cue(1, 1.25, 3.0, "Hello."),
        Cue(2, 3604.5, 3606.001, "Two lines & more"),
    ]


def test_vtt_written_by_webvtt_py_reads_back_as_its_cues(tmp_path):
    webvtt = pytest.importorskip("webvtt", reason="webvtt-py (dev extra)")
    document = webvtt.WebVTT()
    for start, end, text in [
        ("00:00:00.500", "00:00:02.000", "First line"),
        ("00:01:02.250", "00:01:04.000", "Tom & Jerry <b>run</b>"),
    ]:
        document.captions.append(webvtt.Caption(start, end, text))
    path = tmp_path / "film.vtt"
    document.save(str(path))
    cues = subtitles.read(path)
    assert [(c.start, c.end) for c in cues] == [(0.5, 2.0), (62.25, 64.0)]
    assert cues[0].text == "First line" and cues[1].text.startswith("Tom & Jerry")
    notes = "WEBVTT - a title\n\nNOTE about it\n\nSTYLE\n::cue {}\n\nid-1\n00:01.000 --> 00:02.000 line:0\nA &lt;b&gt;\n"
    assert subtitles.parse(notes, "vtt") == [Cue(1, 1.0, 2.0, "A <b>")]


@pytest.mark.parametrize(
    ("document", "kind", "words"),
    [
        (
            "1\n00:00:01,000 --> 00:00:02,000\nfine\n\n2\n00:00:03,000 -> 00:00:04,000\nbad",
            "srt",
            "cue 2 (line 6)",
        ),
        ("1\n00:00:05,000 --> 00:00:04,000\nbackwards", "srt", "ends (4.000 s) before it starts"),
        ("x\n00:00:01,000 --> 00:00:02,000\nhi", "srt", "neither its number nor its times"),
        ("00:01.000 --> 00:02.000\nno header", "vtt", "starts with the line WEBVTT"),
        ("", "srt", "no cues"),
        ("1\n99:00:00,000 --> 99:00:01,000\nlate", "srt", "at most 6 hours"),
        ("1\n00:00:01,000 --> 00:00:02,000\nhi", "ass", "unknown subtitle format"),
    ],
)
def test_a_bad_file_names_its_first_bad_cue(document, kind, words):
    with pytest.raises(SubtitleError, match=words.replace("(", r"\(").replace(")", r"\)")):
        subtitles.parse(document, kind)


def test_big_files_are_refused_before_they_are_read(tmp_path):
    big = tmp_path / "big.srt"
    big.write_bytes(b"\n" * ((2 << 20) + 1))
    with pytest.raises(SubtitleError, match="at most 2 MB"):
        subtitles.read(big)
    many = "".join(f"{n}\n00:00:01,000 --> 00:00:02,000\nx\n\n" for n in range(1, 5002))
    with pytest.raises(SubtitleError, match="more than 5000 cues"):
        subtitles.parse(many, "srt")
    with pytest.raises(SubtitleError, match=r"\.srt or \.vtt"):
        subtitles.read(tmp_path / "film.txt")
    latin = tmp_path / "latin.srt"
    latin.write_bytes("1\n00:00:01,000 --> 00:00:02,000\ncaf\xe9\n".encode("latin-1"))
    with pytest.raises(SubtitleError, match="not UTF-8"):
        subtitles.read(latin)


# ----------------------------------------------------------------------------- dubbing


def test_each_cue_starts_at_its_time_and_ends_before_the_next(voice):
    cues = [
        cue(1, 0.5, 2.5, "The first cue is here."),
        cue(2, 3.0, 4.2, "A second one, much longer than its short window allows."),
        cue(3, 6.0, 9.0, "And a third."),
    ]
    dubbed = dub(voice, cues, FAST, max_speed=10.0)
    rate = dubbed.sample_rate
    assert dubbed.waveform.shape[-1] == round(9.0 * rate)  # the last cue's end
    assert [c.written for c in dubbed.captions] == [c.text for c in cues]
    for caption, this, after in zip(dubbed.captions, cues, [*cues[1:], None], strict=True):
        assert caption.start_sample == round(this.start * rate)  # within a sample, not a frame
        assert caption.end_sample <= round((after.start if after else this.end) * rate)
        assert dubbed.waveform[caption.start_sample : caption.start_sample + 240].any()
    # between the cues, silence; the second was spoken faster to fit, the others as they are
    assert not dubbed.waveform[dubbed.captions[0].end_sample : round(3.0 * rate)].any()
    speeds = [entry["speed"] for entry in dubbed.report["cues"]]
    assert speeds[0] == pytest.approx(1.0, abs=0.05) and speeds[1] > 1.2
    assert dubbed.report["cues"][1]["duration"] == pytest.approx(1.2)
    assert dubbed.report["warnings"] == []
    json.dumps(dubbed.report)  # JSON values


def test_a_cue_sounds_as_the_same_request_does_alone(voice):
    """A cue's placed samples are ``generate``'s speech for its text at its duration, and a
    voice without a reference keeps its first cue's voice (``Speech.voice_prompt``)."""
    cues = [cue(1, 1.0, 3.0, "Hello there."), cue(2, 4.0, 6.0, "Then more words.")]
    dubbed = dub(voice, cues, FAST)
    first_entry, second_entry = dubbed.report["cues"]
    first = voice.generate("Hello there.", duration=first_entry["duration"], **FAST)
    a = first.captions[0]
    placed = dubbed.captions[0]
    np.testing.assert_array_equal(
        dubbed.waveform[placed.start_sample : placed.end_sample],
        first.waveform[a.start_sample : a.end_sample],
    )
    second = voice.generate(
        "Then more words.",
        duration=second_entry["duration"],
        voice_prompt=first.voice_prompt(),
        **FAST,
    )
    b, placed = second.captions[0], dubbed.captions[1]
    np.testing.assert_array_equal(
        dubbed.waveform[placed.start_sample : placed.end_sample],
        second.waveform[b.start_sample : b.end_sample],
    )


def test_overlapping_unordered_and_empty_cues_are_placed_with_warnings(voice):
    cues = [
        cue(2, 3.0, 5.0, "Second."),
        cue(1, 0.5, 3.5, "First, running into the second."),
        cue(3, 5.5, 6.5, "   "),
    ]
    dubbed = dub(voice, cues, FAST, max_speed=10.0)
    warnings = " ".join(dubbed.report["warnings"])
    assert "not in time order" in warnings and "cue 1 overlaps cue 2 by 0.500 s" in warnings
    assert "cue 3 has no text" in warnings
    assert [e["number"] for e in dubbed.report["cues"]] == [1, 2]
    assert dubbed.captions[0].end_sample <= round(3.0 * dubbed.sample_rate)
    assert dubbed.report["cues"][0]["room"] == pytest.approx(2.5)
    with pytest.raises(DubError, match="start at the same time"):
        dub(voice, [cue(1, 1.0, 2.0, "One."), cue(2, 1.0, 2.5, "Two.")], FAST)


def test_a_cue_that_cannot_fit_is_reported_and_nothing_is_made(voice):
    steps = []
    cues = [
        cue(1, 0.0, 2.0, "Short."),
        cue(2, 2.0, 2.3, "This is far too much to say in a third of a second."),
    ]
    with pytest.raises(DubError, match="cue 2 needs") as caught:
        dub(voice, cues, FAST, progress=lambda done, total: steps.append(done))
    (failure,) = caught.value.report["too_long"]
    assert failure["number"] == 2 and failure["room"] == pytest.approx(0.3)
    assert failure["speed"] > 1.5 and failure["needs"] > 0.3
    assert steps == []  # refused before any cue was made


def test_name_prefixes_speak_in_library_voices(voice, tmp_path):
    from omnivoice_rt.voices import VoiceLibrary

    library = VoiceLibrary(tmp_path, writable=True)
    library.add_design("narrator", "male, low pitch")
    speakers = {entry.name: library.options(entry.name) for entry in library.entries()}
    cues = [cue(1, 0.5, 2.5, "narrator: Once upon a time."), cue(2, 3.0, 5.0, "alloy: Hello.")]
    dubbed = dub(voice, cues, FAST, speakers)
    assert [e["speaker"] for e in dubbed.report["cues"]] == ["narrator", "alloy"]
    assert [c.written for c in dubbed.captions] == ["Once upon a time.", "Hello."]
    assert [c.speaker for c in dubbed.captions] == ["narrator", "alloy"]
    # a name in any script, after a full-width colon too (a script's names: text/script.py)
    named = dub(voice, [cue(1, 0.5, 2.5, "María：Once upon a time.")], FAST,
                {**speakers, "María": library.options("narrator")})  # fmt: skip
    assert named.captions[0].speaker == "María"
    assert named.captions[0].written == "Once upon a time."
    np.testing.assert_array_equal(named.waveform, dubbed.waveform[: named.waveform.size])
    alone = voice.generate(
        "Once upon a time.",
        instruct="male, low pitch",
        duration=dubbed.report["cues"][0]["duration"],
        **FAST,
    )
    a, placed = alone.captions[0], dubbed.captions[0]
    np.testing.assert_array_equal(
        dubbed.waveform[placed.start_sample : placed.end_sample],
        alone.waveform[a.start_sample : a.end_sample],
    )
    with pytest.raises(DubError, match="no voice 'Bob'.*narrator"):
        dub(voice, [cue(1, 0.0, 2.0, "Bob: Hi.")], FAST, speakers)
    # a prefix of several words that names no voice is the cue's text ("At six: ...")
    told = dub(voice, [cue(1, 0.0, 2.0, "At six: we leave.")], FAST, speakers)
    assert told.captions[0].written == "At six: we leave." and told.captions[0].speaker is None
    # without a library, "Bob:" is part of the text
    assert dub(voice, [cue(1, 0.0, 2.0, "Bob: Hi.")], FAST).captions[0].written == "Bob: Hi."


def test_the_cli_dubs_a_file_and_writes_captions_and_report(fp32_artifacts, tmp_path):
    srt = pytest.importorskip("srt", reason="the srt library (dev extra)")
    import soundfile as sf

    from tests.runtime.test_runtime import ROOT

    source = tmp_path / "film.srt"
    source.write_text(
        "1\n00:00:00,500 --> 00:00:02,000\nGood evening.\n\n"
        "2\n00:00:02,500 --> 00:00:04,000\nHere is the news.\n",
        encoding="utf-8",
    )
    model = ["--model-dir", str(fp32_artifacts), "--precision", "fp32", "--num-step", "4"]

    def cli(*args):
        command = [sys.executable, "-m", "omnivoice_rt", "dub", *model, *args]
        return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=300)

    out = tmp_path / "film.wav"
    written = source.read_text(encoding="utf-8")
    result = cli("--subtitles", str(source), "--output", str(out), "--seed", "1")
    assert result.returncode == 0, result.stderr
    audio, rate = sf.read(out, dtype="float32")
    assert len(audio) == 4 * rate
    # film.srt -> film.wav: the placed captions go beside it, the subtitles are left as they were
    assert source.read_text(encoding="utf-8") == written
    placed = list(srt.parse((tmp_path / "film.dubbed.srt").read_text()))
    assert [c.content for c in placed] == ["Good evening.", "Here is the news."]
    assert [c.start.total_seconds() for c in placed] == [0.5, 2.5]
    report = json.loads((tmp_path / "film.json").read_text())
    assert [e["number"] for e in report["cues"]] == [1, 2]
    source.write_text("1\n00:00:00,000 --> 00:00:00,200\nFar too much to say here.\n")
    refused = cli("--subtitles", str(source), "--output", str(tmp_path / "no.wav"))
    assert refused.returncode == 2 and "cue 1 needs" in refused.stderr
    assert not (tmp_path / "no.wav").exists()
    assert json.loads((tmp_path / "no.json").read_text())["too_long"][0]["number"] == 1
    onto = cli("--subtitles", str(source), "--output", str(out), "--captions", str(source))
    assert onto.returncode == 2 and "is the subtitle file being dubbed" in onto.stderr
    assert source.read_text(encoding="utf-8").startswith("1\n00:00:00,000")
    bad = tmp_path / "bad.srt"
    bad.write_text("1\nnot a time\nhi\n")
    refused = cli("--subtitles", str(bad), "--output", str(tmp_path / "bad.wav"))
    assert refused.returncode == 2 and "cue 1 (line 2)" in refused.stderr
    assert "Traceback" not in refused.stderr
