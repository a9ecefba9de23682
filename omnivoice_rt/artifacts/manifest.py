"""``omnivoice_manifest.json``: what an artifact folder holds, and the checks that it is intact.

The manifest is the contract between ``build_artifacts.py`` (which writes it) and the runtime
(which reads it), typed here as :class:`Manifest` (read with ``Manifest.from_json``, written with
``to_json``). Layout (format version 1)::

    {
      "format_version": 1,
      "attention": "bidirectional",
      "model":    {model config: hidden size, codebooks, vocab, mask id, weights, rates},
      "profiles": {"int4": {"dir": "int4", "llm": "int4", "encoder": "int4", "heads": "fp32",
                            "llm_block_size": 32,
                            "graphs": {"llm_decoder": {"file": "int4/llm_decoder.onnx",
                                                       "inputs": [...], "outputs": [...]}, ...}}},
      "audio_tokenizer": {"precision": "fp16", "graphs": {...}},
      "codec_variants":  {"fp16": {"graphs": {...}}},
      "tokenizer": ["tokenizer.json", ...],
      "files":    {"int4/llm_decoder.onnx": {"bytes": 123, "sha256": "..."}, ...},
      "build":    {"versions": {...}, "source": ...}
    }

Every path is a bare relative POSIX path, so the folder can be moved or copied anywhere. A folder
in the published layout without our manifest is described from its graphs
(:func:`describe_unlisted_folder`): the same type, with ``found`` saying what manifest it had.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass, field, fields
from pathlib import Path, PurePosixPath

from omnivoice_rt.artifacts.profiles import PROFILE_DIRS, PROFILES, folder_file
from omnivoice_rt.artifacts.signatures import CODEC_ROLES, MAIN_ROLES
from omnivoice_rt.errors import ArtifactError

__all__ = ["PROFILE_DIRS", "ArtifactError"]  # re-exported: callers import them from here too
logger = logging.getLogger(__name__)

MANIFEST_NAME = "omnivoice_manifest.json"
FORMAT_VERSION = 1
CODEC_DIR = "audio_tokenizer"
# Codec variants in subfolders of audio_tokenizer/ (the published repo has fp16/), and the
# precisions that try one before the main codec; a variant that fails to load is skipped.
CODEC_VARIANTS = {"fp16": ("fp16", "cuda")}


# ----------------------------------------------------------------------------- the types


def _bad(what: str, exc: Exception) -> ArtifactError:
    return ArtifactError(
        f"the manifest's {what} is malformed ({type(exc).__name__}: {exc}); rebuild the folder"
    )


@dataclass(frozen=True)
class ModelConfig:
    """The model's shape: the LLM's (from the checkpoint or ``genai_config.json``) and the audio
    tokens' (``docs/design.md`` section 1). The codec's true rates are measured when it loads."""

    hidden_size: int
    head_dim: int
    num_hidden_layers: int
    num_key_value_heads: int
    num_audio_codebook: int = 8
    audio_vocab_size: int = 1025
    audio_mask_id: int = 1024
    audio_codebook_weights: tuple[int, ...] = (8, 8, 6, 6, 4, 4, 2, 2)
    sample_rate: int = 24000
    hop_length: int = 960
    frame_rate: int = 25
    num_attention_heads: int | None = None
    max_position_embeddings: int | None = None  # None: unknown (a published folder may omit it)
    text_vocab_size: int | None = None
    intermediate_size: int | None = None

    @classmethod
    def from_json(cls, data: dict) -> ModelConfig:
        try:
            known = {f.name for f in fields(cls)}
            values = {k: v for k, v in data.items() if k in known and v is not None}
            if "audio_codebook_weights" in values:
                values["audio_codebook_weights"] = tuple(
                    int(w) for w in values["audio_codebook_weights"]
                )
            return cls(**values)
        except (TypeError, ValueError, AttributeError) as exc:
            raise _bad("model section", exc) from exc

    def to_json(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["audio_codebook_weights"] = list(self.audio_codebook_weights)
        return out


@dataclass(frozen=True)
class GraphEntry:
    """One graph: its file (relative to the root) and, in our builds, its inputs and outputs
    (``[{"name", "dtype", "shape"}]``), which the runtime does not need: it binds by name."""

    file: str
    inputs: tuple[dict, ...] = ()
    outputs: tuple[dict, ...] = ()

    @classmethod
    def from_json(cls, data: dict) -> GraphEntry:
        return cls(
            str(data["file"]), tuple(data.get("inputs") or ()), tuple(data.get("outputs") or ())
        )

    def to_json(self) -> dict:
        out: dict = {"file": self.file}
        if self.inputs or self.outputs:
            out.update(inputs=list(self.inputs), outputs=list(self.outputs))
        return out


def _graphs_from(data: dict) -> dict[str, GraphEntry]:
    return {role: GraphEntry.from_json(spec) for role, spec in (data or {}).items()}


@dataclass(frozen=True)
class ProfileEntry:
    """One precision's three graphs in its folder, and (in our builds) how they were quantized."""

    dir: str
    graphs: dict[str, GraphEntry]
    llm: str | None = None
    encoder: str | None = None
    heads: str | None = None
    llm_block_size: int | None = None

    @classmethod
    def from_json(cls, data: dict) -> ProfileEntry:
        return cls(
            str(data.get("dir", ".")),
            _graphs_from(data.get("graphs")),
            data.get("llm"),
            data.get("encoder"),
            data.get("heads"),
            data.get("llm_block_size"),
        )

    def to_json(self) -> dict:
        out: dict = {"dir": self.dir}
        for name in ("llm", "encoder", "heads", "llm_block_size"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        out["graphs"] = {role: g.to_json() for role, g in self.graphs.items()}
        return out


@dataclass(frozen=True)
class CodecEntry:
    """The codec's four graphs; ``precision`` and ``fp32_graphs`` say how we exported them."""

    graphs: dict[str, GraphEntry] = field(default_factory=dict)
    precision: str | None = None
    fp32_graphs: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, data: dict) -> CodecEntry:
        data = data or {}
        return cls(
            _graphs_from(data.get("graphs")),
            data.get("precision"),
            tuple(data.get("fp32_graphs") or ()),
        )

    def to_json(self) -> dict:
        out: dict = {}
        if self.precision is not None:
            out.update(precision=self.precision, fp32_graphs=list(self.fp32_graphs))
        out["graphs"] = {role: g.to_json() for role, g in self.graphs.items()}
        return out


