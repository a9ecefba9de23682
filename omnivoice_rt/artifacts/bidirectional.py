"""OmniVoice's LLM attends in both directions; these make and check that in an ONNX graph.

onnxruntime-genai's builder emits ``com.microsoft::GroupQueryAttention`` nodes, which are causal
unless ``causal=0`` (onnxruntime >= 1.32). A causal LLM is a different model and produces noise,
so every LLM we build or load must pass :func:`check_bidirectional`.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

logger = logging.getLogger(__name__)

GQA = "GroupQueryAttention"


def load_with_weights(src: Path):
    """Load an ONNX model and its external weights. Unlike ``onnx.load``, this follows the
    symbolic links of the Hugging Face cache; locations must be bare file names beside ``src``."""
    import onnx
    from onnx.external_data_helper import uses_external_data

    model = onnx.load(str(src), load_external_data=False)
    for tensor in model.graph.initializer:
        if not uses_external_data(tensor):
            continue
        info = {entry.key: entry.value for entry in tensor.external_data}
        location = info.get("location", "")
        if not location or "/" in location or "\\" in location or location.startswith(".."):
            raise ValueError(
                f"{src}: tensor {tensor.name} points outside its folder ({location!r})"
            )
        with open((src.parent / location).resolve(), "rb") as f:
            f.seek(int(info.get("offset", 0)))
            tensor.raw_data = f.read(int(info["length"])) if "length" in info else f.read()
        del tensor.external_data[:]
        tensor.data_location = onnx.TensorProto.DEFAULT
    return model


# GroupQueryAttention's optional input that gives each new position its rotary position; without
# it a call's positions continue after its past keys and values.
GQA_POSITION_INPUT = 9


def make_bidirectional(src: str | Path, dst: str | Path) -> int:
    """Copy the ONNX model ``src`` to ``dst`` with ``causal=0`` on every GQA node, and each GQA
    node's rotary positions read from a ``position_ids`` graph input (added if missing), so a call
    may run positions that are not the last ones (the frame cache, ``omnivoice_rt/engine/forward.py``).

    Weights go to ``<dst name>.data`` beside ``dst``. Returns the number of GQA nodes changed.
    """
    import onnx
    from onnx import helper

    src, dst = Path(src), Path(dst)
    model = load_with_weights(src)
    if not any(i.name == "position_ids" for i in model.graph.input):
        model.graph.input.append(
            helper.make_tensor_value_info(
                "position_ids", onnx.TensorProto.INT64, ["batch_size", "sequence_length"]
            )
        )
    changed = 0
    for node in model.graph.node:
        if node.op_type != GQA:
            continue
        kept = [a for a in node.attribute if a.name != "causal"]
        del node.attribute[:]
        node.attribute.extend(kept + [helper.make_attribute("causal", 0)])
        inputs = list(node.input) + [""] * (GQA_POSITION_INPUT + 1 - len(node.input))
        if not inputs[GQA_POSITION_INPUT]:
            inputs[GQA_POSITION_INPUT] = "position_ids"
        del node.input[:]
        node.input.extend(inputs)
        changed += 1
    if not changed:
        raise ValueError(f"{src} has no {GQA} node; it is not an onnxruntime-genai LLM build")
    data_name = dst.name + ".data"
    (dst.parent / data_name).unlink(missing_ok=True)
    onnx.save_model(
        model,
        str(dst),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=data_name,
        size_threshold=1024,
    )
    logger.info("made %d attention nodes of %s bidirectional", changed, dst.name)
    return changed


def declares_causal(path: str | Path) -> bool:
    """Whether a GroupQueryAttention node of the graph attends causally (no ``causal=0``).

    Reads the graph alone, not its weights; :func:`check_bidirectional` is the behavioural check."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    return any(
        not any(a.name == "causal" and a.i == 0 for a in node.attribute)
        for node in model.graph.node
        if node.op_type == GQA
    )


