"""``omnivoice_manifest.json``: what an artifact folder holds, and the checks that it is intact.

The manifest is the contract between ``build_artifacts.py`` (which writes it) and the runtime
(which reads it). Layout (format version 1)::

    {
      "format_version": 1,
      "attention": "bidirectional",
      "model":    {model config: hidden size, codebooks, vocab, mask id, weights, rates},
      "profiles": {"int4": {"dir": "int4", "llm": "int4", "audio": "int4", "heads": "fp32",
                            "graphs": {"llm_decoder": {"file": "int4/llm_decoder.onnx",
                                                       "inputs": [...], "outputs": [...]}, ...}}},
      "audio_tokenizer": {"precision": "fp16", "graphs": {...}},
      "tokenizer": ["tokenizer.json", ...],
      "files":    {"int4/llm_decoder.onnx": {"bytes": 123, "sha256": "..."}, ...},
      "build":    {"versions": {...}, "device": ...}
    }

Every path is a bare relative POSIX path, so the folder can be moved or copied anywhere.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path, PurePosixPath

from omnivoice_rt.errors import ArtifactError
from omnivoice_rt.profiles import PROFILE_DIRS, PROFILES
from omnivoice_rt.signatures import CODEC_ROLES, MAIN_ROLES

__all__ = ["PROFILE_DIRS", "ArtifactError"]  # re-exported: callers import them from here too
logger = logging.getLogger(__name__)

MANIFEST_NAME = "omnivoice_manifest.json"
FORMAT_VERSION = 1


def sha256_of(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def safe_join(root: Path, relative: str) -> Path:
    """``root / relative``, refusing absolute paths and paths that climb out of ``root``."""
    pure = PurePosixPath(relative)
    if pure.is_absolute() or ".." in pure.parts or "\\" in relative:
        raise ArtifactError(f"manifest path {relative!r} escapes the artifact folder {root}")
    return root.joinpath(*pure.parts)


def read_manifest(root: str | Path) -> dict:
    """Load and sanity-check the manifest of the artifact folder ``root``."""
    root = Path(root)
    path = root / MANIFEST_NAME
    if not path.is_file():
        raise ArtifactError(
            f"{root} has no {MANIFEST_NAME}: it is not an OmniVoice ONNX artifact folder. "
            "Build one with `python build_artifacts.py --model CHECKPOINT --output DIR`."
        )
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ArtifactError(f"{path} is not valid JSON ({exc}); rebuild or re-download it") from exc
    version = manifest.get("format_version")
    if version != FORMAT_VERSION:
        raise ArtifactError(
            f"{path} has format version {version!r}; this runtime reads version {FORMAT_VERSION}. "
            "Rebuild the artifacts with this version's build_artifacts.py."
        )
    for relative in manifest.get("files", {}):
        safe_join(root, relative)
    return manifest


# The model facts of docs/design.md section 1, for folders without our manifest. The hop and frame
# rate are measured from the codec when it loads (see codec.py), never read from a foreign file.
DEFAULT_MODEL = {
    "num_audio_codebook": 8,
    "audio_vocab_size": 1025,
    "audio_mask_id": 1024,
    "audio_codebook_weights": [8, 8, 6, 6, 4, 4, 2, 2],
    "sample_rate": 24000,
    "hop_length": 960,
    "frame_rate": 25,
}
CODEC_DIR = "audio_tokenizer"
# Codec variants in subfolders of audio_tokenizer/ (the published repo has fp16/), and the
# precisions that try one before the main codec; a variant that fails to load is skipped.
CODEC_VARIANTS = {"fp16": ("fp16", "cuda")}


def _graphs_in(root: Path, folder: str, roles) -> dict | None:
    """``{role: {"file": ...}}`` when ``folder`` holds every role's graph, else None."""
    prefix = "" if folder in (".", "") else folder + "/"
    if all((root / f"{prefix}{role}.onnx").is_file() for role in roles):
        return {role: {"file": f"{prefix}{role}.onnx"} for role in roles}
    return None


def _genai_model(path: Path) -> dict:
    """The LLM's shape from onnxruntime-genai's ``genai_config.json``."""
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
        decoder = config["model"]["decoder"]
        return {
            "hidden_size": int(decoder["hidden_size"]),
            "head_dim": int(decoder["head_size"]),
            "num_hidden_layers": int(decoder["num_hidden_layers"]),
            "num_key_value_heads": int(decoder["num_key_value_heads"]),
            "num_attention_heads": int(decoder.get("num_attention_heads") or 0) or None,
            "max_position_embeddings": int(config["model"].get("context_length") or 0) or None,
            "text_vocab_size": int(config["model"].get("vocab_size") or 0) or None,
        }
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        raise ArtifactError(
            f"{path} is not a readable onnxruntime-genai config ({type(exc).__name__}: {exc}); "
            "re-download the folder"
        ) from exc


