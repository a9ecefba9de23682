"""Audio at the rate asked (``sample_rate``; issue 53's formats and rates): the OpenAI door's
answers, streamed and whole, decoded by FFmpeg (a decoder other than libsndfile, which writes
them), at the rate asked and as long as the model's audio within the codec's frames; a rate a
format cannot take is a 400 naming ``sample_rate``; the command line's ``--sample-rate``; the
runtime's ``sample_rate``, which every door passes on (the page, gradio_client and MCP:
tests/server/test_app.py and test_openai.py; Wyoming: test_wyoming.py)."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import httpx
import numpy as np
import pytest
import soundfile as sf
import soxr

from omnivoice_rt.audio.formats import Resampler, check_rate, resampled
from omnivoice_rt.speech import Speech
from tests.conftest import ROOT

RATE = 24_000
TEXT = "The train leaves at nine. Please be on time."
# what a format's encoder may add (its delay and padding): two of its frames, in samples
FRAMES = {"wav": 0, "flac": 0, "pcm": 0, "mp3": 2 * 1152, "aac": 2 * 1024}


def test_pieces_resampled_one_stream_are_the_whole_resampled_at_once():
    samples = np.random.default_rng(0).uniform(-0.5, 0.5, RATE * 3).astype(np.float32)
    resampler = Resampler(RATE, 16_000)
    made = [resampler.push(samples[i : i + 7_000]) for i in range(0, samples.size, 7_000)]
    made = np.concatenate([*made, resampler.flush()])
    whole = soxr.resample(samples, RATE, 16_000, quality="HQ")
    np.testing.assert_array_equal(made, whole)
    assert whole.size == samples.size * 2 // 3


def test_the_runtime_makes_speech_at_the_rate_asked(int4_voice):
    """``sample_rate``: the whole result is the model's resampled at once; a stream's pieces,
    through one resampler flushed with the last, are the same stream at 24 kHz resampled at once;
    the captions keep their seconds (to a sample of the new rate)."""
    text = "This is the first sentence of a text that goes on. Here is a second sentence that is also long. And a third one."
    fixed = {"seed": 5, "num_step": 4}
    whole = int4_voice.generate(text, **fixed)
    asked = int4_voice.generate(text, sample_rate=16_000, **fixed)
    assert asked.sample_rate == 16_000
    np.testing.assert_array_equal(asked.waveform, resampled(whole.waveform, RATE, 16_000))
    for caption, model in zip(asked.captions, whole.captions, strict=True):
        assert abs(caption.start - model.start) <= 1 / 16_000
        assert abs(caption.end - model.end) <= 1 / 16_000
    pieces = list(int4_voice.stream(text, sentences=True, sample_rate=8_000, **fixed))
    model = Speech.join(list(int4_voice.stream(text, sentences=True, **fixed)))
    assert len(pieces) == 2 and {piece.sample_rate for piece in pieces} == {8_000}
    joined = Speech.join(pieces)
    np.testing.assert_array_equal(joined.waveform, resampled(model.waveform, RATE, 8_000))
    for caption, made in zip(joined.captions, model.captions, strict=True):  # the same seconds
        assert abs(caption.start - made.start) <= 1 / 8_000, (caption, made)
        assert abs(caption.end - made.end) <= 1 / 8_000, (caption, made)  # the held samples


@pytest.mark.parametrize(
    "fmt, rate, words",
    [
        ("wav", 7_999, "sample_rate takes 8000 to 48000"),
        ("wav", 96_000, "sample_rate takes 8000 to 48000"),
        ("opus", 44_100, "opus is written at 8000, 12000, 16000, 24000, 48000"),
        ("mp3", 11_000, "mp3 is written at 8000, 11025"),
        ("wav", "16000", "must be a whole number"),
        ("wav", True, "must be a whole number"),
    ],
)
def test_a_rate_a_format_cannot_take_names_the_rates_it_can(fmt, rate, words):
    with pytest.raises(ValueError, match=words):
        check_rate(fmt, rate)


def test_a_machine_without_pyav_says_what_aac_needs():
    script = (
        "import sys; sys.modules['av'] = None\n"
        "from omnivoice_rt.audio.formats import available_formats, missing_encoder\n"
        "print('aac' in available_formats(), missing_encoder('aac'))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT)
    assert done.stdout.startswith("False ") and "pip install av" in done.stdout, done.stderr


def probe(data: bytes) -> tuple[int, float]:
    """The rate and the duration FFmpeg decodes ``data`` to."""
    decoded = subprocess.run(
        ["ffmpeg", "-v", "error", "-i", "pipe:0", "-f", "s16le", "-ac", "1", "pipe:1"],
        input=data,
        capture_output=True,
        check=True,
    ).stdout
    info = subprocess.run(
        ["ffprobe", "-v", "error", "-show_streams", "-of", "json", "pipe:0"],
        input=data,
        capture_output=True,
        check=True,
    ).stdout
    rate = int(json.loads(info)["streams"][0]["sample_rate"])
    return rate, len(decoded) / 2 / rate


def speech(url: str, **fields) -> httpx.Response:
    body = {"model": "tts-1", "voice": "auto", "input": TEXT, "seed": 3, **fields}
    return httpx.post(f"{url}/v1/audio/speech", json=body, timeout=300)


@pytest.mark.parametrize(
    "fmt, rate",
    [
        ("wav", 16_000),
        ("flac", 44_100),
        ("mp3", 22_050),
        ("opus", 48_000),
        ("pcm", 8_000),
        ("aac", 16_000),
        ("aac", 44_100),
    ],
)
@pytest.mark.parametrize("sentences", [False, True])
def test_the_openai_door_answers_at_the_rate_asked(app_server, fmt, rate, sentences):
    model = speech(app_server, response_format="wav", sentences=sentences)
    seconds = sf.info(io.BytesIO(model.content)).duration
    answer = speech(app_server, response_format=fmt, sample_rate=rate, sentences=sentences)
    assert answer.status_code == 200, answer.text
    if fmt == "pcm":
        made = np.frombuffer(answer.content, np.int16)
        assert made.size == round(seconds * rate)
        return
    decoded_rate, decoded = probe(answer.content)
    assert decoded_rate == rate
    extra = 0.04 if fmt == "opus" else FRAMES[fmt] / rate  # opus: two 20 ms frames
    assert seconds - 1 / rate <= decoded <= seconds + extra + 1 / rate, (decoded, seconds)


@pytest.mark.parametrize(
    "fields, words",
    [
        ({"sample_rate": 4_000}, "sample_rate takes 8000 to 48000"),
        ({"response_format": "opus", "sample_rate": 22_050}, "opus is written at"),
        ({"sample_rate": "fast"}, "must be a whole number"),
    ],
)
def test_a_rate_the_door_cannot_write_is_a_400_naming_it(app_server, fields, words):
    answer = speech(app_server, **fields)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["param"] == "sample_rate" and words in error["message"], error


def test_the_command_line_writes_at_the_rate_asked(cpu_artifacts, tmp_path):
    def cli(*args):
        command = [sys.executable, "-m", "omnivoice_rt", "synthesize", *args]
        return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=300)

    model = ["--model-dir", str(cpu_artifacts), "--text", "Hello there.", "--seed", "1"]
    out = tmp_path / "out.wav"
    done = cli(*model, "--duration", "2", "--sample-rate", "8000", "--output", str(out))
    assert done.returncode == 0, done.stderr
    info = sf.info(out)
    assert info.samplerate == 8000 and abs(info.duration - 2.0) < 0.3
    unnamed = cli(*model, "--output", str(tmp_path / "out"))  # before the model loads
    assert unnamed.returncode != 0 and "no audio format is named by its suffix" in unnamed.stderr
    for output in (["--output", str(tmp_path / "out.opus")],
                   ["--format", "opus", "--output", str(tmp_path / "out.wav")]):  # fmt: skip
        refused = cli(*model, "--sample-rate", "44100", *output)
        assert refused.returncode != 0 and "opus is written at" in refused.stderr
        assert "Traceback" not in refused.stderr
    aac = tmp_path / "out.audio"  # --format, whatever the suffix
    done = cli(*model, "--duration", "2", "--sample-rate", "16000", "--format", "aac",
               "--output", str(aac))  # fmt: skip
    assert done.returncode == 0, done.stderr
    rate, seconds = probe(aac.read_bytes())
    wav = info.duration  # the same request's, as a wav at 8 kHz
    assert rate == 16000 and wav - 1 / 8000 <= seconds <= wav + FRAMES["aac"] / rate + 1 / 8000
