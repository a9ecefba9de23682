"""Build the OmniVoice ONNX artifact folder from an OmniVoice checkpoint.

    python build_artifacts.py --model CHECKPOINT_DIR_OR_HUB_ID --output DIR --device cpu
    omnivoice-onnx-build --model ... (installed with the ``build`` extra: the same command)

Devices (profiles; see docs/design.md section 2, one folder each inside DIR):

    cpu        int4/   int4 encoder, int4 LLM (block 32, accuracy level 4), fp32 heads
    cpu_fp16   ./      fp16 encoder and heads, int4 LLM
    gpu        cuda/   fp16 encoder, LLM and heads for the CUDA execution provider
    cpu_fp32   fp32/   everything fp32: the reference the equivalence tests use
    cpu_int8   int8/   int8 encoder and LLM (block 128, accuracy level 4), fp32 heads

``--include-higgs`` adds the codec (``audio_tokenizer/``), ``--higgs-only`` builds only the codec.
Every LLM written is bidirectional and checked; ``omnivoice_manifest.json`` lists each file's
size and sha256, each graph's inputs and outputs, the model config and the tool versions.
Several builds into one DIR add up: each adds its profile to the manifest.

Needs the build requirements: ``pip install -r requirements-dev.txt`` (or the ``build`` extra).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from omnivoice_rt.artifacts.manifest import (
    FORMAT_VERSION,
    MANIFEST_NAME,
    ArtifactError,
    Manifest,
    read_manifest,
    sha256_of,
    write_manifest,
)
from omnivoice_rt.artifacts.profiles import PROFILES, Profile

logger = logging.getLogger("build_artifacts")

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
    "special_tokens_map.json",
)


@dataclass(frozen=True)
class Recipe:
    """How one profile's parts are built (which profile each ``--device`` builds, and its folder,
    are the runtime's table: ``omnivoice_rt.artifacts.profiles.PROFILES``)."""

    encoder: str  # int4 | int8 | fp16 | fp32
    heads: str  # fp16 | fp32: never int4
    llm: str  # a key of omnivoice_build.llm.BUILDER_TARGETS
    block_size: int = 32  # of the int4/int8 weights, unless --block-size says otherwise


RECIPES = {
    "int4": Recipe(encoder="int4", heads="fp32", llm="int4"),
    "fp16": Recipe(encoder="fp16", heads="fp16", llm="int4"),
    "cuda": Recipe(encoder="fp16", heads="fp16", llm="fp16_cuda"),
    "fp32": Recipe(encoder="fp32", heads="fp32", llm="fp32"),
    # Weight-only int8, block 128: about as fast as int4 block 32 with far less error.
    "int8": Recipe(encoder="int8", heads="fp32", llm="int8", block_size=128),
}
DEVICES = {profile.device: profile for profile in PROFILES.values()}  # --device -> the profile


class BuildError(Exception):
    """A failed stage: ``stage`` names it, the message says why and what to do."""

    def __init__(self, stage: str, message: str, exit_code: int = 1):
        super().__init__(f"{stage}: {message}")
        self.exit_code = exit_code


# --------------------------------------------------------------------------- inputs


def resolve_checkpoint(model: str) -> Path:
    """A local OmniVoice checkpoint folder, or a Hub id downloaded into the HF cache."""
    path = Path(model).expanduser()
    looks_like_hub_id = re.fullmatch(r"[\w.-]+/[\w.-]+", model) and not model.startswith(".")
    if not path.exists() and looks_like_hub_id:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

        try:
            path = Path(snapshot_download(model))
        except (HfHubHTTPError, LocalEntryNotFoundError, OSError) as exc:
            raise BuildError(
                "checkpoint",
                f"could not download {model!r} from the Hub ({type(exc).__name__}); "
                "check the id and your connection, or pass a local folder",
                2,
            ) from exc
    if not path.is_dir():
        raise BuildError(
            "checkpoint",
            f"{model} does not exist: pass an OmniVoice checkpoint folder or Hub id",
            2,
        )
    config_path = path / "config.json"
    try:
        config = json.loads(config_path.read_text())
    except (OSError, ValueError):
        config = {}
    if config.get("model_type") != "omnivoice" or "llm_config" not in config:
        raise BuildError(
            "checkpoint",
            f"{path} is not an OmniVoice checkpoint (no config.json with model_type 'omnivoice')",
            2,
        )
    if not list(path.glob("*.safetensors")):
        raise BuildError("checkpoint", f"{path} has no *.safetensors weights", 2)
    return path


