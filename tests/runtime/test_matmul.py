"""Which kernel multiplies the LLM's weights (``omnivoice_rt.engine.matmul``): fixed, or measured at
load, and really applied to the sessions."""

from __future__ import annotations

import numpy as np
import pytest

from omnivoice_rt.engine.kernels import AUTO, KERNELS
from omnivoice_rt.engine.matmul import choose, resolve
from omnivoice_rt.engine.sessions import SESSION_CONFIG
from omnivoice_rt.model import OmniVoiceONNX


def test_a_mode_is_asked_for_or_measured(cpu_artifacts, fp32_artifacts, monkeypatch):
    llm = cpu_artifacts / "int4" / "llm_decoder.onnx"
    assert resolve("int8", llm, None) == ("int8", "asked for")
    monkeypatch.setenv("OMNIVOICE_MATMUL", "INT8")
    assert resolve(None, llm, None) == ("int8", "asked for")
    monkeypatch.setenv("OMNIVOICE_MATMUL", "auto")
    mode, why = resolve(None, llm, 2)
    assert mode in AUTO and why.startswith("measured at load, time against the fastest: "), why
    assert all(f"{kernel} " in why for kernel in AUTO) and "qgemm " not in why
    assert resolve("auto", fp32_artifacts / "fp32" / "llm_decoder.onnx", None) == (
        "fp32",
        "the LLM has no MatMulNBits: its float products are kept",
    )
    with pytest.raises(ValueError, match="use one of auto, fp32, int8, qgemm-row, qgemm$"):
        resolve("fast", llm, None)


def test_auto_takes_the_most_accurate_kernel_within_the_margin():
    """Times relative to the fastest at each shape, averaged: the first of KERNELS' order within
    10% of the fastest."""
    times = {"fp32": [2.0, 2.0], "int8": [1.5, 1.5], "qgemm-row": [1.08, 1.1], "qgemm": [1.0, 1.0]}
    assert choose(times)[0] == "qgemm-row"
    assert choose({**times, "qgemm-row": [1.2, 1.2]})[0] == "qgemm"
    assert choose({"fp32": [1.0, 3.0], "int8": [1.05, 1.0]})[0] == "int8"  # 1.33 against 1.02
    assert choose({"fp32": [1.0, 1.0], "int8": [0.95, 0.95]})[0] == "fp32"


def test_int8_activations_reach_the_int4_kernels(cpu_artifacts):
    """With int8, the int4 LLM rounds its activations: close to fp32's hidden states, not equal;
    a synthesis runs through it."""
    modes = ("fp32", "int8")
    voices = {mode: OmniVoiceONNX.load(cpu_artifacts, "int4", matmul=mode) for mode in modes}
    assert {mode: voice.matmul[0] for mode, voice in voices.items()} == {m: m for m in modes}
    embeds = np.random.default_rng(0).standard_normal((1, 24, voices["fp32"].config.hidden_size))
    hidden = {
        mode: voice.backbone.llm(embeds.astype(voice.backbone.dtype))[0]
        for mode, voice in voices.items()
    }
    # relative RMS difference (2.5% on the real-shaped fixture)
    difference = np.linalg.norm(hidden["int8"] - hidden["fp32"]) / np.linalg.norm(hidden["fp32"])
    assert 0 < difference < 0.1, difference
    speech = voices["int8"].generate("Hello there.", seed=0, preset="turbo")
    assert speech.seconds > 0 and np.isfinite(speech.waveform).all()


def test_every_session_stops_spinning_after_a_run(cpu_artifacts):
    """Each of a model's sessions, the codec's too, carries ``SESSION_CONFIG`` (thread pools that
    stop spinning when a run ends, so that the next session has the cores) with its MatMulNBits
    mode on top."""
    voice = OmniVoiceONNX.load(cpu_artifacts, "int4", matmul="fp32")
    sessions = [graph.session for graph in voice.graphs.values()]
    sessions += [graph.session for graph in voice.codec.graphs.values()]
    assert len(sessions) >= 7
    for session in sessions:
        options = session.get_session_options()
        for key, value in {**SESSION_CONFIG, **KERNELS["fp32"].config}.items():
            assert options.get_session_config_entry(key) == value, (key, session)


def test_inspect_says_which_kernel_the_llm_would_take_here(
    cpu_artifacts, fp32_artifacts, monkeypatch
):
    from omnivoice_rt.artifacts.inspect import inspect

    lines = inspect(cpu_artifacts, "int4")
    assert (
        "    kernel here: fp32, MatMulNBits, weights dequantized and multiplied in fp32 (asked for)"
        in lines
    )
    monkeypatch.setenv("OMNIVOICE_MATMUL", "auto")
    (line,) = [line for line in inspect(cpu_artifacts, "int4") if "kernel here" in line]
    assert "measured at load, time against the fastest: fp32 " in line, line
    (line,) = [line for line in inspect(fp32_artifacts, "fp32") if "kernel here" in line]
    assert line.endswith("(the LLM has no MatMulNBits: its float products are kept)"), line
