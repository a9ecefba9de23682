"""The kernels the LLM's products can run on, one table: what each rounds and the session settings
it needs (``matmul.py`` chooses among them at load; ``qgemm.py`` rewrites a graph onto the integer
ones; ``sessions.py`` opens a session with a kernel's settings)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from omnivoice_rt.artifacts.profiles import block_quantization


@dataclass(frozen=True)
class Kernel:
    name: str
    rounding: str | None  # qgemm's rounding of the activations; None: the graph's MatMulNBits
    summary: str
    config: dict[str, str] = field(default_factory=dict)  # session settings


# From the most accurate to the least: auto takes the first within MARGIN of the fastest.
KERNELS = {
    kernel.name: kernel
    for kernel in (
        Kernel(
            "fp32",
            None,
            "MatMulNBits, weights dequantized and multiplied in fp32",
            {"mlas.qnbit.force_fp32": "1"},
        ),
        Kernel("int8", None, "MatMulNBits, activations rounded to int8 per block of 32"),
        Kernel("qgemm-row", "row", "integer GEMM, int8 weights, activations rounded per token"),
        Kernel("qgemm", "tensor", "integer GEMM, int8 weights, activations rounded per call"),
    )
}
CHOICES = ("auto", *KERNELS)
AUTO = ("fp32", "int8", "qgemm-row")  # what auto chooses among


@lru_cache(maxsize=8)
def nbits(path: str) -> tuple[int, int] | None:
    """(bits, block size) of a graph's first MatMulNBits, or None (external data left unread)."""
    import onnx

    return block_quantization(onnx.load(path, load_external_data=False), ("MatMulNBits",))