@dataclass(frozen=True)
class FileEntry:
    """A file's size and sha256; both None for a folder described without our manifest."""

    bytes: int | None = None
    sha256: str | None = None

    def to_json(self) -> dict:
        return {} if self.bytes is None else {"bytes": self.bytes, "sha256": self.sha256}


# What ``found`` says about a folder's own manifest: ours, none, another schema, not JSON.
FOUND = {
    "ours": "ours (sizes and sha256 checked on load)",
    "none": "none (described from the graphs and genai_config.json)",
    "foreign": "the publisher's (another schema, not trusted: described from the graphs and "
    "genai_config.json)",
    "malformed": "not valid JSON (described from the graphs; sizes and hashes unchecked)",
}


@dataclass(frozen=True)
class Manifest:
    """An artifact folder's contents: the model, its profiles, the codec(s), every file."""

    model: ModelConfig
    profiles: dict[str, ProfileEntry]
    audio_tokenizer: CodecEntry = field(default_factory=CodecEntry)
    codec_variants: dict[str, CodecEntry] = field(default_factory=dict)
    tokenizer: tuple[str, ...] = ()
    files: dict[str, FileEntry] = field(default_factory=dict)
    attention: str = "bidirectional"
    build: dict = field(default_factory=dict)
    found: str = "ours"  # a key of FOUND

    @property
    def described(self) -> bool:
        """True for a folder described from its graphs (no sizes or hashes to check)."""
        return self.found != "ours"

    @classmethod
    def from_json(cls, data: dict) -> Manifest:
        try:
            return cls(
                model=ModelConfig.from_json(data["model"]),
                profiles={
                    name: ProfileEntry.from_json(p) for name, p in data.get("profiles", {}).items()
                },
                audio_tokenizer=CodecEntry.from_json(data.get("audio_tokenizer")),
                codec_variants={
                    name: CodecEntry.from_json(c)
                    for name, c in (data.get("codec_variants") or {}).items()
                },
                tokenizer=tuple(data.get("tokenizer") or ()),
                files={
                    path: FileEntry(entry.get("bytes"), entry.get("sha256"))
                    for path, entry in data.get("files", {}).items()
                },
                attention=str(data.get("attention", "unknown")),
                build=dict(data.get("build") or {}),
            )
        except ArtifactError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise _bad("layout", exc) from exc

    def to_json(self) -> dict:
        out: dict = {
            "format_version": FORMAT_VERSION,
            "attention": self.attention,
            "model": self.model.to_json(),
            "profiles": {name: p.to_json() for name, p in self.profiles.items()},
            "audio_tokenizer": self.audio_tokenizer.to_json(),
        }
        if self.codec_variants:
            out["codec_variants"] = {n: c.to_json() for n, c in self.codec_variants.items()}
        out.update(
            tokenizer=list(self.tokenizer),
            files={path: entry.to_json() for path, entry in self.files.items()},
        )
        if self.build:
            out["build"] = self.build
        return out

    def profile(self, precision: str) -> ProfileEntry:
        """The profile of ``precision``; ``ArtifactError`` naming what the folder has instead."""
        if precision not in self.profiles:
            built = sorted(self.profiles)
            device = PROFILES[precision].device if precision in PROFILES else precision
            raise ArtifactError(
                f"this artifact folder has no {precision!r} profile (it has {built}); build it "
                f"with `python build_artifacts.py --device {device}`"
            )
        return self.profiles[precision]

    def codec_candidates(self, precision: str) -> list[tuple[str, CodecEntry]]:
        """The codecs to try for ``precision``, in order: its preferred variants, then the main."""
        chosen = [
            (f"{CODEC_DIR}/{name}", self.codec_variants[name])
            for name, users in CODEC_VARIANTS.items()
            if precision in users and name in self.codec_variants
        ]
        main = self.audio_tokenizer
        return chosen + ([(CODEC_DIR, main)] if main.graphs else [])

    def files_of(self, precision: str) -> list[str]:
        """Every file one precision needs: its graphs (with external data), the codec(s), the
        tokenizer."""
        graphs = list(self.profile(precision).graphs.values())
        for _, codec in self.codec_candidates(precision):
            graphs += list(codec.graphs.values())
        wanted = {g.file for g in graphs} | set(self.tokenizer)
        return [f for f in self.files if f in wanted or f.rsplit(".data", 1)[0] in wanted]


