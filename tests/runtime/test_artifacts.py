"""The artifact folder: layout, manifest, relocation, and the build CLI's errors."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from omnivoice_rt.artifacts.manifest import (
    MANIFEST_NAME,
    ArtifactError,
    Manifest,
    read_manifest,
    sha256_of,
    verify_files,
)
from omnivoice_rt.engine.sessions import load_graphs
from tests.conftest import ROOT


def test_published_layout(cpu_artifacts):
    root = cpu_artifacts
    for name in (
        "audio_embeddings_encoder.onnx",
        "llm_decoder.onnx",
        "llm_decoder.onnx.data",
        "audio_heads_decoder.onnx",
    ):
        assert (root / name).is_file(), name
        assert (root / "int4" / name).is_file(), f"int4/{name}"
    for name in ("genai_config.json", "tokenizer.json", "tokenizer_config.json", MANIFEST_NAME):
        assert (root / name).is_file(), name
    for name in ("acoustic_encoder", "semantic_encoder", "quantizer_encoder", "higgs_decoder"):
        assert (root / "audio_tokenizer" / f"{name}.onnx").is_file(), name
    assert not [p for p in root.iterdir() if p.name.startswith(".staging")]


def test_manifest_lists_every_file_with_size_and_hash(cpu_artifacts):
    manifest = read_manifest(cpu_artifacts)
    on_disk = {
        p.relative_to(cpu_artifacts).as_posix()
        for p in cpu_artifacts.rglob("*")
        if p.is_file() and p.name != MANIFEST_NAME
    }
    assert set(manifest.files) == on_disk
    for relative, entry in manifest.files.items():
        path = cpu_artifacts / relative
        assert entry.bytes == path.stat().st_size
        assert entry.sha256 == sha256_of(path)
        assert not Path(relative).is_absolute() and ".." not in Path(relative).parts
    assert verify_files(cpu_artifacts, manifest) == []


def test_manifest_describes_model_and_graphs(cpu_artifacts):
    manifest = read_manifest(cpu_artifacts)
    assert manifest.attention == "bidirectional"
    assert set(manifest.profiles) == {"int4", "fp16", "int8"}
    assert manifest.profiles["int8"].llm_block_size == 128
    model = manifest.model
    assert (model.num_audio_codebook, model.audio_vocab_size, model.audio_mask_id) == (
        8,
        1025,
        1024,
    )
    assert (model.sample_rate, model.hop_length, model.frame_rate) == (24000, 960, 25)
    assert model.hidden_size == 128
    int4 = manifest.profiles["int4"]
    assert (int4.encoder, int4.heads, int4.llm, int4.llm_block_size) == ("int4", "fp32", "int4", 32)
    llm = int4.graphs["llm_decoder"]
    assert llm.file == "int4/llm_decoder.onnx"
    assert [v["name"] for v in llm.outputs][0] == "hidden_states"
    assert {"inputs_embeds", "attention_mask"} <= {v["name"] for v in llm.inputs}
    encoder = manifest.profiles["fp16"].graphs["audio_embeddings_encoder"]
    assert [(v["name"], v["dtype"]) for v in encoder.inputs] == [
        ("input_ids", "int64"),
        ("audio_mask", "bool"),
    ]
    assert manifest.audio_tokenizer.precision == "fp16"
    assert {"onnxruntime", "onnxruntime-genai", "olive-ai", "torch"} <= set(
        manifest.build["versions"]
    )
    # The file on disk is the type's JSON: reading and writing it back changes nothing.
    raw = json.loads((cpu_artifacts / MANIFEST_NAME).read_text())
    assert Manifest.from_json(raw).to_json() == raw


def test_moved_folder_loads_and_computes_the_same(fp32_artifacts, tmp_path):
    moved = tmp_path / "elsewhere" / "artifacts"
    shutil.copytree(fp32_artifacts, moved)
    ids = np.random.default_rng(0).integers(0, 1025, (1, 8, 20))
    mask = np.ones((1, 20), dtype=bool)
    outputs = []
    for root in (fp32_artifacts, moved):
        graphs, _ = load_graphs(root, "fp32", verify_hashes=True)
        outputs.append(
            graphs["audio_embeddings_encoder"].run(None, {"input_ids": ids, "audio_mask": mask})[0]
        )
    np.testing.assert_array_equal(outputs[0], outputs[1])


def test_corrupt_and_missing_files_are_reported(fp32_artifacts, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(fp32_artifacts, copy)
    data = copy / "fp32" / "llm_decoder.onnx.data"
    data.write_bytes(data.read_bytes()[:-100])  # truncated
    (copy / "audio_tokenizer" / "higgs_decoder.onnx").unlink()
    assert sorted(verify_files(copy, read_manifest(copy))) == [
        "audio_tokenizer/higgs_decoder.onnx",
        "fp32/llm_decoder.onnx.data",
    ]
    with pytest.raises(ArtifactError, match="missing or corrupt"):
        load_graphs(copy, "fp32", verify_hashes=True)


def test_manifest_paths_cannot_escape_the_folder(fp32_artifacts, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(fp32_artifacts, copy)
    manifest = json.loads((copy / MANIFEST_NAME).read_text())
    manifest["files"]["../outside.onnx"] = {"bytes": 1, "sha256": "0" * 64}
    (copy / MANIFEST_NAME).write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match="escapes"):
        read_manifest(copy)


def test_missing_profile_says_how_to_build_it(fp32_artifacts):
    with pytest.raises(ArtifactError, match="--device cpu"):
        load_graphs(fp32_artifacts, "int4")


# ----------------------------------------------------------------------------- CLI errors


def run_build(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "build_artifacts.py"), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )


def assert_one_line_error(result: subprocess.CompletedProcess, *words: str) -> None:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.strip().splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0], lines[0]


def test_missing_checkpoint_folder(tmp_path):
    result = run_build("--model", str(tmp_path / "nope"), "--output", str(tmp_path / "out"))
    assert_one_line_error(result, "checkpoint", "does not exist")


def test_folder_that_is_not_an_omnivoice_checkpoint(tmp_path):
    (tmp_path / "bert").mkdir()
    (tmp_path / "bert" / "config.json").write_text(json.dumps({"model_type": "bert"}))
    result = run_build("--model", str(tmp_path / "bert"), "--output", str(tmp_path / "out"))
    assert_one_line_error(result, "not an OmniVoice checkpoint")


def test_unwritable_output_folder(tiny_checkpoint, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    result = run_build("--model", str(tiny_checkpoint), "--output", str(blocker / "out"))
    assert_one_line_error(result, "output", "cannot write")