def position_table(path: str | Path) -> int | None:
    """How many positions the LLM graph's rotary cache covers (rows of ``cos_cache``), read from
    the graph without its weights; None when it has none."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    return next(
        (int(t.dims[0]) for t in model.graph.initializer if t.name == "cos_cache" and t.dims), None
    )


def rotary_tables(path: str | Path) -> tuple[np.ndarray, np.ndarray] | None:
    """The ``(cos, sin)`` tables (positions x rotary dim / 2) with which every attention node of the
    LLM graph rotates its keys, by halves (GroupQueryAttention ``do_rotary=1``,
    ``rotary_interleaved=0``, as onnxruntime-genai's builder makes them), read from the graph;
    None when its attention is not made that way."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path), load_external_data=False)
    nodes = [n for n in model.graph.node if n.op_type == "GroupQueryAttention"]
    attrs = [{a.name: onnx.helper.get_attribute_value(a) for a in n.attribute} for n in nodes]
    names = {tuple(n.input[7:9]) for n in nodes}  # (cos_cache, sin_cache) of each node
    if (
        not nodes
        or len(names) != 1
        or any(a.get("do_rotary", 0) != 1 or a.get("rotary_interleaved", 0) != 0 for a in attrs)
    ):
        return None
    ((cos_name, sin_name),) = names
    tables = {t.name: t for t in model.graph.initializer if t.name in (cos_name, sin_name)}
    if len(tables) != 2:
        return None
    folder = str(Path(path).parent)
    cos, sin = (numpy_helper.to_array(tables[name], folder) for name in (cos_name, sin_name))
    return cos.astype(np.float32), sin.astype(np.float32)


def rotate_keys(key: np.ndarray, cos: np.ndarray, sin: np.ndarray, count: int) -> np.ndarray:
    """An unrotated key (batch, heads, 1, head_dim) -> the keys (batch, heads, count, head_dim) it
    becomes at positions 0 to count - 1, halves rotated by the graph's tables."""
    half = cos.shape[1]
    k = key.astype(np.float32)
    x1, x2, rest = k[..., :half], k[..., half : 2 * half], k[..., 2 * half :]
    c, s = cos[None, None, :count], sin[None, None, :count]
    rest = np.broadcast_to(rest, (*k.shape[:2], count, rest.shape[-1]))
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s, rest], axis=-1).astype(key.dtype)


def llm_feeds(
    session,
    inputs_embeds: np.ndarray,
    attention_mask: np.ndarray | None,
    head_dim: int,
    past: dict[str, np.ndarray] | None = None,
    positions: np.ndarray | None = None,
) -> dict:
    """Feeds for one forward: the embeddings; every input whose name contains "past" from ``past``
    (keys and values of earlier positions) or empty; the mask over past and new positions (all
    ones when None); and, where the graph takes ``position_ids``, ``positions`` (default: those
    that continue after the past ones)."""
    batch, seq = inputs_embeds.shape[:2]
    past = past or {}
    past_len = next(iter(past.values())).shape[2] if past else 0
    if attention_mask is None:
        attention_mask = np.ones((batch, past_len + seq), dtype=np.int64)
    feeds = {"inputs_embeds": inputs_embeds, "attention_mask": attention_mask}
    for arg in session.get_inputs():
        if arg.name == "position_ids":
            if positions is None:
                positions = np.arange(past_len, past_len + seq, dtype=np.int64)
            feeds[arg.name] = np.broadcast_to(positions.astype(np.int64), (batch, seq)).copy()
        elif "past" in arg.name:
            dtype = np.float16 if "float16" in arg.type else np.float32
            feeds[arg.name] = past.get(
                arg.name, np.zeros((batch, arg.shape[1], 0, head_dim), dtype=dtype)
            )
    return feeds


def present_names(session) -> dict[str, str] | None:
    """``{past input: present output}`` of an onnxruntime-genai LLM (``past_key_values.N.key`` ->
    ``present.N.key``), or None when the graph does not pair them that way."""
    outputs = {o.name for o in session.get_outputs()}
    pairs = {
        a.name: a.name.replace("past_key_values", "present")
        for a in session.get_inputs()
        if "past" in a.name
    }
    return pairs if pairs and all(name in outputs for name in pairs.values()) else None


def check_bidirectional(session, head_dim: int, seq_len: int = 8, tolerance: float = 1e-4) -> float:
    """Raise ``ValueError`` unless the LLM ``session`` is bidirectional; return the evidence.

    Changes only the last position's input and measures how much the first position's output
    moves: zero for a causal model, clearly non-zero for a bidirectional one.
    """
    arg = next(a for a in session.get_inputs() if a.name == "inputs_embeds")
    hidden = arg.shape[-1]
    dtype = np.float16 if "float16" in arg.type else np.float32
    rng = np.random.default_rng(0)
    embeds = rng.standard_normal((1, seq_len, hidden)).astype(dtype)
    changed = embeds.copy()
    changed[0, -1] = rng.standard_normal(hidden).astype(dtype)
    mask = np.ones((1, seq_len), dtype=np.int64)
    first = [
        session.run(["hidden_states"], llm_feeds(session, e, mask, head_dim))[0][0, 0].astype(
            np.float32
        )
        for e in (embeds, changed)
    ]
    moved = float(np.abs(first[0] - first[1]).max())
    if moved <= tolerance:
        raise ValueError(
            "the LLM graph attends causally (the first position ignores later ones), so it would "
            "produce noise: OmniVoice needs bidirectional attention. Repair it with "
            "omnivoice_rt.artifacts.bidirectional.make_bidirectional (causal=0 on every GroupQueryAttention "
            "node, onnxruntime >= 1.32) or rebuild it with build_artifacts.py."
        )
    return moved
