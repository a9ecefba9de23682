"""Which kernel multiplies the LLM's weights on this CPU, chosen when a model loads.

The int4 and int8 graphs multiply with MatMulNBits, in one of two modes: ``int8`` (as the graphs
ask, accuracy level 4: each block of 32 activations of a row rounded to int8, integer kernels) or
``fp32`` (ONNX Runtime's ``mlas.qnbit.force_fp32``: the weights dequantized, nothing else rounded).
Either can also be rewritten onto ONNX Runtime's integer GEMM (:mod:`omnivoice_rt.engine.qgemm`, int8
weights per column requantized from the same weights), faster on every x86 CPU measured, several
times where it has AMX or VNNI: ``qgemm-row`` rounds each token's activations with its own scale, ``qgemm`` all of a
call's with one (``DynamicQuantizeMatMul``, the fastest, the most exposed to activations far
above the rest). ``KERNELS`` lists them from the most accurate to the least.

``auto`` (the default) times the kernels of ``AUTO`` on products of the LLM's shapes when a model
loads (about 1.5 s, once a process), small calls and large ones, and takes the most accurate
within ``MARGIN`` of the fastest: ``qgemm-row`` on every CPU measured so far, AVX2-only ones
included; a CPU where it is not faster keeps MatMulNBits, never slower than before
(docs/performance.md "The integer GEMM kernels"). ``qgemm`` is not among them: one scale
for a whole call is what a model's rare, huge activations ruin (docs/performance.md, "Rounding
the activations"), and random weights cannot show whether the released ones have them; it is
there to be asked for, and measured (``eval --mode quality --matmul``). A graph without MatMulNBits (the fp32
profile, the reference) keeps its float products unless a kernel is asked for.
``OMNIVOICE_MATMUL`` or ``OmniVoiceONNX.load(matmul=...)`` fixes the kernel; the tests fix
``fp32``, which alone gives the same numbers whatever the batch shape.
"""

from __future__ import annotations

import logging
import os
import time
from functools import lru_cache
from pathlib import Path

import numpy as np

from omnivoice_rt.engine import qgemm
from omnivoice_rt.engine.kernels import AUTO, CHOICES, KERNELS, nbits
from omnivoice_rt.engine.sessions import session_options

logger = logging.getLogger(__name__)


# A kernel is taken when its time, averaged over SHAPES relative to the fastest at each, is at
# most MARGIN times the fastest kernel's.
MARGIN = 1.1
# (M, K, N): the LLM's two MLP shapes, for a frame-cache call and for a full row
SHAPES = ((16, 1024, 3072), (16, 3072, 1024), (128, 1024, 3072), (128, 3072, 1024))


def resolve(requested: str | None, llm: Path, threads: int | None) -> tuple[str, str]:
    """(kernel, why) for a model whose LLM graph is ``llm``: ``requested`` (None: the
    ``OMNIVOICE_MATMUL`` environment variable, else ``auto``) fixed, or measured here."""
    requested = (requested or os.environ.get("OMNIVOICE_MATMUL") or "auto").strip().lower()
    if requested not in CHOICES:
        raise ValueError(
            f"unknown matrix kernel {requested!r} (OMNIVOICE_MATMUL or matmul=): use one of "
            f"{', '.join(CHOICES)}"
        )
    if requested != "auto":
        return requested, "asked for"
    quantized = nbits(str(llm))
    if quantized is None:
        return "fp32", "the LLM has no MatMulNBits: its float products are kept"
    return choose(measure(*quantized, threads, AUTO))


def choose(times: dict[str, list[float]]) -> tuple[str, str]:
    """The most accurate kernel of ``times`` (seconds of each kernel at each shape of ``SHAPES``,
    in ``KERNELS``' order) within ``MARGIN`` of the fastest, and why."""
    kernels = list(times)
    fastest_at = np.min([times[k] for k in kernels], axis=0)
    cost = {k: float(np.mean(np.array(times[k]) / fastest_at)) for k in kernels}
    best = min(cost.values())
    chosen = next(k for k in kernels if cost[k] <= best * MARGIN)
    why = "measured at load, time against the fastest: " + ", ".join(
        f"{k} {cost[k]:.2f}" for k in kernels
    )
    logger.info("the LLM multiplies with %s (%s)", chosen, why)
    return chosen, why


def fallback(llm: Path, threads: int | None) -> str:
    """The MatMulNBits mode to use when the integer GEMM cannot be had for ``llm``."""
    quantized = nbits(str(llm))
    if quantized is None:
        return "fp32"
    times = measure(*quantized, threads, AUTO)  # the measurement auto made, if it did
    return choose({k: v for k, v in times.items() if KERNELS[k].rounding is None})[0]


def nbits_model(m: int, k: int, n: int, bits: int, block: int, seed: int = 0):
    """One MatMulNBits of random weights (K x N, ``bits`` in blocks of ``block``), as the LLM's
    graphs make them (accuracy level 4): input A (M x K), output Y."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(seed)
    blob = block * bits // 8
    weight = rng.integers(0, 256, (n, k // block, blob), dtype=np.uint8)
    scales = np.full(n * (k // block), 0.01, dtype=np.float32)
    node = helper.make_node(
        "MatMulNBits",
        ["A", "B", "scales"],
        ["Y"],
        name="product",
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
            helper.make_tensor("B", TensorProto.UINT8, weight.shape, weight.tobytes(), raw=True),
            helper.make_tensor(
                "scales", TensorProto.FLOAT, scales.shape, scales.tobytes(), raw=True
            ),
        ],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    )
    model.ir_version = 9
    return model


@lru_cache(maxsize=8)
def measure(
    bits: int, block: int, threads: int | None, kernels: tuple[str, ...], reps: int = 7
) -> dict[str, list[float]]:
    """Seconds of each of ``kernels`` at each shape of ``SHAPES``: the median of ``reps`` rounds,
    each running every kernel once, in turn in either order, so that a machine whose speed drifts
    (a shared VM) moves them alike. A kernel whose graph cannot be made here is left out."""
    import onnxruntime as ort

    rng = np.random.default_rng(0)
    sessions, feeds, failed = {}, [], set()
    for i, (m, k, n) in enumerate(SHAPES):
        for name in kernels:
            if name in failed:
                continue
            model = nbits_model(m, k, n, bits, block, seed=i)
            try:
                if KERNELS[name].rounding:
                    qgemm.rewrite_model(model, KERNELS[name].rounding)
                sessions[name, i] = ort.InferenceSession(
                    model.SerializeToString(),
                    session_options(threads, KERNELS[name].config),
                    providers=["CPUExecutionProvider"],
                )
            except Exception as exc:  # onnxruntime raises its own exception types
                logger.warning("the %s kernel cannot run here (%s)", name, exc)
                failed.add(name)
        feeds.append({"A": rng.standard_normal((m, k)).astype(np.float32)})
    kernels = tuple(k for k in kernels if k not in failed)
    for (_, i), session in sessions.items():  # warm up
        session.run(None, feeds[i])
    took: dict[str, list[list[float]]] = {name: [[] for _ in SHAPES] for name in kernels}
    for rep in range(reps):
        for i, feed in enumerate(feeds):
            for name in kernels if rep % 2 else reversed(kernels):
                started = time.perf_counter()
                sessions[name, i].run(None, feed)
                took[name][i].append(time.perf_counter() - started)
    return {name: [float(np.median(t)) for t in shapes] for name, shapes in took.items()}
