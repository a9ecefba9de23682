"""The LLM's matrix products on ONNX Runtime's integer GEMM kernels.

MatMulNBits, the kernel of the int4 and int8 graphs, multiplies the LLM's shapes at 240-430 GOP/s
on two cores whatever its mode; ONNX Runtime's integer GEMM (MLAS QGEMM, uint8 activations by
int8 weights) multiplies them at three to ten times that on AMX, AVX-512 VNNI or AVX-VNNI, and
faster than MatMulNBits on AVX2 alone too (docs/performance.md "The integer GEMM kernels", "The
kernels on an AVX2-only AMD EPYC Zen 3"). :func:`rewrite_model` replaces each MatMulNBits
of a graph, and each MatMul by a constant float weight, with one of two integer kernels whose
int8 weights are requantized from the same weights, one scale per output column
(:func:`requantize`: each weight within half a step, ``max |w[:, n]| / 254``, of the weights
the graph multiplied by before; ``/ 126`` on a CPU whose kernel saturates, :func:`weight_levels`):

- ``tensor``: ``DynamicQuantizeMatMul``: all of a call's activations rounded to uint8 with one
  scale and zero point.
- ``row``: each row (token) rounded with its own scale (``max |x| / 127``, offset by 128 into
  uint8: ``QuantizeLinear`` per axis), ``MatMulIntegerToFloat`` with the weights' column scales,
  then the rows' scales. A token of massive activations costs only its own precision. The rows
  are rounded once for all the products that read them (q, k, v; gate and up).

The activations of a graph in fp16 are cast to fp32 around the integer kernels. Before the LLM's
weights are requantized, the outlier channels of its products' inputs are moved into them
(SmoothQuant, :mod:`omnivoice_rt.engine.smooth`; ``OMNIVOICE_SMOOTH=0`` turns it off), and the
smoothed graph is kept only if it rounds held-out prompts closer to the source graph than the
plain rewrite does (``rewritten.judge_smoothing``, which makes and keeps the graphs a load
needs).
"""

from __future__ import annotations

import logging
from functools import lru_cache
from pathlib import Path

import numpy as np

logger = logging.getLogger(__name__)

# What a rewritten graph holds, in its cache key (omnivoice_rt.artifacts.derived): bump on any change here.
VERSION = 5  # 2: activations smoothed; 3: o's and down's inputs too; 4: the CPU's weight levels;
# 5: the smoothed graph kept only where it rounds held-out prompts better than the plain one
ROUNDINGS = ("tensor", "row")
# A MatMul by a constant float weight is rewritten from this many weights on (the LLM's
# projections; not the small products of a norm or a position table).
MIN_WEIGHTS = 1 << 12
LEVELS = 127  # int8 steps on each side of zero, for the weights and the rows' activations
# On x86 without VNNI or AMX, MLAS multiplies uint8 by int8 with AVX2's vpmaddubsw, which adds two
# products into a saturating int16: 255 * 127 * 2 overflows it, 255 * 63 * 2 does not (ONNX
# Runtime's quantization docs: "reduce_range", 7-bit weights). Measured on an AVX2-only AMD EPYC
# Zen 3: full-range weights made errors of 48 in products of 0.4 (tests/runtime/test_qgemm.py).
SATURATION_SAFE_LEVELS = 63
SATURATION_FREE = ("avx512_vnni", "avx_vnni", "amx_int8")  # CPU flags of kernels without it


class RewriteError(ValueError):
    """A graph the integer GEMM rewrite cannot take (nothing to rewrite, or a layout it does not read)."""


def saturates(flags: frozenset[str] | set[str], machine: str) -> bool:
    """Whether the integer GEMM of a CPU with these ``flags`` (``/proc/cpuinfo``'s) and
    ``platform.machine()`` adds uint8 x int8 products in saturating int16 (x86 without VNNI or
    AMX; an x86 whose flags cannot be read is taken to)."""
    x86 = machine.lower() in ("x86_64", "amd64", "i386", "i686", "x86")
    return x86 and not any(flag in flags for flag in SATURATION_FREE)


@lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """This CPU's feature flags as Linux's ``/proc/cpuinfo`` names them (none elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


@lru_cache(maxsize=1)
def weight_levels() -> int:
    """The int8 weights' steps each side of zero on this CPU: ``LEVELS``, or
    ``SATURATION_SAFE_LEVELS`` where the kernel saturates (:func:`saturates`)."""
    import platform

    return SATURATION_SAFE_LEVELS if saturates(cpu_flags(), platform.machine()) else LEVELS


def requantize(weights: np.ndarray, levels: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(w8, scale)`` for float ``weights`` (K x N): int8 ``w8`` (K x N) within ``levels`` each
    side of zero (None: this CPU's, :func:`weight_levels`) and float32 ``scale`` (N) with
    ``|w8 * scale - weights| <= scale / 2`` everywhere (a column of zeros: scale 1)."""
    levels = levels or weight_levels()
    weights = np.asarray(weights, dtype=np.float32)
    scale = np.abs(weights).max(axis=0) / levels
    scale[scale == 0] = 1.0
    w8 = np.clip(np.rint(weights / scale), -levels, levels).astype(np.int8)
    return w8, scale.astype(np.float32)


def _unpack(packed: np.ndarray, bits: int, count: int) -> np.ndarray:
    """The unsigned ``bits``-bit values packed low bits first in the last axis of ``packed``,
    the first ``count`` of each row."""
    if bits == 8:
        values = packed
    elif bits == 4:
        values = np.stack([packed & 0x0F, packed >> 4], axis=-1)
    else:
        raise RewriteError(f"MatMulNBits with {bits}-bit weights is not rewritten")
    return values.reshape(*packed.shape[:-1], -1)[..., :count]


def nbits_weights(node, tensor) -> np.ndarray | None:
    """The float32 weights (K x N) a MatMulNBits ``node`` multiplies by, ``tensor(name)`` giving its
    initializers as arrays (None: not a constant); None when it has a group index (g_idx)."""
    from onnx import helper

    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    k, n, bits, block = attrs["K"], attrs["N"], attrs.get("bits", 4), attrs["block_size"]
    inputs = list(node.input) + [""] * (6 - len(node.input))
    if inputs[4]:
        return None
    packed, scales = tensor(inputs[1]), tensor(inputs[2])
    if packed is None or scales is None:
        return None
    blocks = (k + block - 1) // block
    q = _unpack(packed.reshape(n, blocks, -1), bits, block).astype(np.float32)
    scales = scales.astype(np.float32).reshape(n, blocks, 1)
    zero: np.ndarray | float = float(2 ** (bits - 1))
    if inputs[3]:
        points = tensor(inputs[3])
        if points is None:
            return None
        if points.dtype == np.uint8:
            zero = _unpack(points.reshape(n, -1), bits, blocks).astype(np.float32)[..., None]
        else:  # float zero points: w = (q - zero) * scale with zero in the scales' type
            zero = points.astype(np.float32).reshape(n, blocks, 1)
    weights = ((q - zero) * scales).reshape(n, blocks * block)[:, :k]
    # A view, not a copy: the float32 transpose took 18 ms a product, 7.6 of the first load's 25 s
    # (140 products read three times); the int8 weights made from it are laid out once, 4x smaller.
    return weights.T


