"""The quality check (``eval --mode quality``): its measures on real speech from real models
(espeak-ng's voices, pocketsphinx's trained English recogniser, resemblyzer's trained speaker
encoder exported to ONNX), and the command end to end on the tiny artifacts with a recogniser
that hears a known text."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
import soundfile as sf
from onnx import TensorProto, helper

from omnivoice_rt.audio import ops as audio_ops
from omnivoice_rt.tools.quality import SpeakerEncoder, error_rate, kaldi_fbank
from tests.conftest import ROOT, TRANSCRIPT, make_speaker, prebuilt

COUNTING = "one two three four five six seven eight nine ten"
STADIUM = "Seven thousand people watched the final match in the old stadium."


def speak(text: str, voice: str = "en-us") -> tuple[np.ndarray, int]:
    """Real speech: espeak-ng's ``voice`` saying ``text``."""
    raw = subprocess.run(
        ["espeak-ng", "-v", voice, "--stdout", text], capture_output=True, check=True
    ).stdout
    return sf.read(io.BytesIO(raw), dtype="float32")


@pytest.fixture(scope="module")
def resemblyzer_onnx(tmp_path_factory):
    return (
        prebuilt("speaker", make_speaker, tmp_path_factory.mktemp("speaker")) / "resemblyzer.onnx"
    )


def test_error_rates_count_words_or_characters():
    assert error_rate("This is my voice.", "this is my choice", "en") == 0.25
    assert error_rate("Hello, world!", "hello world", "en") == 0.0  # case, punctuation
    assert error_rate("a b c d", "a c d e f", "en") == 3 / 4  # a deletion, two insertions
    assert error_rate("今天天气很好。", "今天天汽很好", "zh") == 1 / 6  # characters
    assert error_rate("one two", "", None) == 1.0


def test_a_real_recogniser_hears_what_was_said_closer_than_another_sentence():
    Decoder = pytest.importorskip("pocketsphinx", reason="a trained recogniser (dev extra)").Decoder

    decoder = Decoder(samprate=16000)

    def hear(audio) -> str:
        wav = audio_ops.load_audio(audio, 16000)[0]
        decoder.start_utt()
        decoder.process_raw((np.clip(wav, -1, 1) * 32767).astype(np.int16).tobytes(), full_utt=True)
        decoder.end_utt()
        return decoder.hyp().hypstr if decoder.hyp() else ""

    for said, other in ((COUNTING, STADIUM), (STADIUM, COUNTING)):
        heard = hear(speak(said))
        assert error_rate(said, heard, "en") < error_rate(other, heard, "en"), heard


def test_speaker_similarity_tells_voices_apart(resemblyzer_onnx):
    encoder = SpeakerEncoder.load(resemblyzer_onnx)
    male, male_again = speak(STADIUM, "en-us+m3"), speak(COUNTING, "en-us+m3")
    female = speak(COUNTING, "en-us+f4")
    assert encoder.similarity(male, male) == pytest.approx(1.0, abs=1e-5)
    same_voice = encoder.similarity(male, male_again)
    assert encoder.similarity(male, female) < same_voice - 0.1, same_voice


