"""A replica of onnx-community/OmniVoice-Onnx as public code shows it, built from a checkpoint.

No copy of the published files is reachable here, so tests load a folder made to *their*
contract (docs/design.md section 2, from public scripts that load those files), never our own build
with a file removed:

    <root>/                 fp16 encoder and heads, causal int4 LLM, genai_config.json, tokenizer,
                            the publisher's omnivoice_manifest.json (another schema, hop 320)
    int4/                   int4 encoder and heads (block 128, the heads int4 too), causal int4 LLM
                            (block 32), genai_config.json, the publisher's manifest again
    audio_tokenizer/        the fp32 codec: waveform_24k, waveform_16k (resampled outside), codes (8,1,T)
    audio_tokenizer/fp16/   an fp16 codec whose semantic_encoder does not load (LayerNorm type mismatch)

The contract is written out below (:data:`CONTRACT`) apart from the runtime's own signature
table, and :func:`check_contract` holds the written graphs to it. Variants for tests:
``exact=True`` puts fp32 graphs (same names, causal LLM) in ``int4/`` so that, repaired, their
codes must equal our fp32 build's; ``position_ids=True`` gives the LLMs a ``position_ids`` input
that drives their rotary embeddings (the builder's graph for EPs without fused rotary attention).

    python -m omnivoice_build.published --model CHECKPOINT --output DIR [--exact] [--position-ids]
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import tempfile
from pathlib import Path

logger = logging.getLogger(__name__)

REPO_ID = "onnx-community/OmniVoice-Onnx"
# (name, element type, rank) of every input and output, as the public scripts feed and read them.
CONTRACT = {
    "audio_embeddings_encoder": (
        [("input_ids", "int64", 3), ("audio_mask", "bool", 2)],
        [("inputs_embeds", "float", 3)],
    ),
    "llm_decoder": (
        [("inputs_embeds", "float", 3), ("attention_mask", "int64", 2)],
        [("hidden_states", "float", 3)],
    ),
    "audio_heads_decoder": ([("hidden_states", "float", 3)], [("logits", "float", 4)]),
    "acoustic_encoder": ([("waveform_24k", "float", 3)], [("acoustic_features", "float", 3)]),
    "semantic_encoder": ([("waveform_16k", "float", 2)], [("semantic_features", "float", 3)]),
    "quantizer_encoder": (
        [("acoustic_features", "float", 3), ("semantic_features", "float", 3)],
        [("codes", "int64", 3)],
    ),
    "higgs_decoder": ([("codes", "int64", 3)], [("waveform_24k", "float", 3)]),
}
MAIN_ROLES = ("audio_embeddings_encoder", "llm_decoder", "audio_heads_decoder")
# What each profile folder holds: (encoder, heads, LLM) precisions and block size of the audio graphs.
PROFILES = {".": ("fp16", "fp16", "int4"), "int4": ("int4", "int4", "int4")}
EXACT_PROFILES = {".": ("fp16", "fp16", "int4"), "int4": ("fp32", "fp32", "fp32")}
AUDIO_BLOCK_SIZE = 128
LLM_BLOCK_SIZE = 32


def publisher_manifest(precision: str, folder: str, position_ids: bool) -> dict:
    """The publisher's ``omnivoice_manifest.json``: another schema than ours, and a wrong hop."""
    prefix = "" if folder == "." else f"{folder}/"
    llm_inputs = (
        ["inputs_embeds", "attention_mask"]
        + (["position_ids"] if position_ids else [])
        + ["past_key_values.*"]
    )
    return {
        "model_id": "k2-fsa/OmniVoice",
        "execution_provider": "CPUExecutionProvider",
        "precision": precision,
        "backbone": {
            "audio_embeddings_encoder": {
                "filename": f"{prefix}audio_embeddings_encoder.onnx",
                "inputs": ["input_ids", "audio_mask"],
                "outputs": ["inputs_embeds"],
            },
            "llm_decoder": {
                "filename": f"{prefix}llm_decoder.onnx",
                "inputs": llm_inputs,
                "outputs": ["hidden_states", "present.*"],
            },
            "audio_heads_decoder": {
                "filename": f"{prefix}audio_heads_decoder.onnx",
                "inputs": ["hidden_states"],
                "outputs": ["logits"],
            },
        },
        "higgs_tokenizer": {
            "folder": "audio_tokenizer",
            "hop_length": 320,
            "sample_rate_acoustic": 24000,
            "sample_rate_semantic": 16000,
        },
        "iterative_decoding": {
            "num_steps": 32,
            "guidance_scale": 2.0,
            "mask_token_id": 1024,
            "num_codebooks": 8,
        },
    }