# ----------------------------------------------------------------------------- reading


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


def read_manifest(root: str | Path) -> Manifest:
    """Load and sanity-check the manifest of the artifact folder ``root``."""
    root = Path(root)
    path = root / MANIFEST_NAME
    if not path.is_file():
        raise ArtifactError(
            f"{root} has no {MANIFEST_NAME}: it is not an OmniVoice ONNX artifact folder. "
            "Build one with `python build_artifacts.py --model CHECKPOINT --output DIR`."
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ArtifactError(f"{path} is not valid JSON ({exc}); rebuild or re-download it") from exc
    version = data.get("format_version") if isinstance(data, dict) else None
    if version != FORMAT_VERSION:
        raise ArtifactError(
            f"{path} has format version {version!r}; this runtime reads version {FORMAT_VERSION}. "
            "Rebuild the artifacts with this version's build_artifacts.py."
        )
    manifest = Manifest.from_json(data)
    for relative in manifest.files:
        safe_join(root, relative)
    return manifest


def write_manifest(root: Path, manifest: Manifest) -> None:
    """Write ``manifest`` into ``root`` atomically (a reader never sees half a file)."""
    path = root / MANIFEST_NAME
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(manifest.to_json(), indent=2, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, path)


# ----------------------------------------------------------------------------- described folders
# A folder without our manifest takes ModelConfig's audio defaults (the model facts of
# docs/design.md section 1); the hop and frame rate are measured from the codec when it loads
# (see codec.py), never read from a foreign file.


def _graphs_in(root: Path, folder: str, roles) -> dict[str, GraphEntry] | None:
    """Each role's graph in ``folder`` when it holds all of them, else None."""
    files = {role: folder_file(folder, f"{role}.onnx") for role in roles}
    if all((root / file).is_file() for file in files.values()):
        return {role: GraphEntry(file) for role, file in files.items()}
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


def describe_unlisted_folder(root: Path, found: str = "none") -> Manifest:
    """A manifest for a folder in the published layout without ours (onnx-community's repo):
    profiles from the folders that hold the three graphs, the model from ``genai_config.json``,
    the codec from ``audio_tokenizer/`` and its variants. Sizes and hashes are unknown, so
    ``files`` lists what is there without them. ``found`` says what manifest the folder had."""
    profiles = {}
    # The root's profile first (as the published repo lists it), then the table's order.
    for precision, folder in sorted(PROFILE_DIRS.items(), key=lambda item: item[1] != "."):
        graphs = _graphs_in(root, folder, MAIN_ROLES)
        if graphs:
            profiles[precision] = ProfileEntry(folder, graphs)
    if not profiles:
        raise ArtifactError(
            f"{root} has neither our {MANIFEST_NAME} nor the graphs {list(MAIN_ROLES)} of any "
            "precision: it is not an OmniVoice ONNX artifact folder. Build one with `python "
            "build_artifacts.py --model CHECKPOINT --output DIR` or fetch one from the Hub"
        )
    configs = [root / folder_file(p.dir, "genai_config.json") for p in profiles.values()]
    genai = next((path for path in configs if path.is_file()), None)
    if genai is None:
        raise ArtifactError(
            f"{root} has no genai_config.json to read the LLM's shape from; re-download it"
        )
    variants = {
        name: CodecEntry(graphs)
        for name in CODEC_VARIANTS
        if (graphs := _graphs_in(root, f"{CODEC_DIR}/{name}", CODEC_ROLES))
    }
    return Manifest(
        model=ModelConfig.from_json(_genai_model(genai)),
        profiles=profiles,
        audio_tokenizer=CodecEntry(_graphs_in(root, CODEC_DIR, CODEC_ROLES) or {}),
        codec_variants=variants,
        tokenizer=tuple(
            f for f in ("tokenizer.json", "tokenizer_config.json") if (root / f).is_file()
        ),
        files={p.relative_to(root).as_posix(): FileEntry() for p in root.rglob("*") if p.is_file()},
        attention="unknown",
        found=found,
    )


def load_manifest(root: str | Path) -> Manifest:
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
        return describe_unlisted_folder(root, found="malformed")
    if not isinstance(found, dict) or "format_version" not in found:
        logger.info(
            "%s has another schema (the publisher's); describing the folder from its graphs", path
        )
        return describe_unlisted_folder(root, found="foreign")
    return read_manifest(root)


def verify_files(root: str | Path, manifest: Manifest, files: list[str] | None = None) -> list[str]:
    """Check sizes and hashes; return the relative paths that are missing or differ."""
    root = Path(root)
    bad = []
    for relative in files if files is not None else list(manifest.files):
        entry = manifest.files.get(relative)
        path = safe_join(root, relative)
        if entry is None or not path.is_file():
            bad.append(relative)
        elif entry.bytes is not None and (
            path.stat().st_size != entry.bytes or sha256_of(path) != entry.sha256
        ):
            bad.append(relative)
    return bad