def test_fbank_is_wespeakers_and_reaches_a_feature_model(tmp_path):
    """A model whose input is (1, frames, 80) gets WeSpeaker's features: torchaudio's Kaldi
    fbank of the audio times 2**15, the mean over time subtracted."""
    pytest.importorskip("torchaudio", reason="the oracle is torchaudio's Kaldi fbank")
    import torch
    import torchaudio.compliance.kaldi as kaldi

    audio = speak(STADIUM)
    wav = audio_ops.load_audio(audio, 16000)
    expected = kaldi.fbank(
        torch.from_numpy(wav) * (1 << 15),
        num_mel_bins=80,
        frame_length=25,
        frame_shift=10,
        dither=0.0,
        energy_floor=0.0,
        sample_frequency=16000,
        window_type="hamming",
        htk_compat=True,
        use_energy=False,
    )
    expected = (expected - expected.mean(dim=0)).numpy()
    ours = kaldi_fbank(wav[0])
    assert ours.shape == expected.shape
    np.testing.assert_allclose(ours, expected, atol=2e-3)

    # the largest value of each band over time: the embedding of a toy feature model
    graph = helper.make_graph(
        [helper.make_node("ReduceMax", ["feats", "axes"], ["embs"], keepdims=0)],
        "max",
        [helper.make_tensor_value_info("feats", TensorProto.FLOAT, [1, "T", 80])],
        [helper.make_tensor_value_info("embs", TensorProto.FLOAT, [1, 80])],
        [helper.make_tensor("axes", TensorProto.INT64, [1], [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    onnx.save(model, tmp_path / "max.onnx")
    embedding = SpeakerEncoder.load(tmp_path / "max.onnx").embed(audio)
    top = expected.max(axis=0)
    np.testing.assert_allclose(embedding, top / np.linalg.norm(top), atol=1e-4)


def run_quality(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "omnivoice_rt", "eval", "--mode", "quality", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", **env},
    )


def test_the_quality_command_end_to_end(cpu_artifacts, tiny_whisper, resemblyzer_onnx, tmp_path):
    """The tiny recogniser hears TRANSCRIPT in any audio, so each sentence's error rate is known
    exactly; best's similarity to itself is 1 and its duration ratio 1."""
    sentences = tmp_path / "sentences.txt"
    said = [("en", "This is my voice."), ("en", "This is my choice."), ("zh", "这是我的声音。")]
    sentences.write_text(
        "# language, tab, text\n" + "".join(f"{lang}\t{text}\n" for lang, text in said)
    )
    out = tmp_path / "out"
    common = ["--model-dir", str(cpu_artifacts), "--asr-model", str(tiny_whisper)]
    result = run_quality(
        *common,
        "--presets",
        "best,turbo",
        "--sentences",
        str(sentences),
        "--speaker-model",
        str(resemblyzer_onnx),
        "--output",
        str(out),
    )
    assert result.returncode == 0, result.stderr
    assert "| best |" in result.stdout and "| turbo |" in result.stdout
    report = json.loads((out / "quality.json").read_text())
    samples = report["samples"]
    assert [(s["preset"], s["text"]) for s in samples] == [
        (p, text) for _, text in said for p in ("best", "turbo")
    ]
    assert {s["heard"] for s in samples} == {TRANSCRIPT}
    # "thisismyvoice" against six characters: six substitutions and seven insertions
    expected = {said[0][1]: 0.0, said[1][1]: 0.25, said[2][1]: 13 / 6}
    for sample in samples:
        assert sample["error"] == pytest.approx(expected[sample["text"]])
    best, turbo = report["summary"]
    assert best["preset"] == "best" and best["error"] == pytest.approx((0.25 + 13 / 6) / 3)
    assert best["similarity"] == pytest.approx(1.0, abs=1e-5) and best["duration"] == 1.0
    assert -1.0 <= turbo["similarity"] <= 1.0 and turbo["rtf"] > 0
    assert "turbo" in (out / "quality.svg").read_text()
    assert sf.info(out / "turbo" / "2.wav").duration > 0

    alone = tmp_path / "alone"
    result = run_quality(
        *common,
        "--presets",
        "fast",
        "--sentences",
        str(sentences),
        "--speaker-model",
        "none",
        "--output",
        str(alone),
    )
    assert result.returncode == 0, result.stderr
    (row,) = json.loads((alone / "quality.json").read_text())["summary"]
    assert row["similarity"] is None and row["duration"] == 1.0 and "| fast |" in result.stdout

    # kernels compared as presets are: every preset on each, the first run the baseline
    kernels = tmp_path / "kernels"
    result = run_quality(
        *common,
        "--presets",
        "turbo",
        "--matmul",
        "fp32,qgemm-row",
        "--sentences",
        str(sentences),
        "--speaker-model",
        str(resemblyzer_onnx),
        "--output",
        str(kernels),
        HF_HOME=str(tmp_path / "hf"),  # where the rewritten LLM is kept
    )
    assert result.returncode == 0, result.stderr
    assert "| turbo@fp32 |" in result.stdout and "| turbo@qgemm-row |" in result.stdout
    exact, rounded = json.loads((kernels / "quality.json").read_text())["summary"]
    assert exact["similarity"] == pytest.approx(1.0, abs=1e-5) and exact["duration"] == 1.0
    assert rounded["preset"] == "turbo@qgemm-row" and rounded["similarity"] < 1.0 - 1e-6
    assert sf.info(kernels / "turbo@qgemm-row" / "0.wav").duration > 0
    refused = run_quality(*common, "--matmul", "fp32,fast", "--output", str(out))
    assert refused.returncode == 2 and refused.stderr.strip() == (
        "error: --matmul: unknown fast; use some of auto, fp32, int8, qgemm-row, qgemm"
    )

    refused = run_quality(*common, "--presets", "best,quick", "--output", str(out))
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        "error: --presets: unknown quick; use some of best, balanced, fast, turbo"
    )


def test_the_quality_check_runs_without_a_recogniser_and_draws_nothing_it_did_not_measure(
    cpu_artifacts, tmp_path
):
    """``--asr-model none``: the error rate is left out (not a refusal about ref_text); with no
    speaker model either, the plot writes both as not measured, draws no bar for them, and keeps
    every label inside the picture and on a row of its own."""
    import xml.etree.ElementTree as ET

    sentences = tmp_path / "sentences.txt"
    sentences.write_text("en\tThis is my voice.\n")
    out = tmp_path / "out"
    presets = ["best", "turbo"]
    result = run_quality(
        *("--model-dir", str(cpu_artifacts), "--presets", ",".join(presets)),
        *("--matmul", "fp32,qgemm-row", "--sentences", str(sentences)),
        *("--asr-model", "none", "--speaker-model", "none", "--output", str(out)),
        HF_HOME=str(tmp_path / "hf"),
    )
    assert result.returncode == 0, result.stderr
    assert "error rate: not measured (--asr-model none)" in result.stdout
    rows = json.loads((out / "quality.json").read_text())["summary"]
    assert [r["preset"] for r in rows] == [
        f"{p}@{k}" for k in ("fp32", "qgemm-row") for p in presets
    ]
    assert all(r["error"] is None and r["similarity"] is None for r in rows)
    table = [line.split("|")[1:-1] for line in result.stdout.splitlines() if line.startswith("| ")]
    table = [cells for cells in table if "@" in cells[0]]
    assert len(table) == len(rows)
    assert all([cell.strip() for cell in cells[1:3]] == ["-", "-"] for cells in table)

    svg = ET.parse(out / "quality.svg").getroot()
    ns = "{http://www.w3.org/2000/svg}"
    width = float(svg.get("width"))
    texts = [
        (float(t.get("x")), float(t.get("y")), t.get("text-anchor"), t.text)
        for t in svg.iter(f"{ns}text")
    ]
    rects = [(float(r.get("x")), float(r.get("width"))) for r in svg.iter(f"{ns}rect")]
    assert [t[3] for t in texts].count("not measured") == 2 * len(rows)  # error rate, similarity
    assert len(rects) == 2 * len(rows)  # duration and real-time factor
    assert all(x + w <= width for x, w in rects)
    for x, _, anchor, text in texts:  # about 7 px a character at 12 px, 8 at 14
        assert (x - 7 * len(text) >= 0) if anchor == "end" else (x + 8 * len(text) <= width), text
    by_row = {}
    for _, y, _, text in texts:
        by_row.setdefault(y, []).append(text)
    assert all(len(on_row) <= 2 for on_row in by_row.values())  # a label and its value
    assert len(by_row) == 4 + 4 * len(rows)  # the headings and a row per preset under each


def test_the_quality_check_says_how_to_go_on_without_its_recogniser(cpu_artifacts, tmp_path):
    result = run_quality(
        *("--model-dir", str(cpu_artifacts), "--presets", "best"),
        *("--asr-model", "nobody/no-such-whisper", "--output", str(tmp_path / "out")),
        HF_HOME=str(tmp_path / "hf"),
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "the speech recogniser" in result.stderr
    assert "or pass --asr-model none to leave the error rate out" in result.stderr
