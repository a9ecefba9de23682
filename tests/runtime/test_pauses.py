"""Pauses and SSML (omnivoice_rt/text/markup.py) and captions (omnivoice_rt/captions.py): what a
text's markup means, what it refuses, and, on the tiny fixture, that every silence lands where it
was asked, exact to the sample, and every caption where its piece's samples are."""

from __future__ import annotations

import json

import numpy as np
import pytest

from omnivoice_rt import captions as captions_module
from omnivoice_rt.audio import ops as audio_ops
from omnivoice_rt.request import OptionError, Request
from omnivoice_rt.speech import Speech
from omnivoice_rt.text.markup import MarkupError, Segment, Silence, parse

SPEAK = '<speak version="1.1" xmlns="http://www.w3.org/2001/10/synthesis" xml:lang="en-US">'


def texts(parts) -> list:
    """The parts as plain values: a segment's text (with its language and rate where set), a
    silence's seconds."""
    shown = []
    for part in parts:
        if isinstance(part, Silence):
            shown.append(part.seconds)
        else:
            extra = tuple(x for x in (part.language, part.rate) if x not in (None, 1.0))
            shown.append((part.text, *extra) if extra else part.text)
    return shown


# ----------------------------------------------------------------------------- the markup


def test_a_text_without_markup_is_one_segment_as_written():
    """Nothing changes for a text without pauses: the model reads it as before, whitespace and
    the non-verbal tags included."""
    for text in ("  Hello there.\n", "[laughter] Ha. [sigh]", "a [pause] b", "x [pause:] y"[:3]):
        assert parse(text) == [Segment(text)]


def test_inline_pauses_split_the_text_and_add_up():
    parts = parse(
        "[laughter] Hello. [pause:1.5s] Well [PAUSE: 300ms][pause:200ms] then [pause:.25s]"
    )
    assert texts(parts) == ["[laughter] Hello.", 1.5, "Well", 0.5, "then", 0.25]
    assert texts(parse("[pause:2s]Hi")) == [2.0, "Hi"]
    # a segment with nothing to say between two pauses leaves their silences together
    assert texts(parse("Hi. [pause:1s] ... [pause:1s] Bye.")) == ["Hi.", 2.0, "Bye."]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("Hi [pause:abc] there", "[pause:abc] is not a pause: write [pause:1.5s] or [pause:300ms]"),
        ("Hi [pause:1.5] there", "[pause:1.5] is not a pause"),
        ("Hi [pause:-1s] there", "[pause:-1s] is not a pause"),
        ("Hi [pause:11s] there", "[pause:11s] is too long: a pause is at most 10 s"),
        ("[pause:1s] [pause:2s]", "nothing to say besides its pauses"),
        ("a [pause:1ms] " * 201, "201 segments between its pauses and tags; the limit is 200"),
    ],
)
def test_a_bad_pause_is_one_line_naming_the_fix(text, words):
    with pytest.raises(MarkupError, match=None) as caught:
        parse(text)
    assert words in str(caught.value), str(caught.value)


def test_ssml_breaks_sentences_paragraphs_rates_subs_and_languages():
    document = (
        f"{SPEAK}<p><s>First sentence.</s><s>Second one.</s></p>"
        '<p>Call <sub alias="the World Wide Web Consortium">W3C</sub> now.<break time="1.5s"/>'
        '<prosody rate="slow">Slowly<break strength="weak"/>'
        '<prosody rate="200%">twice that</prosody></prosody>'
        '<lang xml:lang="fr-FR">Bonjour [pause:200ms] à tous</lang></p><break/></speak>'
    )
    assert texts(parse(document)) == [
        ("First sentence.", "en-US"),
        0.5,  # a sentence's own silence
        ("Second one.", "en-US"),
        0.75,  # a paragraph's (the longest of a row: not the sentence's added)
        ("Call", "en-US"),
        ("the World Wide Web Consortium", "en-US"),
        ("now.", "en-US"),
        1.5,
        ("Slowly", "en-US", 0.75),
        0.25,
        ("twice that", "en-US", 1.5),  # a rate within a rate: their product
        ("Bonjour", "fr-FR"),
        0.2,  # an inline pause inside SSML
        ("à tous", "fr-FR"),
        0.5,  # a <break/> without attributes is "medium", asked: kept at the end
    ]
    # no silence of its own before the first sentence or after the last
    assert texts(parse("<speak><s>One.</s><s>Two.</s></speak>")) == ["One.", 0.5, "Two."]
    assert texts(parse('<?xml version="1.0"?>\n<speak>Hi &amp; bye</speak>')) == ["Hi & bye"]


