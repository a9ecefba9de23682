"""Transcribing references: the recogniser (a tiny random-weight Whisper in the onnx-community
layout, loaded by onnx-asr, that hears ``TRANSCRIPT`` in any audio), cloning without a typed
transcript, the Hub download and the offline cache, and a recogniser that cannot load."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from omnivoice_build.equivalence import GREEDY, write_reference
from omnivoice_rt.audio.asr import DEFAULT_ASR_MODEL, Transcriber
from omnivoice_rt.errors import ArtifactError
from omnivoice_rt.model import OmniVoiceONNX
from tests.conftest import ROOT, TRANSCRIPT
from tests.hub_server import HubServer


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return write_reference(str(tmp_path_factory.mktemp("asr-ref") / "reference.wav"))


@pytest.fixture(scope="module")
def voice(fp32_artifacts, tiny_whisper):
    voice = OmniVoiceONNX.load(fp32_artifacts, "fp32")
    voice.asr = Transcriber.load(tiny_whisper)
    return voice


@pytest.mark.parametrize("quantization", ["int8", "fp32"])
def test_the_recogniser_transcribes_a_file_or_an_array(tiny_whisper, reference, quantization):
    import soundfile as sf

    recogniser = Transcriber.load(tiny_whisper, quantization=quantization)
    # as whisper-base
    assert len(recogniser.languages) == 99 and {"en", "zh", "haw", "jw"} <= recogniser.languages
    data, rate = sf.read(reference, dtype="float32")
    assert recogniser.transcribe(reference, language="en") == TRANSCRIPT
    # names, as the page sends them
    assert recogniser.transcribe((data, rate), language="English") == TRANSCRIPT
    assert recogniser.transcribe(reference) == TRANSCRIPT  # Whisper detects the language
    # one Whisper lacks: detected
    assert recogniser.transcribe(reference, language="kbt") == TRANSCRIPT


def test_cloning_without_a_transcript_equals_cloning_with_it(voice, reference, tmp_path):
    typed = voice.generate("Hello in my voice.", ref_audio=reference, ref_text=TRANSCRIPT, **GREEDY)
    heard = voice.generate("Hello in my voice.", ref_audio=reference, **GREEDY)
    np.testing.assert_array_equal(heard.codes[0], typed.codes[0])
    prompt = voice.create_voice_prompt(reference, language="en")
    assert prompt.text == TRANSCRIPT  # the saved prompt keeps the transcript it used
    prompt.save(tmp_path / "voice.npz")
    again = voice.generate("Hello in my voice.", voice_prompt=tmp_path / "voice.npz", **GREEDY)
    np.testing.assert_array_equal(again.codes[0], typed.codes[0])


def test_a_recogniser_that_cannot_load_says_why_and_typed_transcripts_still_work(
    tiny_whisper, fp32_artifacts, reference, tmp_path
):
    broken = tmp_path / "broken"
    shutil.copytree(tiny_whisper, broken)
    (broken / "onnx" / "decoder_model_merged_int8.onnx").unlink()
    with pytest.raises(ArtifactError, match="lacks onnx/decoder_model_merged_int8.onnx"):
        Transcriber.load(broken)
    # Another conversion's name for the 8-bit graphs is found too.
    renamed = tmp_path / "renamed"
    shutil.copytree(tiny_whisper, renamed)
    for name in ("encoder_model", "decoder_model_merged"):
        (renamed / "onnx" / f"{name}_int8.onnx").rename(renamed / "onnx" / f"{name}_quantized.onnx")
    assert Transcriber.load(renamed).transcribe(reference, language="en") == TRANSCRIPT
    (broken / "onnx" / "decoder_model_merged_int8.onnx").write_bytes(b"not a graph")
    with pytest.raises(ArtifactError, match="could not be loaded"):
        Transcriber.load(broken)
    voice = OmniVoiceONNX.load(fp32_artifacts, "fp32")
    os.environ["OMNIVOICE_ASR_MODEL"] = str(broken)
    try:
        with pytest.raises(ArtifactError, match="could not be loaded"):
            voice.generate("Hello.", ref_audio=reference)
        assert (
            voice.generate("Hello.", ref_audio=reference, ref_text=TRANSCRIPT, num_step=2).seconds
            > 0
        )
        os.environ["OMNIVOICE_ASR_MODEL"] = "none"
        with pytest.raises(ValueError, match="transcription is off"):
            voice.generate("Hello.", ref_audio=reference)
    finally:
        del os.environ["OMNIVOICE_ASR_MODEL"]


START = """
import sys
from omnivoice_rt.audio.asr import Transcriber
print(Transcriber.load(progress=lambda f, m: None).transcribe(sys.argv[1], language="en"))
"""


def transcribe_in_a_fresh_process(
    reference: str, hf_home: Path, **env
) -> subprocess.CompletedProcess:
    environment = {
        **os.environ,
        "HF_HOME": str(hf_home),
        "HF_HUB_DISABLE_XET": "1",
        "HF_HUB_ETAG_TIMEOUT": "5",
        "HF_HUB_DOWNLOAD_TIMEOUT": "10",
        **env,
    }
    environment.pop("OMNIVOICE_ASR_MODEL", None)
    return subprocess.run(
        [sys.executable, "-c", START, reference],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=environment,
        timeout=300,
    )


def test_the_default_recogniser_downloads_once_then_works_offline(
    tiny_whisper, reference, tmp_path
):
    served = tmp_path / "repo"
    shutil.copytree(tiny_whisper, served)
    # a variant the int8 default never fetches
    (served / "onnx" / "unused_fp16.onnx").write_bytes(b"x" * 1000)
    server = HubServer(served, DEFAULT_ASR_MODEL).start()
    try:
        online = transcribe_in_a_fresh_process(
            reference, tmp_path / "hf", HF_ENDPOINT=server.endpoint
        )
        assert online.returncode == 0, online.stderr
        assert online.stdout.strip().splitlines()[-1] == TRANSCRIPT
        cached = {p.name for p in (tmp_path / "hf").rglob("*.onnx")}
        assert cached == {"encoder_model_int8.onnx", "decoder_model_merged_int8.onnx"}, cached
    finally:
        server.stop()
    offline = transcribe_in_a_fresh_process(reference, tmp_path / "hf", HF_HUB_OFFLINE="1")
    assert offline.returncode == 0, offline.stderr
    assert offline.stdout.strip().splitlines()[-1] == TRANSCRIPT
    empty = transcribe_in_a_fresh_process(reference, tmp_path / "empty", HF_HUB_OFFLINE="1")
    assert (
        empty.returncode != 0
        and "offline (HF_HUB_OFFLINE=1)" in empty.stderr
        and "give the transcript" in empty.stderr
    ), empty.stderr
