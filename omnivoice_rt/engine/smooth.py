"""SmoothQuant for the integer GEMM: the activations' outlier channels moved into the weights.

A few channels of an LLM's activations can be far larger than the rest on every token; rounding a
token's activations with one scale then leaves the others few steps (docs/performance.md
"Rounding the activations": four channels x50 took ``qgemm-row`` from 7.6% to 47.5% hidden-state
error). SmoothQuant (Xiao et al., 2023) divides channel j of a product's input by ``s_j`` and
multiplies row j of its weights by ``s_j``: the same product, flatter activations. The division
is folded exactly into what makes the input, so it costs nothing when the model runs
(:func:`sites`): an RMSNorm's weight (the inputs of q, k, v; gate and up), the up product's
columns (down's input, ``silu(gate) * up``) or the value product's (o's input, the attention's
output: the channels of the massive activations real LLMs carry come out of down).

``s_j = max|x_j| ** alpha / max|w_j| ** (1 - alpha)`` (:func:`factors`), with ``max|x_j|`` measured
on the model's own activations (:func:`activations`): the prompts of ``CALIBRATION``'s sentences,
as the first unmasking step sees them (every target code a mask) and with random codes in their
place, run once through the source graph when the rewritten graph is made (the factors they give are
folded into the rewritten graph's weights; the activations are not kept). Each
site takes the strength ``alpha`` of ``STRENGTHS``, or no smoothing, that rounds a sample of those
activations best through its products (:func:`choose`): smoothing that would cost more than it
saves (as down's input's can on weights without outliers) is not made. Sites chosen alone can
still compound into a worse model, so the smoothed graph is then judged whole against the plain
rewrite on ``HELD_OUT``'s prompts (:func:`hidden_errors`, ``rewritten.judge_smoothing``) and kept
only if it rounds them closer to the source graph.
"""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

logger = logging.getLogger(__name__)

# How much of an outlier may move into the weights (SmoothQuant's migration strength): each site
# takes the one of these, or none, whose products' error on the calibration's own activations is
# least (:func:`choose`; docs/performance.md "Rounding the activations").
STRENGTHS = (0.25, 0.5)
SAMPLE_ROWS = 8  # rows of each calibration run kept per input to judge the strengths by
SAMPLE_COLUMNS = 256  # output columns of each product they are judged on
NORMS = ("SimplifiedLayerNormalization", "SkipSimplifiedLayerNormalization")
# Sentences whose prompts calibrate the activations' peaks (language, text), and the frames of
# target each gets.
CALIBRATION = [
    ("en", "The quick brown fox jumps over the lazy dog, and then it rests in the shade."),
    ("zh", "今天天气很好，我们一起去公园散步吧。"),
    ("de", "Guten Morgen! Heute scheint die Sonne, und wir gehen spazieren."),
    ("ja", "こんにちは、今日はとても良い天気ですね。"),
    (None, "Good evening. The kitchen lights are on, and the front door is locked for the night."),
]
# Prompts the smoothed graph is judged on as a whole, none of them calibration's: smoothing is
# kept only where it rounds these closer to the source graph than no smoothing does
# (``rewritten.judge_smoothing``).
HELD_OUT = [
    ("en", "Please remind me to water the plants at seven tomorrow morning."),
    ("fr", "Le train de neuf heures partira avec dix minutes de retard."),
    (
        None,
        "She sells sea shells by the sea shore, and the shells she sells are surely sea shells.",
    ),
]
TARGET_FRAMES = 60


def norm_weight(node) -> str:
    """The name of an RMSNorm node's (``NORMS``) weight input."""
    return node.input[2 if node.op_type == "SkipSimplifiedLayerNormalization" else 1]


@dataclass(frozen=True)
class Site:
    """An input of products (``users``: their weight rows take the factors) whose channels can be
    divided where the input is made, so that nothing runs the more: out of an RMSNorm's weight
    (``norm``), or out of some output columns of the product that makes it (``producer``, with
    ``columns``: the producer's column that each channel of ``tensor`` comes from)."""

    tensor: str
    users: tuple
    kind: str  # "norm", "up" or "values": what the division folds into
    norm: str = ""
    producer: object = None
    columns: np.ndarray | None = None