@pytest.mark.parametrize(
    ("document", "words"),
    [
        (
            "<speak>Hi <voice name='x'>there</voice></speak>",
            '<voice name="..."> makes a dialogue script: speak the text as one',
        ),
        (
            "<speak>Hi <voice>there</voice></speak>",
            '<voice name="..."> makes a dialogue script',
        ),
        ("<speak><say-as interpret-as='date'>1/2</say-as></speak>", "<say-as> is not supported"),
        ("<speak><emphasis>Hi</emphasis></speak>", "<emphasis> is not supported"),
        ("<speak><audio src='http://x/a.wav'/>Hi</speak>", "<audio> is not supported"),
        ("<speak><prosody pitch='high'>Hi</prosody></speak>", "<prosody> takes rate, not pitch"),
        ("<speak><prosody rate='quick'>Hi</prosody></speak>", "use x-slow, slow, medium"),
        ("<speak><prosody rate='-100%'>Hi</prosody></speak>", '<prosody rate="-100%">'),
        ("<speak>Hi<break strength='huge'/></speak>", "use one of none, x-weak"),
        ("<speak>Hi<break time='20s'/></speak>", "is too long: a pause is at most 10 s"),
        ("<speak>Hi <sub>W3C</sub></speak>", '<sub> needs alias="what to say"'),
        ("<speak>Hi <s>there</speak>", "not well formed at line 1, column 21: mismatched tag"),
        ("<speak>Fish &chips;</speak>", "not well formed at line 1, column 13: undefined entity"),
        ("<speak>Hi\n<b>there</speak>", "SSML at line 2, column 1: <b> is not supported"),
        ("<speak>Hi</speak><speak>again</speak>", "junk after document element"),
    ],
)
def test_ssml_it_cannot_read_is_refused_by_name_and_position(document, words):
    with pytest.raises(MarkupError) as caught:
        parse(document)
    assert words in str(caught.value), str(caught.value)


def test_a_request_reads_each_segment_in_its_own_language_and_speed():
    """Each segment's language resolved as a request's is, its numbers read in that language,
    its speed within the bounds; the pauses within the duration and the duration limit; every
    refusal names its option."""
    text = '<speak>I have 3 cats.<break time="1s"/><lang xml:lang="de">Ich habe 3 Katzen.</lang></speak>'
    request = Request(text, normalize_text=True, speed=1.5)
    segments = request.segments
    assert [(s.language, s.spoken) for s in segments] == [
        (None, "I have three cats."),
        ("de", "Ich habe drei Katzen."),
    ]
    assert request.normalized and request.spoken_text == "I have three cats. Ich habe drei Katzen."
    assert Request("Hi [pause:1s] there").normalized is False
    with pytest.raises(OptionError) as caught:
        Request("<speak><lang xml:lang='klingon'>Qapla'</lang></speak>")
    assert caught.value.option == "text" and "Unknown language" in str(caught.value)
    with pytest.raises(OptionError) as caught:
        Request("<speak><prosody rate='x-fast'>Hi there</prosody></speak>", speed=8.0)
    assert "<prosody rate> makes a speed of 12" in str(caught.value)
    with pytest.raises(OptionError) as caught:
        Request("Hi. [pause:2s] There.", duration=1.5)
    assert caught.value.option == "duration" and "pauses take 2 s of the 1.5 s" in str(caught.value)
    with pytest.raises(OptionError) as caught:
        Request("Hi. " + "[pause:10s] a " * 61)
    assert "pauses add up to 610 s; the limit is 600 s" in str(caught.value)


