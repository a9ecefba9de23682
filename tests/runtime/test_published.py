"""The published artifacts (onnx-community/OmniVoice-Onnx) as a local folder, on replicas built to
their contract (omnivoice_build.published), never on our own build with a file removed.

Exact comparisons use the replica whose ``int4/`` holds fp32 graphs under the published names:
repaired, its codes must equal our fp32 build's. The replica as published (int4 block 128, int4
heads) is checked for its quantization and for speaking; no agreement with fp32 is asserted for
int4 on the random tiny model (tests/runtime/test_runtime.py says why).
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from omnivoice_build.equivalence import GREEDY
from omnivoice_rt.errors import ArtifactError
from omnivoice_rt.model import OmniVoiceONNX
from tests.conftest import ROOT, is_causal

TEXTS = [
    "Hello world, this is a test.",
    "The quick brown fox jumps over the lazy dog.",
    "你好，世界。今天天气很好。",
]


@pytest.fixture(autouse=True)
def hf_home(tmp_path, monkeypatch):
    """Repaired copies go under a fresh $HF_HOME of each test."""
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HOME", str(tmp_path / "hf"))
    return tmp_path / "hf"


def codes_of(voice, text=TEXTS[0]) -> np.ndarray:
    return voice.generate(text, **GREEDY).codes[0]


def files_of(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_the_replica_is_what_public_code_describes(published):
    for llm in ("llm_decoder.onnx", "int4/llm_decoder.onnx"):
        assert is_causal(published / llm)
    for manifest in ("omnivoice_manifest.json", "int4/omnivoice_manifest.json"):
        found = json.loads((published / manifest).read_text())
        assert "format_version" not in found and found["higgs_tokenizer"]["hop_length"] == 320
    import onnxruntime as ort

    with pytest.raises(Exception, match="LayerNormalization"):
        ort.InferenceSession(
            str(published / "audio_tokenizer/fp16/semantic_encoder.onnx"),
            providers=["CPUExecutionProvider"],
        )


def test_local_published_folder_is_repaired_into_the_cache_and_equals_our_fp32_build(
    published, fp32_voice, hf_home
):
    before = files_of(published)
    voice = OmniVoiceONNX.load(published, "int4")
    assert str(hf_home / "omnivoice_repaired") in str(voice.repaired_llm)
    assert voice.backbone.takes_positions  # the repair wires position_ids: the frame cache runs
    assert {g.signature.contract for g in voice.graphs.values()} == {"published"}
    assert {g.signature.contract for g in voice.codec.graphs.values()} == {"published"}
    # the graphs', not the manifest's 320
    assert voice.codec.hop_length == 960 and voice.frame_rate == 25
    for text in TEXTS:
        np.testing.assert_array_equal(codes_of(voice, text), codes_of(fp32_voice, text))
    speech = voice.generate(TEXTS[0], duration=2.0, postprocess_output=False, seed=0)
    assert speech.waveform.shape == (50 * 960 + 2 * 2400,)
    assert files_of(published) == before  # the user's folder is never changed


def test_llm_with_position_ids_is_fed_them(published, tiny_checkpoint, fp32_voice, tmp_path):
    """A published LLM that takes position_ids (rotary outside attention) gets 0..S-1, and its
    codes equal our fp32 build's; fed wrong positions, the same graph gives other outputs."""
    import onnxruntime as ort

    from omnivoice_build.published import build_llm
    from omnivoice_rt.artifacts.bidirectional import llm_feeds, make_bidirectional

    folder = tmp_path / "repo"
    shutil.copytree(published, folder)
    build_llm(tiny_checkpoint, folder / "int4", "fp32", position_ids=True)
    assert "position_ids" in {
        i.name
        for i in onnx.load(
            str(folder / "int4/llm_decoder.onnx"), load_external_data=False
        ).graph.input
    }
    voice = OmniVoiceONNX.load(folder, "int4")
    assert voice.graphs["llm_decoder"].input("position_ids") is not None
    np.testing.assert_array_equal(codes_of(voice), codes_of(fp32_voice))

    make_bidirectional(folder / "int4/llm_decoder.onnx", tmp_path / "bi.onnx")
    session = ort.InferenceSession(str(tmp_path / "bi.onnx"), providers=["CPUExecutionProvider"])
    embeds = np.random.default_rng(0).standard_normal((1, 12, 128)).astype(np.float32)
    feeds = llm_feeds(session, embeds, np.ones((1, 12), np.int64), 32)
    right = session.run(["hidden_states"], feeds)[0]
    wrong = session.run(["hidden_states"], {**feeds, "position_ids": np.zeros((1, 12), np.int64)})[
        0
    ]
    assert np.abs(right - wrong).max() > 0.1


def test_int4_as_published_loads_and_speaks(published_int4):
    voice = OmniVoiceONNX.load(published_int4, "int4")
    # int4, block 128, as published
    for role in ("audio_embeddings_encoder", "audio_heads_decoder"):
        graph = onnx.load(str(published_int4 / f"int4/{role}.onnx"))
        blocks = {
            a.i
            for n in graph.graph.node
            if n.op_type in ("MatMulNBits", "GatherBlockQuantized")
            for a in n.attribute
            if a.name == "block_size"
        }
        assert blocks == {128}, role
    for text in TEXTS:
        codes = codes_of(voice, text)
        assert codes.max() < 1024 and all(len(np.unique(row)) > 3 for row in codes)


