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
