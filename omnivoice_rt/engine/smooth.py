"""SmoothQuant for the integer GEMM: the activations' outlier channels moved into the weights.

A few channels of an LLM's activations can be far larger than the rest on every token; rounding a
token's activations with one scale then leaves the others few steps (docs/performance.md
"Rounding the activations": four channels x50 took ``qgemm-row`` from 7.6% to 47.5% hidden-state
error). SmoothQuant (Xiao et al., 2023) divides channel j of a product's input by ``s_j`` and
multiplies row j of its weights by ``s_j``: the same product, flatter activations. Where the input
is an RMSNorm's output (q, k, v; gate and up), the division is folded exactly into the norm's
weight, so it costs nothing when the model runs (:func:`smoothable`).

``s_j = max|x_j| ** ALPHA / max|w_j| ** (1 - ALPHA)`` (:func:`factors`), with ``max|x_j|`` measured
on the model's own activations (:func:`peaks`): the prompts of ``CALIBRATION``'s sentences, as the
first unmasking step sees them (every target code a mask) and with random codes in their place,
run once through the source graph when the rewritten graph is made, and kept in it.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import numpy as np

logger = logging.getLogger(__name__)

ALPHA = 0.5  # how much of an outlier moves into the weights (SmoothQuant's migration strength)
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
TARGET_FRAMES = 60


def norm_weight(node) -> str:
    """The name of an RMSNorm node's (``NORMS``) weight input."""
    return node.input[2 if node.op_type == "SkipSimplifiedLayerNormalization" else 1]


def smoothable(model, is_product) -> dict[str, tuple[str, list]]:
    """``{tensor: (norm weight, products)}``: every RMSNorm output whose readers are all products
    to be rewritten (``is_product(node)``), with the norm's own weight initializer (shared with
    no other node)."""
    initializers = {t.name for t in model.graph.initializer}
    readers: dict[str, list] = {}
    for node in model.graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    found = {}
    for node in model.graph.node:
        if node.op_type not in NORMS or not node.output:
            continue
        weight = norm_weight(node)
        out = node.output[0]
        users = readers.get(out, [])
        if (
            weight in initializers
            and len(readers.get(weight, [])) == 1
            and users
            and all(is_product(user) and user.input[0] == out for user in users)
        ):
            found[out] = (weight, users)
    return found


def factors(peak: np.ndarray, weight_peak: np.ndarray) -> np.ndarray:
    """SmoothQuant's ``s`` for activations whose channels peak at ``peak`` and weights whose
    rows peak at ``weight_peak``; 1 where either is zero."""
    peak = np.asarray(peak, dtype=np.float64)
    weight_peak = np.asarray(weight_peak, dtype=np.float64)
    s = np.ones_like(peak)
    live = (peak > 0) & (weight_peak > 0)
    s[live] = peak[live] ** ALPHA / weight_peak[live] ** (1 - ALPHA)
    return np.clip(s, 1e-4, 1e4).astype(np.float32)


def calibration_embeddings(root: Path, manifest, precision: str, overrides: dict) -> list:
    """The LLM's input for ``CALIBRATION``'s prompts: each masked, and with random codes."""
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
    for language, text in CALIBRATION:
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


def peaks(
    source: Path, model, tensors: list[str], embeddings: list, head_dim: int, work: Path
) -> dict:
    """``{tensor: max |x_j| per channel}`` of the graph ``source``'s ``tensors`` over every token of
    ``embeddings`` (the LLM's inputs): ``model`` (``source`` read without its weights; it gains
    them as outputs) saved in the folder ``work`` beside its weights (hard links where the file
    system allows, else copies: ONNX Runtime reads no weights through a link out of the graph's
    folder), removed afterwards."""
    import onnx
    import onnxruntime as ort
    from onnx import helper

    from omnivoice_rt.artifacts.bidirectional import llm_feeds

    embeds = next(i for i in model.graph.input if i.name == "inputs_embeds")
    kind = embeds.type.tensor_type.elem_type  # the norms' outputs are of the activations' type
    for name in tensors:
        model.graph.output.append(helper.make_tensor_value_info(name, kind, None))
    locations = {
        entry.value
        for tensor in model.graph.initializer
        for entry in tensor.external_data
        if entry.key == "location"
    }
    found: dict[str, np.ndarray] = {}
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
            for name, value in zip(tensors, session.run(tensors, feeds), strict=True):
                peak = np.abs(value.astype(np.float32)).reshape(-1, value.shape[-1]).max(axis=0)
                found[name] = np.maximum(found.get(name, peak), peak)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    logger.info("measured the peaks of %d activations on %d prompts", len(found), len(embeddings))
    return found
