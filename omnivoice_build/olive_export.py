"""``audio_embeddings_encoder`` and ``audio_heads_decoder`` through Olive passes.

PyTorch -> ONNX with ``OnnxConversion``, then, by precision:

- ``int4`` / ``int8``: ``OnnxBlockWiseRtnQuantization`` (Gather -> GatherBlockQuantized, MatMul -> MatMulNBits,
  accuracy level 4);
- ``fp16``: ``OnnxFloatToFloat16`` with fp32 inputs and outputs kept;
- ``fp32``: conversion only.

The audio heads are never quantized to int4: int4 heads are measured elsewhere to hurt quality.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

from omnivoice_build import audio_models

logger = logging.getLogger(__name__)

SUBMODELS = {
    "audio_embeddings_encoder": ("load_encoder", audio_models.encoder_io_config),
    "audio_heads_decoder": ("load_heads", audio_models.heads_io_config),
}
# Olive prints its run history at INFO whatever the level asked for; our stage logs say enough.
logging.getLogger("olive.engine.engine").addFilter(
    lambda record: (
        "run history" not in record.getMessage() and "tabulate" not in record.getMessage()
    )
)
# Above this many bytes of weights a graph keeps them in ``<name>.onnx.data``.
EXTERNAL_DATA_BYTES = 64 << 20


def _passes(precision: str, block_size: int) -> dict:
    passes = {"conversion": {"type": "OnnxConversion", "target_opset": 17}}
    if precision in ("int4", "int8"):
        passes["quantize"] = {
            "type": "OnnxBlockWiseRtnQuantization",
            "bits": int(precision[3:]),
            "block_size": block_size,
            "accuracy_level": 4,
        }
    elif precision == "fp16":
        passes["fp16"] = {"type": "OnnxFloatToFloat16", "keep_io_types": True}
    elif precision != "fp32":
        raise ValueError(f"unknown precision {precision!r} for the audio sub-models")
    return passes


def run_olive(checkpoint: Path, name: str, precision: str, block_size: int, work: Path) -> Path:
    """Run the Olive workflow for one sub-model; return the path of its ONNX output."""
    from olive import run as olive_run

    loader, io_config = SUBMODELS[name]
    config = {
        "input_model": {
            "type": "PyTorchModel",
            "model_path": str(checkpoint),
            "model_script": audio_models.__file__,
            "model_loader": loader,
            "io_config": io_config(audio_models.read_config(checkpoint)),
        },
        "systems": {
            "local": {
                "type": "LocalSystem",
                "accelerators": [
                    {"device": "cpu", "execution_providers": ["CPUExecutionProvider"]}
                ],
            }
        },
        "passes": _passes(precision, block_size),
        "host": "local",
        "target": "local",
        "cache_dir": str(work / "cache"),
        "output_dir": str(work / "out"),
        "log_severity_level": 3,
    }
    olive_run(config)
    found = sorted((work / "out").rglob("*.onnx"))
    if not found:
        raise RuntimeError(f"Olive wrote no ONNX model for {name} ({precision})")
    return found[0]


def save_graph(src: Path, dst: Path) -> None:
    """Re-save an ONNX model as ``dst`` (weights in ``dst.data`` when large)."""
    import onnx

    model = onnx.load(str(src), load_external_data=True)
    external = model.ByteSize() > EXTERNAL_DATA_BYTES
    data = dst.parent / (dst.name + ".data")
    data.unlink(missing_ok=True)
    onnx.save_model(
        model,
        str(dst),
        save_as_external_data=external,
        all_tensors_to_one_file=True,
        location=data.name,
        size_threshold=1024,
    )


def export_submodel(
    checkpoint: Path, name: str, precision: str, out_dir: Path, block_size: int = 32
) -> Path:
    """Build ``<out_dir>/<name>.onnx`` in ``precision`` through Olive; return its path."""
    logger.info("%s: Olive, PyTorch -> ONNX -> %s", name, precision)
    with tempfile.TemporaryDirectory(prefix=f"omnivoice-{name}-") as tmp:
        onnx_path = run_olive(checkpoint, name, precision, block_size, Path(tmp))
        out_dir.mkdir(parents=True, exist_ok=True)
        save_graph(onnx_path, out_dir / f"{name}.onnx")
    return out_dir / f"{name}.onnx"