def sites(model, is_product) -> list[Site]:
    """Every input of the graph's products (``is_product(node)``; all its readers must be
    products) that a division reaches exactly, at no cost:

    - an RMSNorm's output (q, k, v; gate and up): into the norm's weight, shared with no node;
    - ``a * up`` (the MLP's ``silu(gate) * up``, down's input): into the up product's columns;
    - a GroupQueryAttention's output (o's input): into the value product's columns (or its
      slice of a packed q, k, v product), as attention is linear in the values, and the past
      values the graph is fed are its own earlier ones; each value channel serves the same
      channel of every query head of its group, so those share one factor."""
    initializers = {t.name: t for t in model.graph.initializer}
    readers: dict[str, list] = {}
    makers = {}
    for node in model.graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
        for name in node.output:
            makers[name] = node

    def products_only(tensor: str) -> tuple:
        users = readers.get(tensor, [])
        if users and all(is_product(u) and u.input[0] == tensor for u in users):
            return tuple(users)
        return ()

    def sole_product(tensor: str):
        """The product that makes ``tensor``, read by one node only, without a bias."""
        node = makers.get(tensor)
        if node is None or not is_product(node) or len(readers.get(tensor, [])) != 1:
            return None
        return None if len(node.input) > 5 and node.input[5] else node

    found = []
    for node in model.graph.node:
        if not node.output or not (users := products_only(node.output[0])):
            continue
        out = node.output[0]
        if node.op_type in NORMS:
            weight = norm_weight(node)
            if weight in initializers and len(readers.get(weight, [])) == 1:
                found.append(Site(out, users, "norm", norm=weight))
        elif node.op_type == "Mul" and len(node.input) == 2:
            up = next((p for p in map(sole_product, node.input) if p is not None), None)
            if up is not None:
                columns = np.arange(product_width(up, initializers))
                found.append(Site(out, users, "up", producer=up, columns=columns))
        elif node.op_type == "GroupQueryAttention" and len(node.input) > 2 and node.input[2]:
            source = _columns_of(node.input[2], makers, readers, sole_product, initializers)
            if source is not None:
                producer, offset, width = source
                heads, kv_heads = (_attribute(node, n) for n in ("num_heads", "kv_num_heads"))
                dim = width // kv_heads
                channel = np.arange(heads * dim)
                group = heads // kv_heads
                columns = offset + (channel // dim // group) * dim + channel % dim
                found.append(Site(out, users, "values", producer=producer, columns=columns))
    return found


def _attribute(node, name: str, default=None):
    from onnx import helper

    for attr in node.attribute:
        if attr.name == name:
            return helper.get_attribute_value(attr)
    return default


def product_width(node, initializers: dict) -> int:
    """N, the output columns of a product (MatMulNBits or MatMul by a constant weight)."""
    if node.op_type == "MatMulNBits":
        return int(_attribute(node, "N"))
    return int(initializers[node.input[1]].dims[1])


def _columns_of(tensor: str, makers: dict, readers: dict, sole_product, initializers: dict):
    """(product, first column, columns) whose output's columns ``tensor`` is: the product's whole
    output, or one part of its ``Split`` along the last axis (read by one node); else None."""
    from onnx import numpy_helper

    if (product := sole_product(tensor)) is not None:
        return product, 0, product_width(product, initializers)
    split = makers.get(tensor)
    if split is None or split.op_type != "Split" or len(readers.get(tensor, [])) != 1:
        return None
    product = sole_product(split.input[0])
    if product is None or _attribute(split, "axis", 0) not in (-1, 2):
        return None
    width = product_width(product, initializers)
    sizes = _attribute(split, "split")
    if len(split.input) > 1 and split.input[1]:
        name = split.input[1]
        if name in initializers:
            sizes = numpy_helper.to_array(initializers[name])
        else:
            maker = makers.get(name)
            value = None if maker is None else _attribute(maker, "value")
            if maker is None or maker.op_type != "Constant" or value is None:
                return None
            sizes = numpy_helper.to_array(value)
    if sizes is None:
        parts = _attribute(split, "num_outputs", len(split.output))
        sizes = [width // parts] * parts
    sizes = [int(x) for x in np.asarray(sizes).ravel()]
    if sum(sizes) != width:
        return None
    index = list(split.output).index(tensor)
    return product, sum(sizes[:index]), sizes[index]


def factors(peak: np.ndarray, weight_peak: np.ndarray, alpha: float = 0.5) -> np.ndarray:
    """SmoothQuant's ``s`` for activations whose channels peak at ``peak`` and weights whose
    rows peak at ``weight_peak``, migration strength ``alpha``; 1 where either is zero."""
    peak = np.asarray(peak, dtype=np.float64)
    weight_peak = np.asarray(weight_peak, dtype=np.float64)
    s = np.ones_like(peak)
    live = (peak > 0) & (weight_peak > 0)
    s[live] = peak[live] ** alpha / weight_peak[live] ** (1 - alpha)
    return np.clip(s, 1e-4, 1e4).astype(np.float32)


def choose(
    site: Site, peak: np.ndarray, sample: np.ndarray, weights: list, width: int, product
) -> tuple[np.ndarray, np.ndarray | None] | None:
    """The factors of the strength (``STRENGTHS``) whose rounded products (``product(x, w)``: the
    kernel's rounding, in numpy) of ``sample`` (rows of the site's input) by the site's users'
    ``weights`` (``SAMPLE_COLUMNS`` of their columns) stray least from the exact ones, if that is less than without smoothing; None
    otherwise. Returns ``(s, columns)``: ``s`` per channel of the input, and for a site whose
    division folds into a producer (of ``width`` columns), ``s`` per producer column."""
    weight_peak = np.max([np.abs(w).max(axis=1) for w in weights], axis=0)
    # the error of some output columns (each column's weights are rounded alone): as telling, and
    # what keeps the first load short
    rng = np.random.default_rng(0)
    weights = [
        w[:, np.sort(rng.choice(w.shape[1], SAMPLE_COLUMNS, replace=False))]
        if w.shape[1] > SAMPLE_COLUMNS
        else w
        for w in weights
    ]
    exact = [sample @ w for w in weights]
    norm = sum(float(np.square(e).sum()) for e in exact) or 1.0

    def error(s: np.ndarray) -> float:
        return (
            sum(
                float(np.square(product(sample / s, w * s[:, None]) - e).sum())
                for w, e in zip(weights, exact, strict=True)
            )
            / norm
        )

    best, least = None, error(np.ones_like(weight_peak))
    for alpha in STRENGTHS:
        if site.columns is None:
            s, columns = factors(peak, weight_peak, alpha), None
        else:  # the channels that come out of one producer column share its factor
            column_peak, column_weight = np.zeros(width), np.zeros(width)
            np.maximum.at(column_peak, site.columns, peak)
            np.maximum.at(column_weight, site.columns, weight_peak)
            columns = factors(column_peak, column_weight, alpha)  # 1: no channel from it
            s = columns[site.columns]
        if (found := error(s)) < least:
            best, least = (s, columns), found
    return best


def calibration_embeddings(
    root: Path, manifest, precision: str, overrides: dict, sentences: list = CALIBRATION
) -> list:
    """The LLM's input for the prompts of ``sentences`` (language, text): each masked, and with
    random codes."""
    from omnivoice_rt.engine.prompt import TextTokenizer, build_prompt
    from omnivoice_rt.engine.sessions import graph_path, open_session

    config = manifest.model
    encoder = open_session(
        graph_path(root, manifest, precision, "audio_embeddings_encoder", overrides),
        ["CPUExecutionProvider"],
    )
    tokenizer = TextTokenizer(root / "tokenizer.json")
    rng = np.random.default_rng(0)
    embeddings = []
    for language, text in sentences:
        prompt = build_prompt(
            tokenizer,
            text,
            TARGET_FRAMES,
            num_codebooks=config.num_audio_codebook,
            mask_id=config.audio_mask_id,
            language=language,
        )
        coded = prompt.ids.copy()
        coded[:, -TARGET_FRAMES:] = rng.integers(
            0, config.audio_mask_id, coded[:, -TARGET_FRAMES:].shape
        )
        for ids in (prompt.ids, coded):
            feeds = {"input_ids": ids[None], "audio_mask": prompt.audio_mask[None]}
            embeddings.append(encoder.run(None, feeds)[0])
    return embeddings


def activations(
    source: Path, model, tensors: list[str], embeddings: list, head_dim: int, work: Path
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{tensor: (max |x_j| per channel, sample)}`` of the graph ``source``'s ``tensors`` over every
    token of ``embeddings`` (the LLM's inputs), ``sample`` holding ``SAMPLE_ROWS`` tokens' rows of
    each (float32; chosen at random, the same for every tensor): ``model`` (``source`` read without its weights; it gains
    them as outputs) saved in the folder ``work`` beside its weights (hard links where the file
    system allows, else copies: ONNX Runtime reads no weights through a link out of the graph's
    folder), removed afterwards."""
    import onnx
    import onnxruntime as ort
    from onnx import helper

    from omnivoice_rt.artifacts.bidirectional import llm_feeds

    embeds = next(i for i in model.graph.input if i.name == "inputs_embeds")
    kind = embeds.type.tensor_type.elem_type  # every product's input is of the activations' type
    for name in tensors:
        model.graph.output.append(helper.make_tensor_value_info(name, kind, None))
    locations = {
        entry.value
        for tensor in model.graph.initializer
        for entry in tensor.external_data
        if entry.key == "location"
    }
    found: dict[str, np.ndarray] = {}
    samples: dict[str, list] = {name: [] for name in tensors}
    rng = np.random.default_rng(0)
    folder = Path(work) / "calibration"
    folder.mkdir(parents=True)
    try:
        for location in locations:
            weights = (source.parent / location).resolve()
            try:
                os.link(weights, folder / location)
            except OSError:
                shutil.copyfile(weights, folder / location)
        path = folder / source.name
        onnx.save_model(model, str(path))
        options = ort.SessionOptions()
        options.log_severity_level = 3
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        dtype = np.float16 if "float16" in session.get_inputs()[0].type else np.float32
        for embeds in embeddings:
            feeds = llm_feeds(session, embeds.astype(dtype), None, head_dim)
            rows = None
            for name, value in zip(tensors, session.run(tensors, feeds), strict=True):
                value = value.astype(np.float32).reshape(-1, value.shape[-1])
                if rows is None:
                    rows = rng.choice(len(value), min(SAMPLE_ROWS, len(value)), replace=False)
                peak = np.abs(value).max(axis=0)
                found[name] = np.maximum(found.get(name, peak), peak)
                samples[name].append(value[rows])
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    logger.info("measured %d activations on %d prompts", len(found), len(embeddings))
    return {name: (peak, np.concatenate(samples[name])) for name, peak in found.items()}


def hidden_errors(reference: Path, graphs: list, embeddings: list, head_dim: int) -> list[float]:
    """Each LLM graph of ``graphs``' hidden states over ``embeddings`` against ``reference``'s
    (MatMulNBits' products in fp32), relative: one session open at a time."""
    from omnivoice_rt.artifacts.bidirectional import llm_feeds
    from omnivoice_rt.engine.sessions import open_session

    def hidden(path: Path) -> list:
        session = open_session(path, ["CPUExecutionProvider"], matmul="fp32")
        dtype = np.float16 if "float16" in session.get_inputs()[0].type else np.float32
        return [
            session.run(["hidden_states"], llm_feeds(session, e.astype(dtype), None, head_dim))[
                0
            ].astype(np.float64)
            for e in embeddings
        ]

    exact = hidden(reference)
    norm = sum(float(np.square(h).sum()) for h in exact) or 1.0
    errors = []
    for graph in graphs:
        strayed = sum(
            float(np.square(h - e).sum()) for h, e in zip(hidden(graph), exact, strict=True)
        )
        errors.append((strayed / norm) ** 0.5)
    return errors
