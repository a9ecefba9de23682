"""How MatMulNBits, the kernel of the int4 and int8 graphs, multiplies on this CPU.

The graphs ask for accuracy level 4: each block of activations is rounded to int8 and multiplied
with integer kernels (``int8``, fast where the CPU has VNNI or AMX). ONNX Runtime's session
setting ``mlas.qnbit.force_fp32`` makes it dequantize the weights and multiply in fp32 instead
(``fp32``), rounding nothing beyond the weights. Which is faster depends on the CPU (measured,
docs/performance.md "MatMulNBits: fp32 or int8 activations"): on one Intel Xeon with AMX ``fp32``
made ``balanced`` 23% faster, on a later one ``int8`` was faster at every call size (0.16 s
against 0.28 s for 8 tokens of the full-size LLM, 2.11 against 2.31 s for 290), and on an AVX2-only
AMD EPYC the int8 kernels are the slow ones. So ``auto`` (the default) times both on two
MatMulNBits of the LLM's shapes when a model loads (about 0.7 s), small calls and large ones,
and takes ``int8`` only when it is faster on average and no slower on the large ones. ``OMNIVOICE_MATMUL=fp32`` or
``int8`` (or ``OmniVoiceONNX.load(matmul=...)``) fixes it; the tests fix ``fp32``, since only that
gives the same numbers whatever the batch shape.
"""

from __future__ import annotations

import logging
import os
import time
from functools import lru_cache
from pathlib import Path

import numpy as np

from omnivoice_rt.profiles import block_quantization

logger = logging.getLogger(__name__)

# mode: (session settings, what it does)
MODES = {
    "fp32": ({"mlas.qnbit.force_fp32": "1"}, "weights dequantized, multiplied in fp32"),
    "int8": ({}, "activations rounded to int8 per block, as the graphs ask"),
}
CHOICES = ("auto", *MODES)
# int8 is taken when it needs at most MARGIN of fp32's time on average over SHAPES, and at most
# NEVER_SLOWER on the large ones (the small calls gain most; best's and balanced's full rows must
# not lose)
MARGIN, NEVER_SLOWER = 0.9, 1.1
# (M, K, N): the LLM's two MLP shapes, for a frame-cache call and for a full row
SHAPES = ((16, 1024, 3072), (16, 3072, 1024), (128, 1024, 3072), (128, 3072, 1024))
LARGE = 128  # M from which a call is a full row


def resolve(requested: str | None, llm: Path, threads: int | None) -> tuple[str, str]:
    """(mode, why) for a model whose LLM graph is ``llm``: ``requested`` (None: the
    ``OMNIVOICE_MATMUL`` environment variable, else ``auto``) fixed, or measured here."""
    requested = (requested or os.environ.get("OMNIVOICE_MATMUL") or "auto").strip().lower()
    if requested not in CHOICES:
        raise ValueError(
            f"unknown MatMulNBits mode {requested!r} (OMNIVOICE_MATMUL or matmul=): use one of "
            f"{', '.join(CHOICES)}"
        )
    if requested != "auto":
        return requested, "asked for"
    quantized = nbits(str(llm))
    if quantized is None:
        return "fp32", "the LLM has no MatMulNBits"
    ratios = measure(*quantized, threads)
    large = [r for r, (m, _, _) in zip(ratios, SHAPES, strict=True) if m >= LARGE]
    faster = np.mean(ratios) <= MARGIN and np.mean(large) <= NEVER_SLOWER
    mode = "int8" if faster else "fp32"
    why = "measured at load, int8/fp32 time: " + ", ".join(
        f"{r:.2f} at {m}x{k}x{n}" for r, (m, k, n) in zip(ratios, SHAPES, strict=True)
    )
    logger.info("MatMulNBits multiplies with %s (%s)", mode, why)
    return mode, why


@lru_cache(maxsize=8)
def nbits(path: str) -> tuple[int, int] | None:
    """(bits, block size) of a graph's first MatMulNBits, or None (external data left unread)."""
    import onnx

    return block_quantization(onnx.load(path, load_external_data=False), ("MatMulNBits",))


@lru_cache(maxsize=8)
def measure(bits: int, block: int, threads: int | None, reps: int = 7) -> list[float]:
    """int8's time over fp32's for each of ``SHAPES``: the median of ``reps`` ratios, each of two
    runs back to back (in turn which first), so that a machine whose speed drifts (a shared VM)
    moves both alike."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from omnivoice_rt.sessions import session_options  # sessions imports this module

    rng = np.random.default_rng(0)
    sessions, feeds = {}, []
    for i, (m, k, n) in enumerate(SHAPES):
        blob = block * bits // 8
        weight = rng.integers(0, 256, (n, k // block, blob), dtype=np.uint8)
        scales = np.full(n * (k // block), 0.01, dtype=np.float32)
        node = helper.make_node(
            "MatMulNBits",
            ["A", "B", "scales"],
            ["Y"],
            domain="com.microsoft",
            K=k,
            N=n,
            bits=bits,
            block_size=block,
            accuracy_level=4,
        )
        graph = helper.make_graph(
            [node],
            "matmul",
            [helper.make_tensor_value_info("A", TensorProto.FLOAT, [None, k])],
            [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, n])],
            [
                helper.make_tensor(
                    "B", TensorProto.UINT8, weight.shape, weight.tobytes(), raw=True
                ),
                helper.make_tensor(
                    "scales", TensorProto.FLOAT, scales.shape, scales.tobytes(), raw=True
                ),
            ],
        )
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
        )
        model.ir_version = 9
        for mode, (config, _) in MODES.items():
            sessions[mode, i] = ort.InferenceSession(
                model.SerializeToString(),
                session_options(threads, config),
                providers=["CPUExecutionProvider"],
            )
        feeds.append({"A": rng.standard_normal((m, k)).astype(np.float32)})
    for key, session in sessions.items():  # warm up
        session.run(None, feeds[key[1]])
    ratios: list[list[float]] = [[] for _ in SHAPES]
    for rep in range(reps):
        for i, feed in enumerate(feeds):
            took = {}
            for mode in MODES if rep % 2 else reversed(MODES):
                started = time.perf_counter()
                sessions[mode, i].run(None, feed)
                took[mode] = time.perf_counter() - started
            ratios[i].append(took["int8"] / took["fp32"])
    return [float(np.median(r)) for r in ratios]