# ----------------------------------------------------------------------------- silence removal


def test_silence_removal_says_where_each_sample_came_from():
    """remove_silence_placed cuts as pydub's split_on_silence does (upstream's route), and its
    map names the source of every sample it kept."""
    from pydub.silence import split_on_silence

    rng = np.random.default_rng(3)
    parts = [
        rng.standard_normal(n) * 0.3 if k % 2 == 0 else np.zeros(n)
        for k, n in enumerate((24013, 30011, 9007, 14400, 20000, 700, 5000))
    ]
    wav = np.concatenate(parts).astype(np.float32)[None, :]
    out, placed = audio_ops.remove_silence_placed(wav, 24000, 500, 100, 100)
    segment = audio_ops._to_segment(wav, 24000)
    kept = split_on_silence(segment, 500, -50, keep_silence=500, seek_step=10)
    joined = sum(kept[1:], kept[0])
    from pydub.silence import detect_leading_silence

    start = max(0, detect_leading_silence(joined, -50) - 100)
    joined = joined[start:].reverse()
    start = max(0, detect_leading_silence(joined, -50) - 100)
    np.testing.assert_array_equal(out, audio_ops._from_segment(joined[start:].reverse()))
    quantized = audio_ops._from_segment(segment)[0]
    real = placed >= 0
    np.testing.assert_array_equal(out[0][real], quantized[placed[real]])
    assert np.all(np.diff(placed[real]) > 0) and len(out[0]) < wav.shape[-1] - 5000
    assert np.all(out[0][~real] == 0)


# ----------------------------------------------------------------------------- caption files


def example_captions() -> list:
    rate = 24000
    return [
        captions_module.Caption(2400, 40000, rate, "one point five cats", "1.5 cats"),
        captions_module.Caption(64000, 100001, rate, "a <tag> & --> arrow"),
        captions_module.Caption(3_600 * rate + 12, 3_601 * rate, rate, "an hour\nlater"),
    ]