def describe_unlisted_folder(root: Path, note: str = "none") -> dict:
    """A manifest for a folder in the published layout without ours (onnx-community's repo):
    profiles from the folders that hold the three graphs, the model from ``genai_config.json``,
    the codec from ``audio_tokenizer/`` and its variants. Sizes and hashes are unknown, so
    ``files`` lists what is there without them. ``note`` says what manifest the folder had."""
    profiles = {}
    # The root's profile first (as the published repo lists it), then the table's order.
    for precision, folder in sorted(PROFILE_DIRS.items(), key=lambda item: item[1] != "."):
        graphs = _graphs_in(root, folder, MAIN_ROLES)
        if graphs:
            profiles[precision] = {"dir": folder, "graphs": graphs}
    if not profiles:
        raise ArtifactError(
            f"{root} has neither our {MANIFEST_NAME} nor the graphs {list(MAIN_ROLES)} of any precision: "
            "it is not an OmniVoice ONNX artifact folder. Build one with `python build_artifacts.py --model "
            "CHECKPOINT --output DIR` or fetch one from the Hub"
        )
    genai = next(
        (
            root / p["dir"] / "genai_config.json"
            for p in profiles.values()
            if (root / p["dir"] / "genai_config.json").is_file()
        ),
        None,
    )
    if genai is None:
        raise ArtifactError(
            f"{root} has no genai_config.json to read the LLM's shape from; re-download it"
        )
    codec = {"graphs": _graphs_in(root, CODEC_DIR, CODEC_ROLES) or {}}
    variants = {
        name: {"graphs": graphs}
        for name in CODEC_VARIANTS
        if (graphs := _graphs_in(root, f"{CODEC_DIR}/{name}", CODEC_ROLES))
    }
    files = {p.relative_to(root).as_posix(): {} for p in root.rglob("*") if p.is_file()}
    return {
        "format_version": FORMAT_VERSION,
        "attention": "unknown",
        "model": {**DEFAULT_MODEL, **_genai_model(genai)},
        "profiles": profiles,
        "audio_tokenizer": codec,
        "codec_variants": variants,
        "tokenizer": [
            f for f in ("tokenizer.json", "tokenizer_config.json") if (root / f).is_file()
        ],
        "files": files,
        "unlisted": True,
        "found_manifest": note,
    }


def load_manifest(root: str | Path) -> dict:
    """The folder's manifest: ours when it has one, else one described from the published layout.

    A manifest of another schema (the publisher's: no ``format_version``) or one that is not valid
    JSON never makes loading fail: the folder is described from its graphs instead."""
    root = Path(root)
    path = root / MANIFEST_NAME
    if not root.is_dir():
        return read_manifest(root)  # says the folder is missing
    if not path.is_file():
        return describe_unlisted_folder(root)
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        logger.warning(
            "%s is not valid JSON (%s); describing the folder from its graphs instead, without "
            "size and hash checks. Re-download or rebuild it to restore them.",
            path,
            exc,
        )
        return describe_unlisted_folder(root, note="malformed")
    if not isinstance(found, dict) or "format_version" not in found:
        logger.info(
            "%s has another schema (the publisher's); describing the folder from its graphs", path
        )
        return describe_unlisted_folder(root, note="foreign")
    return read_manifest(root)


def codec_candidates(manifest: dict, precision: str) -> list[tuple[str, dict]]:
    """The codecs to try for ``precision``, in order: its preferred variants, then the main one."""
    variants = manifest.get("codec_variants", {})
    chosen = [
        (f"{CODEC_DIR}/{name}", variants[name])
        for name, users in CODEC_VARIANTS.items()
        if precision in users and name in variants
    ]
    main = manifest.get("audio_tokenizer", {})
    return chosen + ([(CODEC_DIR, main)] if main.get("graphs") else [])


def verify_files(root: str | Path, manifest: dict, files: list[str] | None = None) -> list[str]:
    """Check sizes and hashes; return the relative paths that are missing or differ."""
    root = Path(root)
    expected = manifest.get("files", {})
    bad = []
    for relative in files if files is not None else list(expected):
        entry = expected.get(relative)
        path = safe_join(root, relative)
        if entry is None or not path.is_file():
            bad.append(relative)
        elif entry and (
            path.stat().st_size != entry["bytes"] or sha256_of(path) != entry["sha256"]
        ):
            bad.append(relative)
    return bad


def profile_files(manifest: dict, precision: str) -> list[str]:
    """Every file one precision needs: its graphs (with external data), the codec, the tokenizer."""
    if precision not in manifest.get("profiles", {}):
        built = sorted(manifest.get("profiles", {}))
        raise ArtifactError(
            f"this artifact folder has no {precision!r} profile (it has {built}); build it with "
            f"`python build_artifacts.py --device {PROFILES[precision].device if precision in PROFILES else precision}`"
        )
    graphs = list(manifest["profiles"][precision]["graphs"].values())
    for _, codec in codec_candidates(manifest, precision):
        graphs += list(codec["graphs"].values())
    wanted = {g["file"] for g in graphs} | set(manifest.get("tokenizer", []))
    return [f for f in manifest["files"] if f in wanted or f.rsplit(".data", 1)[0] in wanted]
