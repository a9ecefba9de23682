"""Artifacts from the Hub, through the real ``huggingface_hub`` client and a Hub-compatible server
on 127.0.0.1 (tests/hub_server.py) serving, as onnx-community/OmniVoice-Onnx (the default repo,
no OMNIVOICE_REPO), a replica built to the published contract (omnivoice_build.published): their
graph names, their manifest schema, causal LLMs, a broken audio_tokenizer/fp16/.

The replica's ``int4/`` holds fp32 graphs, so after repair its codes must equal our own fp32
build's exactly. Each start runs in a fresh interpreter, as a user's would, with ``HF_ENDPOINT``
pointed at the server and ``HF_HOME`` in a temporary folder.

fp16 (the root profile: fp16 encoder and heads, int4 LLM) is compared with the same files loaded
from the replica's folder directly: the codes must be equal, so the Hub path fetched, repaired and
bound exactly those files.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from omnivoice_build.equivalence import GREEDY
from omnivoice_rt.artifacts.hub import DEFAULT_REPO
from omnivoice_rt.model import OmniVoiceONNX
from tests.conftest import ROOT, is_causal
from tests.hub_server import HubServer

TEXT = "Hello world, this is a test."

START = """
import json, sys
from omnivoice_rt.model import OmniVoiceONNX
from omnivoice_rt.artifacts.manifest import ArtifactError
try:
    voice = OmniVoiceONNX.load(None, sys.argv[1])
except ArtifactError as exc:
    print("error:", exc, file=sys.stderr)
    sys.exit(2)
speech = voice.generate(sys.argv[2], position_temperature=0.0, class_temperature=0.0)
print(json.dumps({"root": str(voice.root), "repaired": str(voice.repaired_llm), "codes": speech.codes[0].tolist(),
                  "codec": str(voice.codec.graphs["semantic_encoder"].path), "hop": voice.codec.hop_length}))