def prepare_output(output: Path) -> None:
    try:
        output.mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=output, prefix=".write-test-")
        probe.close()
    except OSError as exc:
        raise BuildError(
            "output",
            f"cannot write to {output} ({exc.strerror or exc}); choose another --output",
            2,
        ) from exc


# --------------------------------------------------------------------------- manifest


def describe_graph(path: Path, root: Path) -> dict:
    """A graph's file and its inputs/outputs (name, element type, shape) for the manifest."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)

    def values(items):
        out = []
        for v in items:
            t = v.type.tensor_type
            dims = [d.dim_param or d.dim_value for d in t.shape.dim]
            out.append(
                {
                    "name": v.name,
                    "dtype": onnx.helper.tensor_dtype_to_np_dtype(t.elem_type).name,
                    "shape": dims,
                }
            )
        return out

    return {
        "file": path.relative_to(root).as_posix(),
        "inputs": values(model.graph.input),
        "outputs": values(model.graph.output),
    }


def model_section(checkpoint: Path) -> dict:
    config = json.loads((checkpoint / "config.json").read_text())
    llm = config["llm_config"]
    section = {
        "hidden_size": llm["hidden_size"],
        "intermediate_size": llm["intermediate_size"],
        "num_hidden_layers": llm["num_hidden_layers"],
        "num_attention_heads": llm["num_attention_heads"],
        "num_key_value_heads": llm["num_key_value_heads"],
        "max_position_embeddings": llm.get("max_position_embeddings"),
        "head_dim": llm.get("head_dim", llm["hidden_size"] // llm["num_attention_heads"]),
        "text_vocab_size": llm["vocab_size"],
        "num_audio_codebook": config.get("num_audio_codebook", 8),
        "audio_vocab_size": config.get("audio_vocab_size", 1025),
        "audio_mask_id": config.get("audio_mask_id", 1024),
        "audio_codebook_weights": config.get("audio_codebook_weights", [8, 8, 6, 6, 4, 4, 2, 2]),
        "sample_rate": 24000,
        "hop_length": 960,
        "frame_rate": 25,
    }
    higgs_config = checkpoint / "audio_tokenizer" / "config.json"
    if higgs_config.is_file():
        higgs = json.loads(higgs_config.read_text())
        hop = 1
        for ratio in higgs["acoustic_model_config"]["downsampling_ratios"]:
            hop *= ratio
        rate = higgs.get("sample_rate", 24000)
        section.update(sample_rate=rate, hop_length=hop, frame_rate=-(-rate // hop))
    return section


def tool_versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in (
        "torch",
        "transformers",
        "omnivoice",
        "olive-ai",
        "onnx",
        "onnxruntime",
        "onnxruntime-genai",
    ):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            pass
    return found


def update_manifest(root: Path, model: dict, update: dict, source: str) -> Manifest:
    """Merge ``update`` (the JSON sections just built) into the folder's manifest, re-list every
    file with its hash, and write it.

    ``model`` is the model section (:func:`model_section`), ``source`` what the files came from."""
    try:
        old = read_manifest(root).to_json() if (root / MANIFEST_NAME).is_file() else {}
    except ArtifactError:
        old = {}  # an older layout: start afresh, every file is re-listed below
    merged = {**old, "format_version": FORMAT_VERSION, "attention": "bidirectional", "model": model}
    merged["profiles"] = {**old.get("profiles", {}), **update.get("profiles", {})}
    for key in ("audio_tokenizer", "codec_variants"):
        if key in update:
            merged[key] = update[key]
    merged["tokenizer"] = sorted(f for f in TOKENIZER_FILES if (root / f).is_file())
    merged["build"] = {"versions": tool_versions(), "source": source}
    files = {}
    for file in sorted(p for p in root.rglob("*") if p.is_file() and p.name != MANIFEST_NAME):
        relative = file.relative_to(root).as_posix()
        if relative.startswith("."):
            continue
        files[relative] = {"bytes": file.stat().st_size, "sha256": sha256_of(file)}
    merged["files"] = files
    manifest = Manifest.from_json(merged)
    write_manifest(root, manifest)
    return manifest


# --------------------------------------------------------------------------- stages


def build_profile(checkpoint: Path, staging: Path, profile: Profile, block_size: int) -> dict:
    from omnivoice_build.llm import build_llm
    from omnivoice_build.olive_export import export_submodel

    recipe = RECIPES[profile.name]
    out_dir = staging / profile.folder
    graphs = {}
    for name, precision in (
        ("audio_embeddings_encoder", recipe.encoder),
        ("audio_heads_decoder", recipe.heads),
    ):
        started = time.perf_counter()
        try:
            graphs[name] = export_submodel(checkpoint, name, precision, out_dir, block_size)
        except Exception as exc:  # noqa: BLE001 - reported with the stage's name
            raise BuildError(name, f"{type(exc).__name__}: {exc}") from exc
        logger.info("%s: done in %.1f s", name, time.perf_counter() - started)
    started = time.perf_counter()
    try:
        build_llm(checkpoint, out_dir, recipe.llm, block_size)
    except Exception as exc:  # noqa: BLE001
        raise BuildError("llm_decoder", f"{type(exc).__name__}: {exc}") from exc
    graphs["llm_decoder"] = out_dir / "llm_decoder.onnx"
    logger.info("llm_decoder: done in %.1f s", time.perf_counter() - started)
    return {
        "dir": profile.folder,
        "encoder": recipe.encoder,
        "heads": recipe.heads,
        "llm": recipe.llm,
        "llm_block_size": block_size if recipe.llm in ("int4", "int8") else None,
        "graphs": {name: describe_graph(path, staging) for name, path in graphs.items()},
    }


def build_higgs(checkpoint: Path, staging: Path, precision: str) -> dict:
    from omnivoice_build.higgs import FP32_ONLY, GRAPHS, export_higgs

    source = checkpoint / "audio_tokenizer"
    if not source.is_dir():
        raise BuildError(
            "higgs", f"{checkpoint} has no audio_tokenizer/ folder to build the codec from", 2
        )
    started = time.perf_counter()
    try:
        export_higgs(source, staging / "audio_tokenizer", precision)
    except Exception as exc:  # noqa: BLE001
        raise BuildError("higgs", f"{type(exc).__name__}: {exc}") from exc
    logger.info("higgs: done in %.1f s", time.perf_counter() - started)
    graphs = {
        name: describe_graph(staging / "audio_tokenizer" / f"{name}.onnx", staging)
        for name in GRAPHS
    }
    return {"precision": precision, "fp32_graphs": sorted(FP32_ONLY), "graphs": graphs}


def move_into(staging: Path, output: Path) -> None:
    """Move every built file from ``staging`` into ``output``, replacing older ones."""
    for file in sorted(p for p in staging.rglob("*") if p.is_file()):
        target = output / file.relative_to(staging)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(file, target)


def build(args: argparse.Namespace) -> Manifest:
    checkpoint = resolve_checkpoint(args.model)
    output = Path(args.output).expanduser().resolve()
    prepare_output(output)
    logger.info("checkpoint: %s", checkpoint)
    update: dict = {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=output, prefix=".staging-") as staging:
        staging = Path(staging)
        if not args.higgs_only:
            profile = DEVICES[args.device]
            block_size = args.block_size or RECIPES[profile.name].block_size
            update["profiles"] = {
                profile.name: build_profile(checkpoint, staging, profile, block_size)
            }
        if args.higgs_only or args.include_higgs:
            update["audio_tokenizer"] = build_higgs(checkpoint, staging, args.higgs_precision)
        for name in TOKENIZER_FILES:
            if (checkpoint / name).is_file():
                shutil.copy(checkpoint / name, staging / name)
        move_into(staging, output)
    manifest = update_manifest(output, model_section(checkpoint), update, checkpoint.name)
    total = sum(f.bytes or 0 for f in manifest.files.values())
    logger.info(
        "done in %.1f s: %s (%.1f MB in all)", time.perf_counter() - started, output, total / 1e6
    )
    return manifest


# --------------------------------------------------------------------------- --fix-published

MODEL_CARD = """---
library_name: onnxruntime
license: apache-2.0
base_model: k2-fsa/OmniVoice
pipeline_tag: text-to-speech
tags: [onnx, text-to-speech, omnivoice]
---