def test_srt_and_webvtt_files_read_back_with_their_own_parsers():
    """The srt and webvtt-py libraries read what we write: the cues' times (to the millisecond at
    or before each sample) and texts (as written where known)."""
    import io

    srt = pytest.importorskip("srt", reason="the srt parser (dev extra)")
    webvtt = pytest.importorskip("webvtt", reason="the webvtt-py parser (dev extra)")

    captions = example_captions()
    starts = [c.start_sample * 1000 // 24000 for c in captions]
    ends = [c.end_sample * 1000 // 24000 for c in captions]
    shown = ["1.5 cats", "a <tag> & --> arrow", "an hour later"]
    cues = list(srt.parse(captions_module.write(captions, "srt")))
    assert [round(c.start.total_seconds() * 1000) for c in cues] == starts
    assert [round(c.end.total_seconds() * 1000) for c in cues] == ends
    assert [c.content for c in cues] == shown
    vtt = webvtt.from_buffer(io.StringIO(captions_module.write(captions, "vtt")))
    assert [round(c.start_in_seconds * 1000) for c in vtt] == [s // 1000 * 1000 for s in starts]
    assert [c.start for c in vtt][:2] == ["00:00:00.100", "00:00:02.666"]
    assert [c.text for c in vtt] == [
        "1.5 cats",
        "a &lt;tag&gt; &amp; --&gt; arrow",
        "an hour later",
    ]
    document = json.loads(captions_module.write(captions, "json"))
    assert document[0] == {
        "start": 0.1,
        "end": 1.666667,
        "start_sample": 2400,
        "end_sample": 40000,
        "sample_rate": 24000,
        "text": "one point five cats",
        "written": "1.5 cats",
    }
    assert captions_module.from_json(document) == captions
    assert captions_module.format_of("out/Film.SRT") == "srt"
    with pytest.raises(captions_module.CaptionError, match=r"written as .srt, .vtt, .json"):
        captions_module.format_of("film.txt")


def test_joined_pieces_keep_their_captions_where_they_landed():
    rate = 24000
    first = Speech(np.ones(1000, np.float32), rate, [], captions=example_captions()[:1])
    second = Speech(np.ones(500, np.float32), rate, [], captions=example_captions()[1:2])
    joined = Speech.join([first, second])
    assert [(c.start_sample, c.end_sample) for c in joined.captions] == [
        (2400, 40000),
        (65000, 101001),
    ]


# ----------------------------------------------------------------------------- on the model


@pytest.fixture(scope="module")
def voice(fp32_voice):
    """The session's fp32 model (conftest)."""
    return fp32_voice


FIRST, SECOND = "Hello there, my friend.", "How are you today?"


def test_a_pause_is_exact_silence_between_its_segments(voice):
    """[pause:1.5s]: 36,000 zero samples between the first segment's last sample and the
    second's first, where the captions say; the first segment is the text alone, sample for
    sample, up to its trailing pad."""
    speech = voice.generate(f"{FIRST} [pause:1.5s] {SECOND}", seed=1, num_step=4)
    first, second = speech.captions
    assert second.start_sample - first.end_sample == 36000
    assert not speech.waveform[first.end_sample : second.start_sample].any()
    assert speech.waveform[first.start_sample : first.end_sample].any()
    assert speech.waveform[second.start_sample : second.end_sample].any()
    assert (first.text, second.text) == (FIRST, SECOND) == (first.written, second.written)
    alone = voice.generate(FIRST, seed=1, num_step=4)
    pad = int(0.1 * speech.sample_rate)
    np.testing.assert_array_equal(speech.codes[0], alone.codes[0])
    np.testing.assert_array_equal(
        speech.waveform[: len(alone.waveform) - pad], alone.waveform[:-pad]
    )
    assert (alone.captions[0].start_sample, alone.captions[0].end_sample) == (
        pad,
        len(alone.waveform) - pad,
    )


def test_pauses_at_the_ends_replace_the_pads(voice):
    speech = voice.generate("[pause:0.5s] Hi there. [pause:250ms]", seed=2, num_step=4)
    (caption,) = speech.captions
    assert caption.start_sample == 12000 and len(speech.waveform) - caption.end_sample == 6000
    assert not speech.waveform[:12000].any() and not speech.waveform[-6000:].any()


def test_a_streamed_text_with_pauses_joins_into_generates_result(voice):
    """Each segment one piece: the stream's pieces, joined, are generate's samples and captions;
    the sentences of a paragraph get SSML's silence for a sentence between them."""
    text = f"<speak><p><s>{FIRST}</s><s>{SECOND}</s></p><break time='700ms'/>Goodbye.</speak>"
    whole = voice.generate(text, seed=4, num_step=4)
    pieces = list(voice.stream(text, seed=4, num_step=4))
    joined = Speech.join(pieces)
    np.testing.assert_array_equal(joined.waveform, whole.waveform)
    assert joined.captions == whole.captions and len(whole.captions) == 3
    gaps = [
        b.start_sample - a.end_sample
        for a, b in zip(whole.captions, whole.captions[1:], strict=False)
    ]
    assert gaps == [12000, 16800 + 18000]  # medium (0.5 s); strong (0.75 s) + the break (0.7 s)


def test_a_long_texts_captions_follow_its_pieces(voice):
    """A text made in several pieces, cross-faded and trimmed as one: one caption a piece, in
    order, not overlapping, each over samples of its own, from the first pad to the last."""
    from omnivoice_build.equivalence import LONG_TEXT

    speech = voice.generate(LONG_TEXT, seed=0, num_step=4)
    captions = speech.captions
    assert len(captions) == len(speech.codes) > 1
    assert " ".join(c.text for c in captions) == LONG_TEXT
    assert [c.written for c in captions] == [c.text for c in captions]
    pad = int(0.1 * speech.sample_rate)
    assert captions[0].start_sample == pad and captions[-1].end_sample == len(speech.waveform) - pad
    for before, after in zip(captions, captions[1:], strict=False):
        assert before.end_sample <= after.start_sample
    for caption in captions:
        assert speech.waveform[caption.start_sample : caption.end_sample].any()
    streamed = Speech.join(list(voice.stream(LONG_TEXT, seed=0, num_step=4)))
    assert [c.text for c in streamed.captions] == [c.text for c in captions]


def test_captions_say_what_was_written_and_what_was_read(voice):
    speech = voice.generate(
        "I have 3 cats. [pause:1s] And 2 dogs.", seed=0, num_step=2, normalize_text=True
    )
    assert [(c.written, c.text) for c in speech.captions] == [
        ("I have 3 cats.", "I have three cats."),
        ("And 2 dogs.", "And two dogs."),
    ]
    assert speech.metadata["normalized_text"] == "I have three cats. And two dogs."


def test_segments_are_planned_with_their_language_speed_and_share_of_the_duration(voice):
    text = (
        "<speak>Good morning to you all.<break time='1s'/>"
        "<lang xml:lang='fr'><prosody rate='50%'>Bonjour à tous.</prosody></lang></speak>"
    )
    job = voice._prepare(Request(text, language="en", duration=5.0), None, None)
    assert [(p.language, p.segment, p.ref_from_first) for p in job.plan] == [
        ("en", 0, False),
        ("fr", 1, True),
    ]
    assert job.silences == [None, 1.0, None]
    assert sum(p.frames for p in job.plan) == pytest.approx(4.0 * voice.frame_rate, abs=2)
    slow = voice._prepare(Request(text, language="en"), None, None).plan[1].frames
    normal = voice._prepare(Request(text.replace("50%", "100%"), language="en"), None, None)
    assert slow == pytest.approx(2 * normal.plan[1].frames, abs=1)


def test_the_cli_writes_captions_beside_the_audio(fp32_artifacts, voice, tmp_path):
    """synthesize --captions: the library's captions, as the file's suffix asks; a suffix it
    does not write is one line, before any model loads."""
    import subprocess
    import sys

    import soundfile as sf

    srt = pytest.importorskip("srt", reason="the srt parser (dev extra)")

    from tests.runtime.test_runtime import ROOT

    text = f"{FIRST} [pause:1s] {SECOND}"
    model = ["--model-dir", str(fp32_artifacts), "--precision", "fp32", "--preset", "best"]
    common = [*model, "--text", text, "--seed", "5", "--num-step", "4", "--no-normalize-text"]

    def cli(*args):
        command = [sys.executable, "-m", "omnivoice_rt", "synthesize", *args]
        return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=300)

    result = cli(
        *common, "--output", str(tmp_path / "a.wav"), "--captions", str(tmp_path / "a.srt")
    )
    assert result.returncode == 0, result.stderr
    expected = voice.generate(text, seed=5, num_step=4)
    audio, rate = sf.read(tmp_path / "a.wav", dtype="float32")
    assert len(audio) == len(expected.waveform) and rate == 24000
    cues = list(srt.parse((tmp_path / "a.srt").read_text()))
    assert [c.content for c in cues] == [FIRST, SECOND]
    assert [round(c.start.total_seconds() * 24000) for c in cues] == [
        c.start_sample // 24 * 24 for c in expected.captions
    ]
    result = cli(*common, "--output", str(tmp_path / "b.wav"), "--captions", "b.txt")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "error: captions are written as .srt, .vtt, .json; 'b.txt' is none of them"
    )
    assert not (tmp_path / "b.wav").exists()