"""


@pytest.fixture
def hub(published):
    server = HubServer(published, DEFAULT_REPO).start()
    yield server
    server.stop()


def start(precision: str, hf_home: Path, endpoint: str, **env) -> subprocess.CompletedProcess:
    """One start of the runtime; the repo is the default one unless ``OMNIVOICE_REPO`` is passed."""
    environment = {
        **os.environ,
        "HF_ENDPOINT": endpoint,
        "HF_HOME": str(hf_home),
        "HF_HUB_DISABLE_XET": "1",
        "HF_HUB_ETAG_TIMEOUT": "5",
        "HF_HUB_DOWNLOAD_TIMEOUT": "10",
        **env,
    }
    for name in ("OMNIVOICE_ARTIFACTS", "OMNIVOICE_REPO"):
        if name not in env:
            environment.pop(name, None)
    return subprocess.run(
        [sys.executable, "-c", START, precision, TEXT],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=environment,
        timeout=600,
    )


def last_error(result) -> str:
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    return errors[0]


def cache_files(hf_home: Path) -> list[str]:
    return sorted(p.relative_to(hf_home).as_posix() for p in hf_home.rglob("*") if p.is_file())


def test_int4_fetches_only_its_files_repairs_and_equals_our_fp32_build(
    hub, fp32_artifacts, tmp_path
):
    result = start("int4", tmp_path / "hf", hub.endpoint)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    fetched = hub.file_requests()
    assert fetched and all(
        f.startswith(("int4/", "audio_tokenizer/", "tokenizer", "omnivoice_manifest"))
        for f in fetched
    )
    assert "int4/llm_decoder.onnx.data" in fetched and not [
        f for f in fetched if f.startswith("audio_tokenizer/fp16/")
    ]
    reference = OmniVoiceONNX.load(fp32_artifacts, "fp32").generate(TEXT, **GREEDY).codes[0]
    assert out["codes"] == reference.tolist()
    repaired = Path(out["repaired"])
    assert "omnivoice_repaired" in repaired.parts and not is_causal(repaired)
    assert is_causal(Path(out["root"]) / "int4" / "llm_decoder.onnx")  # the download is untouched

    # A second start downloads nothing and reuses the repaired copy.
    hub.requests.clear()
    stamp = repaired.stat().st_mtime_ns
    again = start("int4", tmp_path / "hf", hub.endpoint)
    assert again.returncode == 0, again.stderr
    assert hub.file_requests() == []
    assert json.loads(again.stdout.strip().splitlines()[-1])["repaired"] == str(repaired)
    assert repaired.stat().st_mtime_ns == stamp

    # Offline, the cache alone serves.
    offline = start("int4", tmp_path / "hf", "http://127.0.0.1:9", HF_HUB_OFFLINE="1")
    assert offline.returncode == 0, offline.stderr


def test_fp16_fetches_the_root_profile_falls_back_to_the_fp32_codec_and_equals_the_local_files(
    hub, published, tmp_path, monkeypatch
):
    import huggingface_hub.constants

    # where the local repair goes
    monkeypatch.setattr(huggingface_hub.constants, "HF_HOME", str(tmp_path / "local-hf"))
    result = start("fp16", tmp_path / "hf", hub.endpoint)
    assert result.returncode == 0, result.stderr
    expected = {
        "audio_embeddings_encoder.onnx",
        "audio_heads_decoder.onnx",
        "llm_decoder.onnx",
        "llm_decoder.onnx.data",
        "genai_config.json",
        "omnivoice_manifest.json",
        "tokenizer.json",
        "tokenizer_config.json",
    }
    expected |= {
        f"audio_tokenizer/{sub}{g}.onnx"
        for sub in ("", "fp16/")
        for g in ("acoustic_encoder", "semantic_encoder", "quantizer_encoder", "higgs_decoder")
    }
    snapshot = next((tmp_path / "hf" / "hub").glob("models--*/snapshots/*"))
    assert {
        f.relative_to(snapshot).as_posix() for f in snapshot.rglob("*") if f.is_file()
    } == expected
    assert not [f for f in hub.file_requests() if f.startswith("int4/")]
    assert (
        "audio_tokenizer/fp16/ is unusable" in result.stderr
        and "LayerNormalization" in result.stderr
    )
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["repaired"] != "None" and out["hop"] == 960  # not the publisher manifest's 320
    assert out["codec"].endswith("audio_tokenizer/semantic_encoder.onnx")
    local = OmniVoiceONNX.load(published, "fp16").generate(TEXT, **GREEDY).codes[0]
    np.testing.assert_array_equal(np.array(out["codes"]), local)


def test_a_changed_original_gets_a_new_repaired_copy_and_the_old_one_goes(published, tmp_path):
    import onnx
    from onnx import numpy_helper

    served = tmp_path / "repo"
    shutil.copytree(published, served)
    server = HubServer(served, DEFAULT_REPO).start()
    try:
        first = start("int4", tmp_path / "hf", server.endpoint)
        assert first.returncode == 0, first.stderr
        old = Path(json.loads(first.stdout.strip().splitlines()[-1])["repaired"]).parent
        llm = served / "int4" / "llm_decoder.onnx"  # the publisher uploads a new LLM
        model = onnx.load(str(llm))
        weight = next(t for t in model.graph.initializer if numpy_helper.to_array(t).ndim == 2)
        weight.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(weight) * 1.5, weight.name))
        (served / "int4" / "llm_decoder.onnx.data").unlink()
        onnx.save_model(
            model, str(llm), save_as_external_data=True, location="llm_decoder.onnx.data"
        )
        server._index = server._build_index()
        second = start("int4", tmp_path / "hf", server.endpoint)
    finally:
        server.stop()
    assert second.returncode == 0, second.stderr
    new = Path(json.loads(second.stdout.strip().splitlines()[-1])["repaired"]).parent
    assert new != old and new.is_dir() and not old.exists()
    kept = sorted(p.name for p in new.parent.iterdir() if p.suffix != ".lock")  # and its lock
    assert kept == [new.name]


def test_missing_file_is_reported_and_leaves_no_partial_file(hub, tmp_path):
    hub.missing.add("int4/audio_heads_decoder.onnx")
    error = last_error(start("int4", tmp_path / "hf", hub.endpoint))
    assert DEFAULT_REPO in error and "int4/audio_heads_decoder.onnx" in error
    assert not [f for f in cache_files(tmp_path / "hf") if f.endswith(".incomplete")]


def test_truncated_file_is_reported_and_leaves_no_partial_file(hub, tmp_path):
    hub.truncated.add("int4/llm_decoder.onnx.data")
    error = last_error(start("int4", tmp_path / "hf", hub.endpoint))
    assert DEFAULT_REPO in error and "failed" in error
    files = cache_files(tmp_path / "hf")
    assert not [f for f in files if f.endswith(".incomplete")]
    assert not [f for f in files if f.endswith("snapshots") or "llm_decoder.onnx.data" in f]


def test_unreachable_hub_and_offline_empty_cache(tmp_path):
    error = last_error(start("int4", tmp_path / "hf", "http://127.0.0.1:9"))
    assert "cannot reach" in error and DEFAULT_REPO in error
    error = last_error(start("int4", tmp_path / "hf2", "http://127.0.0.1:9", HF_HUB_OFFLINE="1"))
    assert "offline (HF_HUB_OFFLINE=1)" in error and "connect once" in error


def test_build_locally_from_a_checkpoint(tiny_checkpoint, fp32_artifacts, tmp_path):
    result = start(
        "fp32", tmp_path / "hf", "http://127.0.0.1:9", OMNIVOICE_BUILD_FROM=str(tiny_checkpoint)
    )
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert "omnivoice_builds" in out["root"]
    reference = OmniVoiceONNX.load(fp32_artifacts, "fp32").generate(TEXT, **GREEDY).codes[0]
    assert out["codes"] == reference.tolist()


def test_build_from_without_the_build_requirements_says_what_to_install(tmp_path):
    code = (
        "import sys\n"
        "for name in ('torch', 'omnivoice', 'olive', 'onnxruntime_genai'):\n"
        "    sys.modules[name] = None  # as if not installed\n"
        "from omnivoice_rt.artifacts.hub import resolve_artifacts\n"
        "from omnivoice_rt.artifacts.manifest import ArtifactError\n"
        "try:\n"
        "    resolve_artifacts(None, 'int4')\n"
        "except ArtifactError as exc:\n"
        "    print(exc)\n"
    )
    env = {
        **os.environ,
        "OMNIVOICE_BUILD_FROM": str(tmp_path / "checkpoint"),
        "HF_HOME": str(tmp_path / "hf"),
    }
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert (
        "needs the build requirements (torch, omnivoice, olive, onnxruntime_genai missing)"
        in result.stdout
    )
    assert (
        "pip install 'omnivoice-onnx[build]'" in result.stdout
        and "unset OMNIVOICE_BUILD_FROM" in result.stdout
    )


@pytest.fixture
def hub_with_manifest(cpu_artifacts, tmp_path):
    """Our own build served as the default repo (a drop-in replacement): it has our manifest, with sizes and sha256."""
    folder = tmp_path / "served"
    shutil.copytree(cpu_artifacts, folder)
    server = HubServer(folder, DEFAULT_REPO).start()
    yield server
    server.stop()


def test_corrupted_cache_file_is_fetched_again_once(hub_with_manifest, tmp_path):
    hub = hub_with_manifest
    assert start("int4", tmp_path / "hf", hub.endpoint).returncode == 0
    snapshot = next((tmp_path / "hf" / "hub").glob("models--*/snapshots/*"))
    blob = (snapshot / "int4" / "audio_heads_decoder.onnx").resolve()
    good = blob.read_bytes()
    blob.write_bytes(good[:-10] + b"0123456789")  # same size, different content
    hub.requests.clear()
    result = start("int4", tmp_path / "hf", hub.endpoint)
    assert result.returncode == 0, result.stderr
    assert hub.file_requests() == ["int4/audio_heads_decoder.onnx"]
    assert blob.read_bytes() == good
    # our build needs no repair
    assert json.loads(result.stdout.strip().splitlines()[-1])["repaired"] == "None"


def test_file_that_never_matches_the_manifest_is_reported(hub_with_manifest, tmp_path):
    hub = hub_with_manifest
    served = hub.folder / "int4" / "audio_heads_decoder.onnx"
    served.write_bytes(served.read_bytes()[:-10] + b"0123456789")
    hub._index = hub._build_index()
    error = last_error(start("int4", tmp_path / "hf", hub.endpoint))
    assert "int4/audio_heads_decoder.onnx" in error and "manifest" in error
    assert hub.file_requests().count("int4/audio_heads_decoder.onnx") == 2