# OmniVoice ONNX, fixed

`{source}`, with what keeps it from speaking fixed by `build_artifacts.py --fix-published`
(omnivoice-onnx). Profiles: {profiles}.

- The LLM's GroupQueryAttention nodes attend both ways (`causal=0`, onnxruntime >= 1.32), as
  OmniVoice's backbone does; the published graphs were causal and produced noise. Each repaired
  LLM passed a check that its first position sees the last.
- The codec: {codec}.
- `omnivoice_manifest.json` lists every file's size and sha256 and every graph's inputs and
  outputs, and says `"attention": "bidirectional"`; the runtime checks the files against it.
- Graph names and shapes are those of the published repository, so code written for it loads this.

Use it with `OMNIVOICE_REPO=<this repo> python app.py`, or
`OmniVoiceONNX.load("<this repo>", precision="int4")`.

Licences: the OmniVoice weights (k2-fsa/OmniVoice) are Apache-2.0; the Higgs Audio V2 tokenizer
(bosonai/higgs-audio-v2-tokenizer) is under Boson AI's licence.
"""


def copy_graph(src: Path, dst: Path) -> None:
    """Copy a graph and its external weights (same file names: the graph refers to them by name)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(src, dst)
    data = src.with_name(src.name + ".data")
    if data.exists():
        shutil.copy(data, dst.with_name(dst.name + ".data"))