def test_a_decoder_that_gives_nan_falls_back_to_the_main_codec(published, tmp_path, caplog):
    from onnx import numpy_helper

    folder = tmp_path / "repo"
    shutil.copytree(published, folder)
    fp16 = folder / "audio_tokenizer" / "fp16"
    # now it loads
    shutil.copy(folder / "audio_tokenizer/semantic_encoder.onnx", fp16 / "semantic_encoder.onnx")
    decoder = onnx.load(str(fp16 / "higgs_decoder.onnx"))
    bias = next(
        t
        for t in decoder.graph.initializer
        if numpy_helper.to_array(t).ndim == 1 and t.data_type == 10
    )
    bias.CopyFrom(
        numpy_helper.from_array(np.full_like(numpy_helper.to_array(bias), np.nan), bias.name)
    )
    onnx.save(decoder, str(fp16 / "higgs_decoder.onnx"))
    with caplog.at_level(logging.WARNING):
        voice = OmniVoiceONNX.load(folder, "fp16")
    assert "audio_tokenizer/fp16/ is unusable" in caplog.text and "NaN" in caplog.text
    assert voice.codec.graphs["higgs_decoder"].path == folder / "audio_tokenizer/higgs_decoder.onnx"
    assert np.all(np.isfinite(voice.generate("Hello.", num_step=4, seed=0).waveform))


def test_unknown_signature_names_both_sides(published, tmp_path):
    folder = tmp_path / "repo"
    shutil.copytree(published, folder)
    path = folder / "audio_tokenizer" / "semantic_encoder.onnx"
    model = onnx.load(str(path))
    old = model.graph.input[0].name
    model.graph.input[0].name = "audio_16k"
    for node in model.graph.node:
        node.input[:] = ["audio_16k" if name == old else name for name in node.input]
    onnx.save(model, str(path))
    with pytest.raises(ArtifactError) as error:
        OmniVoiceONNX.load(folder, "int4")
    message = str(error.value)
    assert (
        "semantic_encoder.onnx matches no graph signature" in message
        and "audio_16k float (batch_size, samples)" in message
    )
    assert (
        "published: (waveform_16k) -> (semantic_features)" in message
        and "omnivoice-onnx 1: (waveform)" in message
    )
    assert "omnivoice_rt inspect" in message


def test_missing_codec_and_malformed_manifest(published, tmp_path, caplog):
    folder = tmp_path / "repo"
    shutil.copytree(published, folder)
    (folder / "omnivoice_manifest.json").write_text("{ not json")
    with caplog.at_level(logging.WARNING):
        voice = OmniVoiceONNX.load(folder, "int4")
    assert (
        "omnivoice_manifest.json is not valid JSON" in caplog.text and voice.codec.hop_length == 960
    )
    shutil.rmtree(folder / "audio_tokenizer")
    with pytest.raises(ArtifactError, match="has no codec .* audio_tokenizer/ folder"):
        OmniVoiceONNX.load(folder, "int4")
    for name in ("genai_config.json", "int4/genai_config.json"):
        (folder / name).write_text("[1, 2")
    with pytest.raises(
        ArtifactError, match="genai_config.json is not a readable onnxruntime-genai config"
    ):
        OmniVoiceONNX.load(folder, "int4")


def test_inspect_tells_what_a_folder_holds(published, tmp_path):
    env = {"HF_HOME": str(tmp_path / "hf"), "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, "-m", "omnivoice_rt", "inspect", str(published)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env={**__import__("os").environ, **env},
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "manifest: the publisher's" in out and "profiles: fp16, int4" in out
    assert (
        out.count("attention: CAUSAL") == 2 and str(tmp_path / "hf" / "omnivoice_repaired") in out
    )
    assert (
        "waveform_16k float (batch_size, samples)" in out
        and "binds as: published: (waveform_16k)" in out
    )
    assert "codec audio_tokenizer/fp16/: tried first by fp16, cuda" in out
    assert out.count("loads: NO") == 1 and "LayerNormalization" in out
    assert "binds as: NOTHING" not in out


def test_fix_published_makes_a_folder_that_needs_no_repair(published, fp32_voice, tmp_path):
    output = tmp_path / "fixed"
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "build_artifacts.py"),
            "--fix-published",
            str(published),
            "--output",
            str(output),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    assert "leaving out the codec in audio_tokenizer/fp16/" in result.stderr
    manifest = json.loads((output / "omnivoice_manifest.json").read_text())
    assert manifest["format_version"] == 1 and manifest["attention"] == "bidirectional"
    assert set(manifest["profiles"]) == {"fp16", "int4"} and manifest["model"]["hop_length"] == 960
    assert not (output / "audio_tokenizer" / "fp16").exists()
    assert "causal=0" in (output / "README.md").read_text()
    for llm in ("llm_decoder.onnx", "int4/llm_decoder.onnx"):
        assert not is_causal(output / llm)
    voice = OmniVoiceONNX.load(output, "int4", verify=True)
    assert voice.repaired_llm is None
    np.testing.assert_array_equal(codes_of(voice), codes_of(fp32_voice))
