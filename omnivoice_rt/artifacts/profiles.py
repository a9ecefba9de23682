"""The precisions an artifact folder may hold: one table for the runtime, the Hub, the server and
the build, and what a profile's graphs really hold.

A profile is one folder of the artifact root (``docs/design.md`` section 2): the published repo
has ``fp16`` at the root and ``int4/`` (and ``cuda/``); our builds add ``int8/`` and ``fp32/``.
What a profile's weights are depends on who built it (the published ``int4`` has int4 heads, ours
fp32 heads), so a description of a loaded profile is read from its graphs (:func:`weights_of`),
never from its name.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path


def folder_file(folder: str, name: str) -> str:
    """``name`` inside a profile's ``folder`` (``"."`` is the root), relative to the root."""
    return name if folder in (".", "") else f"{folder}/{name}"


@dataclass(frozen=True)
class Profile:
    name: str  # the precision's name everywhere: int4, int8, fp16, fp32, cuda
    folder: str  # its folder, relative to the artifact root ("." is the root)
    device: str  # build_artifacts.py --device that builds it
    summary: str  # what it is for, for a selector

    def relative(self, name: str) -> str:
        """A file of this profile, relative to the artifact root."""
        return folder_file(self.folder, name)

    def patterns(self) -> list[str]:
        """The Hub files of this profile (beside the shared ones: tokenizer, codec)."""
        if self.folder != ".":
            return [f"{self.folder}/*"]
        graphs = ("audio_embeddings_encoder", "llm_decoder", "audio_heads_decoder")
        return [f"{graph}.onnx*" for graph in graphs] + ["genai_config.json"]


PROFILES = {
    profile.name: profile
    for profile in (
        Profile("int4", "int4", "cpu", "CPU, the fastest on most CPUs"),
        Profile("int8", "int8", "cpu_int8", "CPU, the closest to fp32 of the fast ones"),
        Profile("fp16", ".", "cpu_fp16", "CPU"),
        Profile("fp32", "fp32", "cpu_fp32", "CPU, the reference"),
        Profile("cuda", "cuda", "gpu", "GPU, CUDA execution provider"),
    )
}
PROFILE_DIRS = {name: profile.folder for name, profile in PROFILES.items()}
# What onnx-community/OmniVoice-Onnx publishes for a CPU: offered when its file list cannot be had.
PUBLISHED = ("int4", "fp16")
ROLE_NAMES = {
    "llm_decoder": "LLM",
    "audio_embeddings_encoder": "encoder",
    "audio_heads_decoder": "heads",
}


def block_quantization(
    model, ops: tuple[str, ...] = ("MatMulNBits", "GatherBlockQuantized")
) -> tuple[int, int | None] | None:
    """(bits, block size) of the first node of ``ops`` in an ONNX model, or None."""
    import onnx

    for node in model.graph.node:
        if node.op_type in ops:
            attributes = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            return int(attributes.get("bits", 4)), attributes.get("block_size")
    return None


@lru_cache(maxsize=64)
def weights_of(path: str | Path) -> str:
    """What a graph's weights are, from its nodes and initializers (external data left unread):
    ``int4 (block 32)`` for MatMulNBits or GatherBlockQuantized weights, ``int8`` for other
    integer kernels, else the dtype most of its float initializers have (``fp16``, ``fp32``)."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    quantized = block_quantization(model)
    if quantized:
        bits, block = quantized
        return f"int{bits}" + (f" (block {block})" if block else "")
    if any(
        n.op_type
        in ("MatMulInteger", "QLinearMatMul", "DynamicQuantizeMatMul", "MatMulIntegerToFloat")
        for n in model.graph.node
    ):
        return "int8"
    counts: dict[int, int] = {}
    for tensor in model.graph.initializer:
        size = 1
        for dim in tensor.dims:
            size *= dim
        counts[tensor.data_type] = counts.get(tensor.data_type, 0) + size
    floats = {
        onnx.TensorProto.FLOAT16: "fp16",
        onnx.TensorProto.FLOAT: "fp32",
        onnx.TensorProto.BFLOAT16: "bf16",
    }
    found = {floats[t]: n for t, n in counts.items() if t in floats}
    return max(found, key=found.get) if found else "?"


def describe_weights(paths: dict[str, Path]) -> str:
    """``LLM int4 (block 32), encoder int4 (block 32), heads fp32``: what each role's graph holds."""
    return ", ".join(
        f"{ROLE_NAMES[role]} {weights_of(paths[role])}" for role in ROLE_NAMES if role in paths
    )