def build_llm(checkpoint: Path, out_dir: Path, precision: str, position_ids: bool) -> None:
    """onnxruntime-genai's builder output as it is: causal GroupQueryAttention, no repair."""
    from omnivoice_build.llm import run_builder, write_qwen3_folder

    with tempfile.TemporaryDirectory(prefix="omnivoice-published-llm-") as tmp:
        tmp = Path(tmp)
        write_qwen3_folder(checkpoint, tmp / "qwen3")
        run_builder(
            tmp / "qwen3", tmp / "built", precision, LLM_BLOCK_SIZE, tmp / "cache", position_ids
        )
        out_dir.mkdir(parents=True, exist_ok=True)
        for name in ("llm_decoder.onnx", "llm_decoder.onnx.data", "genai_config.json"):
            shutil.copy(tmp / "built" / name, out_dir / name)


def break_layer_norm(path: Path) -> None:
    """Give the first LayerNormalization an fp32 scale beside its fp16 input: ONNX Runtime then
    refuses the graph on any execution provider, as the published fp16 semantic encoder is reported to."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path))
    initializers = {t.name: t for t in model.graph.initializer}
    for node in model.graph.node:
        scale = initializers.get(node.input[1]) if node.op_type == "LayerNormalization" else None
        if scale is not None and scale.data_type == onnx.TensorProto.FLOAT16:
            scale.CopyFrom(
                numpy_helper.from_array(numpy_helper.to_array(scale).astype("float32"), scale.name)
            )
            onnx.save(model, str(path))
            return
    raise RuntimeError(f"{path} has no fp16 LayerNormalization to break")


def build_codec(checkpoint: Path, root: Path) -> None:
    from omnivoice_build.higgs import export_higgs

    export_higgs(checkpoint / "audio_tokenizer", root / "audio_tokenizer", "fp32")
    export_higgs(checkpoint / "audio_tokenizer", root / "audio_tokenizer" / "fp16", "fp16")
    break_layer_norm(root / "audio_tokenizer" / "fp16" / "semantic_encoder.onnx")


def check_contract(root: Path, position_ids: bool = False) -> None:
    """Raise ``RuntimeError`` unless every graph of the replica has the published inputs and outputs
    (the LLM's past and present key/values aside, which are recognised by name)."""
    from omnivoice_rt.artifacts.signatures import ports_of_graph

    for role, (inputs, outputs) in CONTRACT.items():
        if role == "llm_decoder" and position_ids:
            inputs = inputs + [("position_ids", "int64", 2)]
        for folder in PROFILES if role in MAIN_ROLES else ["audio_tokenizer"]:
            path = root / folder / f"{role}.onnx"
            ins, outs = ports_of_graph(path)
            got = (
                {(p.name, p.dtype, len(p.shape)) for p in ins if "past" not in p.name},
                {(p.name, p.dtype, len(p.shape)) for p in outs if "present" not in p.name},
            )
            if got != (set(inputs), set(outputs)):
                raise RuntimeError(
                    f"{path} has inputs and outputs {got}, not the published {inputs} -> {outputs}"
                )


def build_replica(
    checkpoint: str | Path, output: str | Path, exact: bool = False, position_ids: bool = False
) -> Path:
    """Write the replica into ``output`` (see the module docstring); return its path."""
    from omnivoice_build.olive_export import export_submodel

    checkpoint, root = Path(checkpoint), Path(output)
    root.mkdir(parents=True, exist_ok=True)
    for folder, (encoder, heads, llm) in (EXACT_PROFILES if exact else PROFILES).items():
        out_dir = root / folder
        export_submodel(checkpoint, "audio_embeddings_encoder", encoder, out_dir, AUDIO_BLOCK_SIZE)
        export_submodel(checkpoint, "audio_heads_decoder", heads, out_dir, AUDIO_BLOCK_SIZE)
        build_llm(checkpoint, out_dir, llm, position_ids)
        name = "fp16" if folder == "." else "int4"
        (out_dir / "omnivoice_manifest.json").write_text(
            json.dumps(publisher_manifest(name, folder, position_ids), indent=2)
        )
    build_codec(checkpoint, root)
    for name in (
        "tokenizer.json",
        "tokenizer_config.json",
        "chat_template.jinja",
        "special_tokens_map.json",
    ):
        if (checkpoint / name).is_file():
            shutil.copy(checkpoint / name, root / name)
    check_contract(root, position_ids)
    logger.info("wrote a replica of %s into %s", REPO_ID, root)
    return root


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model", required=True, help="OmniVoice checkpoint folder (e.g. a fixture)"
    )
    parser.add_argument("--output", required=True)
    parser.add_argument(
        "--exact", action="store_true", help="fp32 graphs in int4/, for exact comparisons"
    )
    parser.add_argument("--position-ids", action="store_true", help="LLMs that take position_ids")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    build_replica(args.model, args.output, args.exact, args.position_ids)
    return 0


if __name__ == "__main__":
    sys.exit(main())
