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

logger = logging.getLogger(__name__)

MANIFEST_NAME = "omnivoice_manifest.json"
FORMAT_VERSION = 1

# Precision name -> the profile's folder, relative to the artifact root (DESIGN.md section 2).
PROFILE_DIRS = {"fp16": ".", "int4": "int4", "int8": "int8", "cuda": "cuda", "fp32": "fp32"}
MAIN_GRAPHS = ("audio_embeddings_encoder", "llm_decoder", "audio_heads_decoder")
HIGGS_GRAPHS = ("acoustic_encoder", "semantic_encoder", "quantizer_encoder", "higgs_decoder")


class ArtifactError(ValueError):
    """An artifact folder is missing, incomplete or corrupt; the message says how to fix it."""


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


EXPECTED_IO = {
    "audio_embeddings_encoder": (["input_ids", "audio_mask"], ["inputs_embeds"]),
    "llm_decoder": (["inputs_embeds", "attention_mask"], ["hidden_states"]),
    "audio_heads_decoder": (["hidden_states"], ["logits"]),
    "acoustic_encoder": (["waveform"], ["acoustic_features"]),
    "semantic_encoder": (["waveform"], ["semantic_features"]),
    "quantizer_encoder": (["acoustic_features", "semantic_features"], ["audio_codes"]),
    "higgs_decoder": (["audio_codes"], ["waveform"]),
}
# The model facts of DESIGN.md section 1, for folders without a manifest.
DEFAULT_MODEL = {
    "num_audio_codebook": 8, "audio_vocab_size": 1025, "audio_mask_id": 1024,
    "audio_codebook_weights": [8, 8, 6, 6, 4, 4, 2, 2], "sample_rate": 24000, "hop_length": 960, "frame_rate": 25,
}  # fmt: skip


def describe_unlisted_folder(root: Path) -> dict:
    """A manifest for a folder in the published layout that has none (onnx-community's repo):
    profiles from the folders that hold the three graphs, the model from ``genai_config.json``.
    Sizes and hashes are unknown, so ``files`` lists what is there without them."""
    profiles = {}
    for precision, folder in PROFILE_DIRS.items():
        base = root if folder == "." else root / folder
        if all((base / f"{g}.onnx").is_file() for g in MAIN_GRAPHS):
            prefix = "" if folder == "." else folder + "/"
            graphs = {g: {"file": f"{prefix}{g}.onnx", "inputs": [], "outputs": []} for g in MAIN_GRAPHS}
            profiles[precision] = {"dir": folder, "graphs": graphs}
    if not profiles:
        raise ArtifactError(
            f"{root} has neither {MANIFEST_NAME} nor the graphs {list(MAIN_GRAPHS)} of any precision: "
            "it is not an OmniVoice ONNX artifact folder. Build one with `python build_artifacts.py --model "
            "CHECKPOINT --output DIR` or fetch one from the Hub"
        )
    genai = next((root / p["dir"] / "genai_config.json" for p in profiles.values()
                  if (root / p["dir"] / "genai_config.json").is_file()), None)  # fmt: skip
    if genai is None:
        raise ArtifactError(f"{root} has no genai_config.json to read the LLM's shape from; re-download it")
    decoder = json.loads(genai.read_text())["model"]["decoder"]
    model = dict(DEFAULT_MODEL, hidden_size=decoder["hidden_size"], head_dim=decoder["head_size"],
                 num_hidden_layers=decoder["num_hidden_layers"], num_key_value_heads=decoder["num_key_value_heads"])  # fmt: skip
    codec = {}
    if all((root / "audio_tokenizer" / f"{g}.onnx").is_file() for g in HIGGS_GRAPHS):
        codec = {"graphs": {g: {"file": f"audio_tokenizer/{g}.onnx", "inputs": [], "outputs": []} for g in HIGGS_GRAPHS}}
    files = {p.relative_to(root).as_posix(): {} for p in root.rglob("*") if p.is_file()}
    return {
        "format_version": FORMAT_VERSION, "attention": "unknown", "model": model, "profiles": profiles,
        "audio_tokenizer": codec, "tokenizer": [f for f in ("tokenizer.json", "tokenizer_config.json") if (root / f).is_file()],
        "files": files, "unlisted": True,
    }  # fmt: skip


def load_manifest(root: str | Path) -> dict:
    """The folder's manifest, or one described from the published layout when it has none."""
    root = Path(root)
    return read_manifest(root) if (root / MANIFEST_NAME).is_file() or not root.is_dir() else describe_unlisted_folder(root)


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
        elif entry and (path.stat().st_size != entry["bytes"] or sha256_of(path) != entry["sha256"]):
            bad.append(relative)
    return bad


def profile_files(manifest: dict, precision: str) -> list[str]:
    """Every file one precision needs: its graphs (with external data), the codec, the tokenizer."""
    if precision not in manifest.get("profiles", {}):
        built = sorted(manifest.get("profiles", {}))
        raise ArtifactError(
            f"this artifact folder has no {precision!r} profile (it has {built}); build it with "
            f"`python build_artifacts.py --device {DEVICE_OF_PRECISION.get(precision, precision)}`"
        )
    graphs = list(manifest["profiles"][precision]["graphs"].values())
    graphs += list(manifest.get("audio_tokenizer", {}).get("graphs", {}).values())
    wanted = {g["file"] for g in graphs} | set(manifest.get("tokenizer", []))
    return [f for f in manifest["files"] if f in wanted or f.rsplit(".data", 1)[0] in wanted]


DEVICE_OF_PRECISION = {"int4": "cpu", "int8": "cpu_int8", "fp16": "cpu_fp16", "cuda": "gpu", "fp32": "cpu_fp32"}