class _Graph:
    """A graph being rewritten: its initializers by name, and the nodes and tensors added."""

    def __init__(self, model):
        from onnx import numpy_helper

        self.model = model
        self.graph = model.graph
        self.opset = next(
            (o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 13
        )
        self.initializers = {t.name: t for t in self.graph.initializer}
        self.to_array = numpy_helper.to_array
        self.from_array = numpy_helper.from_array
        self.used: set[str] = set()
        self.constants: dict[tuple, str] = {}
        self.rows: dict[str, tuple[str, str]] = {}  # input -> (uint8 rows, rows' scales)
        self.floats: dict[str, str] = {}  # fp16 input -> its fp32 cast
        self.new_nodes: list = []
        self.count = 0

    def tensor(self, name: str) -> np.ndarray | None:
        found = self.initializers.get(name)
        return None if found is None else self.to_array(found)

    def name(self, base: str) -> str:
        self.count += 1
        return f"{base}/qgemm{self.count}"

    def add(self, op: str, inputs: list[str], base: str, outputs: int = 1, **attrs) -> list[str]:
        from onnx import helper

        names = [self.name(base) for _ in range(outputs)]
        domain = "com.microsoft" if op in ("DynamicQuantizeMatMul", "MatMulIntegerToFloat") else ""
        self.new_nodes.append(
            helper.make_node(op, inputs, names, name=self.name(base), domain=domain, **attrs)
        )
        return names

    def constant(self, value, dtype) -> str:
        """An initializer holding ``value``, shared by every node that needs the same one."""
        array = np.array(value, dtype=dtype)
        key = (array.dtype.str, array.shape, array.tobytes())
        if key not in self.constants:
            name = f"qgemm/const{len(self.constants)}"
            self.graph.initializer.append(self.from_array(array, name))
            self.constants[key] = name
        return self.constants[key]

    def weight(self, array: np.ndarray, base: str) -> str:
        name = self.name(base)
        self.graph.initializer.append(self.from_array(array, name))
        return name

    def as_float(self, name: str, half: bool) -> str:
        """``name`` in fp32: itself, or its cast (made once)."""
        from onnx import TensorProto

        if not half:
            return name
        if name not in self.floats:
            (self.floats[name],) = self.add("Cast", [name], name, to=TensorProto.FLOAT)
        return self.floats[name]

    def rounded_rows(self, x: str) -> tuple[str, str]:
        """``(x8, scale)``: the fp32 activations ``x`` (..., K) rounded per row to uint8 around 128,
        and each row's scale (..., 1), made once for every product that reads ``x``."""
        from onnx import TensorProto, helper

        if x not in self.rows:
            (absolute,) = self.add("Abs", [x], x)
            if self.opset >= 18:  # the axes an input rather than an attribute
                (peak,) = self.add("ReduceMax", [absolute, self.constant([-1], np.int64)], x)
            else:
                (peak,) = self.add("ReduceMax", [absolute], x, axes=[-1])
            (step,) = self.add("Mul", [peak, self.constant(1 / LEVELS, np.float32)], x)
            (scale,) = self.add("Max", [step, self.constant(1e-30, np.float32)], x)
            (flat,) = self.add("Flatten", [x], x, axis=-1)
            (flat_scale,) = self.add("Reshape", [scale, self.constant([-1], np.int64)], x)
            (count,) = self.add("Shape", [flat_scale], x)
            (zero,) = self.add(
                "ConstantOfShape",
                [count],
                x,
                value=helper.make_tensor("v", TensorProto.UINT8, [1], [128]),
            )
            (flat8,) = self.add("QuantizeLinear", [flat, flat_scale, zero], x, axis=0)
            (shape,) = self.add("Shape", [x], x)
            (x8,) = self.add("Reshape", [flat8, shape], x)
            self.rows[x] = (x8, scale)
        return self.rows[x]


def _rewrite_node(g: _Graph, node, weights: np.ndarray, rounding: str, half: bool, bias: str):
    """The integer kernel's nodes for ``node`` (output ``node.output[0]``) into ``g.new_nodes``."""
    from onnx import TensorProto

    base = node.name or node.output[0]
    w8, scale = requantize(weights)
    w8_name, scale_name = g.weight(w8, base), g.weight(scale, base)
    x = g.as_float(node.input[0], half)
    out = g.name(base) if half else node.output[0]
    if half and bias:
        (bias,) = g.add("Cast", [bias], base, to=TensorProto.FLOAT)
    if rounding == "tensor":
        g.add("DynamicQuantizeMatMul", [x, w8_name, scale_name, "", bias], base)
        g.new_nodes[-1].output[0] = out
    else:
        x8, row_scale = g.rounded_rows(x)
        offset = g.constant(128, np.uint8)
        one = g.constant(1.0, np.float32)
        (product,) = g.add("MatMulIntegerToFloat", [x8, w8_name, one, scale_name, offset], base)
        if bias:
            (product,) = g.add("Mul", [product, row_scale], base)
            g.add("Add", [product, bias], base)
        else:
            g.add("Mul", [product, row_scale], base)
        g.new_nodes[-1].output[0] = out
    if half:
        g.add("Cast", [out], base, to=TensorProto.FLOAT16)
        g.new_nodes[-1].output[0] = node.output[0]


def is_product(node, initializers: dict) -> bool:
    """Whether ``node`` is a product the rewrite takes: a MatMulNBits whose weights, scales and zero
    points are constants (and no group index), or a MatMul by a constant 2-D float weight of at
    least ``MIN_WEIGHTS``; read from the graph alone (``initializers``: name -> TensorProto)."""
    from onnx import TensorProto

    if node.op_type == "MatMulNBits" and node.domain == "com.microsoft":
        inputs = list(node.input) + [""] * (6 - len(node.input))
        return not inputs[4] and all(i in initializers for i in inputs[1:3] + inputs[3:4] if i)
    if node.op_type == "MatMul" and len(node.input) == 2 and node.input[1] in initializers:
        weight = initializers[node.input[1]]
        kinds = (TensorProto.FLOAT, TensorProto.FLOAT16)
        return (
            len(weight.dims) == 2
            and weight.data_type in kinds
            and np.prod(weight.dims) >= MIN_WEIGHTS
        )
    return False


def product_weights(g: _Graph, node) -> np.ndarray:
    """The float32 weights (K x N) a product of :func:`is_product` multiplies by."""
    if node.op_type == "MatMulNBits":
        return nbits_weights(node, g.tensor)
    return g.tensor(node.input[1]).astype(np.float32)


def rounded_product(x: np.ndarray, weights: np.ndarray, rounding: str) -> np.ndarray:
    """``x @ weights`` as the integer kernel of ``rounding`` computes it, in numpy: the weights
    requantized (:func:`requantize`), the activations rounded per row or per call."""
    w8, scale = requantize(weights)
    if rounding == "row":
        step = np.maximum(np.abs(x).max(axis=-1, keepdims=True) / LEVELS, 1e-30)
        return (np.clip(np.rint(x / step), -LEVELS, LEVELS) @ w8) * step * scale
    low, high = min(float(x.min()), 0.0), max(float(x.max()), 0.0)
    step = (high - low) / 255 or 1.0
    zero = np.clip(np.rint(-low / step), 0, 255)
    return ((np.clip(np.rint(x / step) + zero, 0, 255) - zero) * step) @ (w8 * scale)


def _smoothing(g: _Graph, measured: dict, rounding: str) -> tuple[dict, dict]:
    """SmoothQuant's factors for the products' inputs of ``measured`` (their peaks and a sample,
    :func:`omnivoice_rt.engine.smooth.activations`) that a division reaches at no cost
    (:func:`omnivoice_rt.engine.smooth.sites`), where it rounds them better
    (:func:`omnivoice_rt.engine.smooth.choose`): ``(rows, columns)``, the factors by which the
    rows of the products reading each input are multiplied, and those by which the columns of
    the products making one are divided, by input and by product output, as the products are
    rewritten; the divisions into RMSNorm weights are made here."""
    from omnivoice_rt.engine.smooth import choose, product_width, sites

    rows, columns, count = {}, {}, 0
    for site in sites(g.model, lambda n: is_product(n, g.initializers)):
        if site.tensor not in measured:
            continue
        count += 1
        width = product_width(site.producer, g.initializers) if site.producer else 0
        weights = [product_weights(g, user) for user in site.users]
        chosen = choose(
            site,
            *measured[site.tensor],
            weights,
            width,
            lambda x, w: rounded_product(x, w, rounding),
        )
        if chosen is None:
            continue
        rows[site.tensor], divided = chosen
        if site.norm:
            gamma = g.tensor(site.norm)
            smoothed = (gamma.astype(np.float32) / rows[site.tensor]).astype(gamma.dtype)
            g.initializers[site.norm].CopyFrom(g.from_array(smoothed, site.norm))
        else:
            columns[site.producer.output[0]] = divided
    logger.info("smoothed %d of %d products' inputs into the weights", len(rows), count)
    return rows, columns


def rewrite_model(model, rounding: str, measured: dict | None = None) -> int:
    """Rewrite ``model`` (an ``onnx.ModelProto`` with its weights loaded) in place: each product of
    :func:`is_product` becomes the integer kernel of ``rounding`` (``tensor`` or ``row``); with
    ``measured`` (products' inputs' peaks per channel and samples, :mod:`omnivoice_rt.engine.smooth`),
    the outlier channels of those inputs move into the weights first. Returns how many products
    were rewritten; ``RewriteError`` when none could be."""
    from onnx import TensorProto, helper

    if rounding not in ROUNDINGS:
        raise ValueError(f"unknown rounding {rounding!r}: use one of {', '.join(ROUNDINGS)}")
    g = _Graph(model)
    rows, columns = _smoothing(g, measured, rounding) if measured else ({}, {})
    nodes, rewritten = [], 0
    for node in g.graph.node:
        if not is_product(node, g.initializers):
            nodes.append(node)
            continue
        weights = product_weights(g, node)
        if node.input[0] in rows:  # x @ w == (x / s) @ (s * w), x / s made where x is
            weights = weights * rows[node.input[0]][:, None]
        if node.output[0] in columns:  # the output's columns divided, for a product reading it
            weights = weights / columns[node.output[0]][None, :]
        half = g.initializers[node.input[2 if node.op_type == "MatMulNBits" else 1]].data_type
        half = half == TensorProto.FLOAT16
        bias = node.input[5] if node.op_type == "MatMulNBits" and len(node.input) > 5 else ""
        g.new_nodes = []
        _rewrite_node(g, node, weights, rounding, half, bias)
        nodes.extend(g.new_nodes)
        g.used.update(i for i in node.input[1:5] if i)
        rewritten += 1
    if not rewritten:
        raise RewriteError(
            "the graph has no MatMulNBits (without a group index) and no MatMul by a constant "
            "weight to rewrite"
        )
    still_read = {i for node in nodes for i in node.input}
    kept = [t for t in g.graph.initializer if t.name not in g.used or t.name in still_read]
    del g.graph.initializer[:]
    g.graph.initializer.extend(kept)
    del g.graph.node[:]
    g.graph.node.extend(nodes)
    opsets = {o.domain: o for o in model.opset_import}
    if "com.microsoft" not in opsets:
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    default = opsets.get("") or opsets.get("ai.onnx")
    if default is not None and default.version < 13:  # QuantizeLinear per axis
        default.version = 13
    logger.info(
        "rewrote %d matrix products onto the integer GEMM (%s rounding)", rewritten, rounding
    )
    return rewritten


def rewrite_file(src: Path, dst: Path, rounding: str, measured: dict | None = None) -> int:
    """Write ``src``'s graph rewritten (:func:`rewrite_model`) to ``dst``, weights in
    ``<dst name>.data`` beside it."""
    import onnx

    from omnivoice_rt.artifacts.bidirectional import load_with_weights

    model = load_with_weights(Path(src))
    count = rewrite_model(model, rounding, measured)
    onnx.save_model(
        model,
        str(dst),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=Path(dst).name + ".data",
        size_threshold=1024,
    )
    return count