def fix_published(source: str, output: Path) -> Manifest:
    """Turn a published snapshot (folder or Hub id) into a corrected folder ready to upload."""
    import onnxruntime as ort

    from omnivoice_rt.artifacts.bidirectional import check_bidirectional, make_bidirectional
    from omnivoice_rt.artifacts.hub import fetch, repo_of
    from omnivoice_rt.artifacts.manifest import load_manifest, safe_join
    from omnivoice_rt.engine.sessions import load_codec

    try:
        repo_id = repo_of(source)
        folder = Path(source).expanduser() if repo_id is None else fetch(repo_id, None)
        described = load_manifest(folder)
    except ArtifactError as exc:
        raise BuildError("source", str(exc), 2) from exc
    prepare_output(output)
    update: dict = {"profiles": {}, "codec_variants": {}}
    notes = []
    with tempfile.TemporaryDirectory(dir=output, prefix=".staging-") as staging:
        staging = Path(staging)
        for precision, profile in described.profiles.items():
            for role, spec in profile.graphs.items():
                src, dst = safe_join(folder, spec.file), safe_join(staging, spec.file)
                if role != "llm_decoder":
                    copy_graph(src, dst)
                    continue
                dst.parent.mkdir(parents=True, exist_ok=True)
                make_bidirectional(src, dst)
                if precision != "cuda":  # a CUDA graph is checked where a GPU runs it
                    session = ort.InferenceSession(str(dst), providers=["CPUExecutionProvider"])
                    check_bidirectional(session, described.model.head_dim)
            genai = Path(profile.dir) / "genai_config.json"
            shutil.copy(safe_join(folder, genai.as_posix()), staging / genai)
            graphs = {
                role: describe_graph(staging / spec.file, staging)
                for role, spec in profile.graphs.items()
            }
            update["profiles"][precision] = {
                "dir": profile.dir,
                "llm": "published, made bidirectional",
                "graphs": graphs,
            }
        codecs = [("audio_tokenizer", described.audio_tokenizer, None)]
        codecs += [
            (f"audio_tokenizer/{n}", spec, n) for n, spec in described.codec_variants.items()
        ]
        hop = None
        for name, spec, variant in codecs:
            try:
                codec = load_codec(
                    folder,
                    spec,
                    described.model.num_audio_codebook,
                    ["CPUExecutionProvider"],
                )
            except (ArtifactError, KeyError) as exc:
                notes.append(f"`{name}/` was left out: {exc}")
                logger.warning("leaving out the codec in %s/: %s", name, exc)
                continue
            hop = hop or codec.hop_length
            for spec_graph in spec.graphs.values():
                copy_graph(safe_join(folder, spec_graph.file), staging / spec_graph.file)
            entry = {
                "graphs": {
                    role: describe_graph(staging / g.file, staging)
                    for role, g in spec.graphs.items()
                }
            }
            if variant:
                update["codec_variants"][variant] = entry
            else:
                update["audio_tokenizer"] = entry
            notes.append(f"`{name}/` loads and decodes to finite samples (hop {codec.hop_length})")
        if "audio_tokenizer" not in update:
            raise BuildError(
                "codec",
                f"no codec of {source} loads ({'; '.join(notes)}); it cannot be fixed here",
                1,
            )
        for name in TOKENIZER_FILES:
            if (folder / name).is_file():
                shutil.copy(folder / name, staging / name)
        (staging / "README.md").write_text(
            MODEL_CARD.format(
                source=source, profiles=", ".join(update["profiles"]), codec="; ".join(notes)
            )
        )
        move_into(staging, output)
    rate = described.model.sample_rate
    model = {**described.model.to_json(), "hop_length": hop, "frame_rate": -(-rate // hop)}
    manifest = update_manifest(output, model, update, str(source))
    logger.info("fixed %s into %s (%s)", source, output, ", ".join(update["profiles"]))
    return manifest


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Build OmniVoice ONNX artifacts from an OmniVoice checkpoint.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[4:10]),
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="OmniVoice checkpoint folder or Hub id")
    source.add_argument(
        "--fix-published",
        metavar="SOURCE",
        help="instead of building: turn a published folder or Hub repo (onnx-community/OmniVoice-Onnx) "
        "into a corrected one in --output (bidirectional LLM, a working codec, our manifest, a model card)",
    )
    parser.add_argument(
        "--output", required=True, help="artifact folder to write (created if missing)"
    )
    parser.add_argument(
        "--device",
        choices=sorted(DEVICES),
        default="cpu",
        help="which profile to build (default cpu)",
    )
    parser.add_argument(
        "--include-higgs", action="store_true", help="also build the codec (audio_tokenizer/)"
    )
    parser.add_argument("--higgs-only", action="store_true", help="build only the codec")
    parser.add_argument("--higgs-precision", choices=["fp16", "fp32"], default="fp16")
    parser.add_argument(
        "--block-size",
        type=int,
        choices=[16, 32, 64, 128, 256],
        default=None,
        help="block size of the int4/int8 LLM and encoder (default 32 for int4, 128 for int8)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logs and tracebacks")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(message)s",
        datefmt="%H:%M:%S",
    )
    if not args.verbose:
        for noisy in ("olive", "onnxruntime", "transformers", "torch", "onnxscript", "httpx"):
            logging.getLogger(noisy).setLevel(logging.ERROR)
    try:
        if args.fix_published:
            fix_published(args.fix_published, Path(args.output).expanduser().resolve())
        else:
            build(args)
    except BuildError as exc:
        if args.verbose:
            logger.exception("build failed")
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("error: interrupted; the output folder keeps its previous files", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
