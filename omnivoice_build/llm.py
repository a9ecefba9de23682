"""The Qwen3 body as ``llm_decoder.onnx``: onnxruntime-genai's builder, then made bidirectional.

1. Write the checkpoint's ``llm.*`` weights and ``llm_config`` as a plain ``Qwen3ForCausalLM``
   folder, which the builder reads.
2. Run the builder with ``exclude_embeds`` (the embeddings live in ``audio_embeddings_encoder``)
   and ``exclude_lm_head`` (the output is the final-normed ``hidden_states``).
3. Set ``causal=0`` on every GroupQueryAttention node and check, with a real session, that the
   first position now sees the last one.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from omnivoice_rt.artifacts.bidirectional import check_bidirectional, make_bidirectional

logger = logging.getLogger(__name__)

# (builder precision, builder execution provider) per LLM precision.
BUILDER_TARGETS = {
    "int4": ("int4", "cpu"),
    "int8": ("int8", "cpu"),
    "fp32": ("fp32", "cpu"),
    "fp16_cuda": ("fp16", "cuda"),
}
LLM_FILES = ("llm_decoder.onnx", "llm_decoder.onnx.data", "genai_config.json")


def write_qwen3_folder(checkpoint: Path, out: Path) -> None:
    """Write ``checkpoint``'s LLM as a Hugging Face ``Qwen3ForCausalLM`` folder in ``out``."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    config = json.loads((checkpoint / "config.json").read_text())["llm_config"]
    config.update(architectures=["Qwen3ForCausalLM"], model_type="qwen3", tie_word_embeddings=True)
    config["torch_dtype"] = "float32"
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=2))
    weights = {}
    for file in sorted(checkpoint.glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as f:
            for key in f.keys():
                if key.startswith("llm."):
                    weights["model." + key[len("llm.") :]] = f.get_tensor(key).float().contiguous()
    save_file(weights, str(out / "model.safetensors"))


# The builder fuses rotary embeddings into GroupQueryAttention on the CPU, so its graph has no
# position_ids input. For every EP where it does not (DML), it emits RotaryEmbedding ops fed by a
# ``position_ids`` input; this makes it do the same on the CPU, for graphs that take position_ids.
# The builder imports its own modules as top-level ``builders``, so that is the module to patch.
_UNFUSED_ROPE_BUILDER = """
import os, runpy, sys
import onnxruntime_genai.models as models
sys.path.insert(0, os.path.dirname(models.__file__))
from builders import base
base.Model.is_fused_rope_supported = lambda self: False
sys.argv[0] = "builder"
runpy.run_module("onnxruntime_genai.models.builder", run_name="__main__")
"""


def run_builder(
    qwen_dir: Path,
    out: Path,
    precision: str,
    block_size: int,
    cache: Path,
    position_ids: bool = False,
) -> None:
    builder_precision, provider = BUILDER_TARGETS[precision]
    options = ["exclude_embeds=true", "exclude_lm_head=true", "filename=llm_decoder.onnx"]
    if builder_precision in ("int4", "int8"):
        options += [f"block_size={block_size}", "accuracy_level=4"]
    entry = (
        ["-c", _UNFUSED_ROPE_BUILDER]
        if position_ids
        else ["-m", "onnxruntime_genai.models.builder"]
    )
    cmd = [
        sys.executable,
        *entry,
        "-i",
        str(qwen_dir),
        "-o",
        str(out),
        "-p",
        builder_precision,
        "-e",
        provider,
        "-c",
        str(cache),
        "--extra_options",
        *options,
    ]
    logger.info(
        "llm: onnxruntime-genai builder, %s on %s, block size %d",
        *BUILDER_TARGETS[precision],
        block_size,
    )
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0 or not (out / "llm_decoder.onnx").is_file():
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-5:])
        raise RuntimeError(f"onnxruntime-genai's builder failed ({precision}): {tail}")


def build_llm(checkpoint: Path, profile_dir: Path, precision: str, block_size: int = 32) -> float:
    """Build the bidirectional LLM into ``profile_dir``; return the bidirectionality evidence."""
    import onnxruntime as ort

    with tempfile.TemporaryDirectory(prefix="omnivoice-llm-") as tmp:
        tmp = Path(tmp)
        write_qwen3_folder(checkpoint, tmp / "qwen3")
        run_builder(tmp / "qwen3", tmp / "built", precision, block_size, tmp / "cache")
        profile_dir.mkdir(parents=True, exist_ok=True)
        make_bidirectional(tmp / "built" / "llm_decoder.onnx", profile_dir / "llm_decoder.onnx")
        shutil.copy(tmp / "built" / "genai_config.json", profile_dir / "genai_config.json")
    if precision == "fp16_cuda":
        logger.info("llm: CUDA build, its bidirectionality is checked where a GPU runs it")
        return float("nan")
    session = ort.InferenceSession(
        str(profile_dir / "llm_decoder.onnx"), providers=["CPUExecutionProvider"]
    )
    llm_config = json.loads((checkpoint / "config.json").read_text())["llm_config"]
    head_dim = (
        llm_config.get("head_dim") or llm_config["hidden_size"] // llm_config["num_attention_heads"]
    )
    moved = check_bidirectional(session, head_dim)
    logger.info("llm: bidirectional (first position moves by %.3g when the last changes)", moved)
    return moved
