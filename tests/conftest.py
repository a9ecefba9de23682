"""Shared fixtures: one tiny random-weight checkpoint and its artifacts, built once per session.

The artifacts come from our own ``build_artifacts.py`` (the code under test), and the oracle is
the upstream ``omnivoice`` PyTorch model loaded from the same checkpoint.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import build_artifacts  # noqa: E402
from omnivoice_build.fixtures import make_checkpoint  # noqa: E402


def build(checkpoint: Path, output: Path, *args: str) -> Path:
    code = build_artifacts.main(["--model", str(checkpoint), "--output", str(output), *args])
    if code != 0:
        raise RuntimeError(f"build_artifacts {args} exited with {code}")
    return output


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory) -> Path:
    return make_checkpoint(tmp_path_factory.mktemp("checkpoint") / "tiny", "tiny", seed=0)


@pytest.fixture(scope="session")
def fp32_artifacts(tiny_checkpoint, tmp_path_factory) -> Path:
    """The all-fp32 profile and an fp32 codec: the reference for equivalence."""
    out = tmp_path_factory.mktemp("artifacts_fp32")
    return build(tiny_checkpoint, out, "--device", "cpu_fp32", "--include-higgs", "--higgs-precision", "fp32")


@pytest.fixture(scope="session")
def cpu_artifacts(tiny_checkpoint, tmp_path_factory) -> Path:
    """The published layout: cpu (int4/) and cpu_fp16 (root) profiles and an fp16 codec."""
    out = tmp_path_factory.mktemp("artifacts_cpu")
    build(tiny_checkpoint, out, "--device", "cpu")
    return build(tiny_checkpoint, out, "--device", "cpu_fp16", "--include-higgs")


@pytest.fixture(scope="session")
def upstream(tiny_checkpoint):
    """The upstream OmniVoice PyTorch model on the same weights, in eval mode."""
    from omnivoice.models.omnivoice import OmniVoice

    return OmniVoice.from_pretrained(str(tiny_checkpoint)).eval()


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def app_server(cpu_artifacts, tmp_path_factory):
    """``python app.py`` as a real server on 127.0.0.1 over the tiny int4/fp16 artifacts."""
    import os
    import subprocess
    import time
    import urllib.request

    port = free_port()
    log = open(tmp_path_factory.mktemp("app") / "server.log", "w")  # noqa: SIM115 - closed below
    env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1"}
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "app.py"), "--artifacts", str(cpu_artifacts), "--port", str(port)],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while True:
        try:
            urllib.request.urlopen(url, timeout=2)
            break
        except OSError:
            if process.poll() is not None or time.time() > deadline:
                process.kill()
                raise RuntimeError(f"the app did not start; see {log.name}") from None
            time.sleep(0.5)
    yield url
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
    log.close()
