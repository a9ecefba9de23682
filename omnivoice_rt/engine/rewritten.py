"""The integer GEMM's graphs a load makes once and keeps: the LLM measured, smoothed, rewritten
and judged, beside the repaired LLM.

    graphs = integer_graphs(root, manifest, "int4", overrides, "qgemm-row")  # {role: path}

For each graph of the profile that the rewrite takes (the LLM; any other with MatMulNBits):
:func:`calibrate` runs the source LLM on the shipped sentences to measure its products' inputs
(:mod:`omnivoice_rt.engine.smooth`), ``qgemm.rewrite_file`` writes the smoothed rewrite, and
:func:`judge_smoothing` keeps it only if it rounds held-out prompts closer to the source graph
than the plain rewrite does. The folder is made once per source graph, rewrite version, rounding
and CPU weight levels (:mod:`omnivoice_rt.artifacts.derived`), and every later load takes it.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

from omnivoice_rt.engine import qgemm

logger = logging.getLogger(__name__)

# Beside a smoothed rewrite: its error and the plain one's, and which was kept (judge_smoothing).
SMOOTHING = "smoothing.json"


def smoothing() -> bool:
    """Whether the LLM's rewrite smooths its activations (:mod:`omnivoice_rt.engine.smooth`):
    ``OMNIVOICE_SMOOTH`` 1 (the default) or 0."""
    value = os.environ.get("OMNIVOICE_SMOOTH", "1").strip()
    if value not in ("0", "1"):
        raise ValueError(f"OMNIVOICE_SMOOTH={value!r}: use 1 (smooth the activations) or 0 (not)")
    return value == "1"


def integer_graphs(root: Path, manifest, precision: str, overrides: dict, kernel: str) -> dict:
    """``{role: rewritten graph}`` for ``kernel`` (``qgemm`` or ``qgemm-row``): the LLM, and any
    other graph of the profile with MatMulNBits (the published int4 heads), each rewritten from
    the graph that would load (the repaired LLM where there is one), the LLM's activations
    smoothed where that was judged better (:func:`smoothing`, :func:`judge_smoothing`: a
    ``-smooth`` folder may hold the plain rewrite), made at the first load and kept beside the
    repaired LLM (:mod:`omnivoice_rt.artifacts.derived`). ``RewriteError`` when a graph cannot be
    rewritten, ``ArtifactError`` when it cannot be written."""
    from omnivoice_rt.artifacts.derived import derived, source_key
    from omnivoice_rt.artifacts.hub import repair_storage
    from omnivoice_rt.engine.kernels import KERNELS, nbits
    from omnivoice_rt.engine.sessions import graph_path

    rounding = KERNELS[kernel].rounding
    smooth = smoothing()
    rewritten = {}
    for role in manifest.profile(precision).graphs:
        source = graph_path(root, manifest, precision, role, overrides)
        if role != "llm_decoder" and nbits(str(source)) is None:
            continue
        smoothed = smooth and role == "llm_decoder"

        def make(into: Path, source=source, smoothed=smoothed) -> None:
            try:
                measured = (
                    calibrate(root, manifest, precision, overrides, source, into)
                    if smoothed
                    else None
                )
                qgemm.rewrite_file(source, into / source.name, rounding, measured)
                if measured:
                    judge_smoothing(root, manifest, precision, overrides, source, into, rounding)
            except (qgemm.RewriteError, OSError):
                raise
            except Exception as exc:  # onnx, protobuf and onnxruntime raise their own types
                raise qgemm.RewriteError(f"{source.name} could not be rewritten ({exc})") from exc

        levels = qgemm.weight_levels()
        key = source_key(
            source, f"qgemm {qgemm.VERSION} {rounding} smooth {int(smoothed)} w{levels}"
        )
        name = f"{kernel}{'-smooth' * smoothed}-{precision}-{role}"
        folder = derived(repair_storage(root), name, key, make, f"the {kernel} {role} graph")
        rewritten[role] = folder / source.name
    return rewritten


def judge_smoothing(
    root: Path, manifest, precision: str, overrides: dict, source: Path, into: Path, rounding: str
) -> None:
    """Keep the smoothed rewrite of ``source`` in ``into`` only if it rounds the LLM's hidden
    states on prompts the calibration has not seen (``smooth.HELD_OUT``) closer to ``source``'s
    than the plain rewrite does; else put the plain one in its place. Each site's choice is
    judged alone on calibration's rows, and those choices can compound into a worse model
    (docs/performance.md "Smoothing with 7-bit weights"). The errors go to
    ``into/SMOOTHING``."""
    from omnivoice_rt.engine.smooth import HELD_OUT, calibration_embeddings, hidden_errors

    plain = into / "plain"
    plain.mkdir()
    try:
        qgemm.rewrite_file(source, plain / source.name, rounding)
        embeddings = calibration_embeddings(root, manifest, precision, overrides, HELD_OUT)
        smoothed, unsmoothed = hidden_errors(
            source, [into / source.name, plain / source.name], embeddings, manifest.model.head_dim
        )
        kept = smoothed < unsmoothed
        if not kept:
            for made in plain.iterdir():
                os.replace(made, into / made.name)
        record = {"smoothed": smoothed, "plain": unsmoothed, "kept": kept}
        (into / SMOOTHING).write_text(json.dumps(record, indent=1))
        logger.info(
            "smoothing %s: hidden-state error on held-out prompts %.4f smoothed, %.4f plain",
            "kept" if kept else "dropped",
            smoothed,
            unsmoothed,
        )
    finally:
        shutil.rmtree(plain, ignore_errors=True)


def calibrate(
    root: Path, manifest, precision: str, overrides: dict, source: Path, work: Path
) -> dict:
    """The LLM ``source``'s smoothable activations on the calibration prompts (peaks, samples), its
    copy made in the folder ``work``."""
    import onnx

    from omnivoice_rt.engine.smooth import activations, calibration_embeddings, sites

    graph = onnx.load(str(source), load_external_data=False)
    initializers = {t.name: t for t in graph.graph.initializer}
    tensors = [
        site.tensor for site in sites(graph, lambda node: qgemm.is_product(node, initializers))
    ]
    if not tensors:
        return {}
    embeddings = calibration_embeddings(root, manifest, precision, overrides)
    return activations(source, graph, tensors, embeddings, manifest.model.head_dim, work)
