"""Where artifacts come from: a local folder, the Hugging Face Hub, or a local build.

``resolve_artifacts(source, precision)`` returns ``(folder, manifest, overrides)`` for ``load_graphs``:

- a local folder is used as it is;
- a Hub repo (default ``onnx-community/OmniVoice-Onnx``, or ``$OMNIVOICE_REPO``; revision from
  ``$OMNIVOICE_REVISION``) is fetched into the standard HF cache, only the files the precision
  needs. ``HF_HUB_OFFLINE=1`` uses the cache alone. Files the manifest lists are checked against
  their size and sha256, and fetched again once if they differ;
- the published LLM attends causally; it is repaired (``causal=0`` on each GroupQueryAttention
  node) into a copy next to the download (for a local folder: under ``$HF_HOME/omnivoice_repaired``),
  keyed by the original's content, so the original is untouched, the copy is reused on the next
  start, and a changed original gets a new copy that replaces the old one;
- with ``$OMNIVOICE_BUILD_FROM`` naming a checkpoint (folder or Hub id), the artifacts are built
  locally with ``build_artifacts.py`` instead, when the build requirements are installed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from omnivoice_rt.artifacts.bidirectional import (
    check_bidirectional,
    declares_causal,
    make_bidirectional,
)
from omnivoice_rt.artifacts.derived import derived, source_key
from omnivoice_rt.artifacts.manifest import (
    CODEC_DIR,
    CODEC_VARIANTS,
    MANIFEST_NAME,
    PROFILE_DIRS,
    ArtifactError,
    Manifest,
    load_manifest,
    safe_join,
    verify_files,
)
from omnivoice_rt.artifacts.profiles import PROFILES
from omnivoice_rt.artifacts.signatures import MAIN_ROLES
from omnivoice_rt.engine.sessions import cuda_available, require_cuda

logger = logging.getLogger(__name__)

DEFAULT_REPO = "onnx-community/OmniVoice-Onnx"
SHARED_FILES = [
    "audio_tokenizer/*",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    MANIFEST_NAME,
]
Progress = Callable[[float, str], None]


def allow_patterns(precision: str) -> list[str]:
    if precision not in PROFILES:
        raise ValueError(f"unknown precision {precision!r}; use one of {', '.join(PROFILES)}")
    return PROFILES[precision].patterns() + SHARED_FILES


def ignore_patterns(precision: str) -> list[str]:
    """Codec variants (``audio_tokenizer/fp16/``) that ``precision`` never tries."""
    return [
        f"{CODEC_DIR}/{name}/*" for name, users in CODEC_VARIANTS.items() if precision not in users
    ]


def _progress_class(progress: Progress | None, repo_id: str):
    """A tqdm class that forwards download progress to ``progress(fraction, message)``."""
    from tqdm.auto import tqdm

    class Reporter(tqdm):
        def __init__(self, *args, **kwargs):
            kwargs["disable"] = progress is not None or kwargs.get("disable", False)
            super().__init__(*args, **kwargs)

        def update(self, n=1):
            result = super().update(n)
            if progress is not None and self.total:
                progress(min(1.0, self.n / self.total), f"Downloading {repo_id}")
            return result

    return Reporter


LOCAL_HINT = "pass a local artifact folder (see build_artifacts.py)"  # how to do without the Hub


def _explain(exc: Exception, repo_id: str, endpoint: str, hint: str = LOCAL_HINT) -> str:
    from huggingface_hub.errors import (
        EntryNotFoundError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    if isinstance(exc, RepositoryNotFoundError):
        return f"the repository {repo_id} does not exist on {endpoint} (or is private); check OMNIVOICE_REPO"
    if isinstance(exc, RevisionNotFoundError):
        return f"{repo_id} has no such revision; check OMNIVOICE_REVISION"
    response = getattr(exc, "response", None)
    url = str(response.request.url) if response is not None and response.request is not None else ""
    file = url.split("/resolve/", 1)[1].split("/", 1)[-1] if "/resolve/" in url else "a file"
    if isinstance(exc, LocalEntryNotFoundError):
        if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes"):
            return f"offline (HF_HUB_OFFLINE=1) and {repo_id} is not in the cache: connect once to download it, or {hint}"
        return (
            f"cannot reach {endpoint} to download {repo_id} and it is not in the cache: check the "
            f"connection, or {hint}"
        )
    if isinstance(exc, EntryNotFoundError):
        return f"{repo_id} has no {file} (404 from {endpoint}); the repository is incomplete or the revision wrong"
    if isinstance(exc, OSError) and not isinstance(exc, ConnectionError):
        from huggingface_hub.constants import HF_HUB_CACHE

        return (
            f"cannot write {repo_id} into the Hugging Face cache at {HF_HUB_CACHE} "
            f"({exc.strerror or exc}); set HF_HOME to a writable folder"
        )
    detail = " ".join(str(exc).split())[:300]
    return f"downloading {file} of {repo_id} failed: {type(exc).__name__}: {detail}"


def _clean_incomplete(repo_id: str) -> None:
    """Remove half-downloaded blobs, so a failed download leaves no partial file in the cache."""
    from huggingface_hub.constants import HF_HUB_CACHE

    blobs = Path(HF_HUB_CACHE) / ("models--" + repo_id.replace("/", "--")) / "blobs"
    for partial in blobs.glob("*.incomplete") if blobs.is_dir() else []:
        partial.unlink(missing_ok=True)


def download(
    repo_id: str,
    allow: list[str],
    progress: Progress | None = None,
    revision: str | None = None,
    ignore: list[str] | None = None,
    hint: str = LOCAL_HINT,
) -> Path:
    """The snapshot folder of ``repo_id`` with the files matching ``allow`` (from the cache when
    they are there; huggingface_hub checks each file's size as it downloads). A failure leaves no
    partial file and says what to do (``hint``: how to do without the Hub)."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.constants import ENDPOINT

    try:
        return Path(
            snapshot_download(
                repo_id,
                revision=revision,
                allow_patterns=allow,
                ignore_patterns=ignore,
                tqdm_class=_progress_class(progress, repo_id),
            )
        )
    except Exception as exc:  # huggingface_hub and httpx raise many kinds
        _clean_incomplete(repo_id)
        raise ArtifactError(_explain(exc, repo_id, ENDPOINT, hint)) from exc


def fetch(
    repo_id: str,
    precision: str | None,
    revision: str | None = None,
    progress: Progress | None = None,
    graphs_only: bool = False,
) -> Path:
    """Download (or find in the cache) the files of ``precision`` (None: of every precision); return
    the snapshot folder. ``graphs_only`` leaves out the external weights (``*.data``), enough to
    read the graphs' signatures, and skips the size and hash checks."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.constants import ENDPOINT

    revision = revision or os.environ.get("OMNIVOICE_REVISION") or "main"
    precisions = [precision] if precision else list(PROFILES)
    allow = sorted({pattern for p in precisions for pattern in allow_patterns(p)})
    ignore = sorted(set.intersection(*(set(ignore_patterns(p)) for p in precisions)))
    ignore += ["*.data"] if graphs_only else []
    folder = download(repo_id, allow, progress, revision, ignore)
    if graphs_only or precision is None:
        return folder
    manifest = load_manifest(folder)
    needed = manifest.files_of(precision)
    bad = verify_files(folder, manifest, needed)
    if bad:
        logger.warning(
            "%s: %d file(s) failed verification, fetching them again: %s", repo_id, len(bad), bad
        )
        try:
            for name in bad:
                hf_hub_download(repo_id, name, revision=revision, force_download=True)
        except Exception as exc:
            _clean_incomplete(repo_id)
            raise ArtifactError(_explain(exc, repo_id, ENDPOINT)) from exc
        still_bad = verify_files(folder, manifest, bad)
        if still_bad:
            raise ArtifactError(
                f"{repo_id}: {still_bad} differ from the manifest's size or sha256 after a second "
                "download; the repository's files do not match its manifest"
            )
    return folder


def repo_of(source: str | Path | None) -> str | None:
    """The Hub repo id ``source`` names (None: the default one), or None for a local folder."""
    if source is not None and Path(source).expanduser().is_dir():
        return None
    repo_id = str(source or os.environ.get("OMNIVOICE_REPO") or DEFAULT_REPO)
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", repo_id):
        raise ArtifactError(
            f"{repo_id} is neither an artifact folder nor a Hub repository id (owner/name)"
        )
    return repo_id


def remote_files(repo_id: str, revision: str | None = None) -> dict[str, int] | None:
    """``{path: bytes}`` of the repo's files (one request), or None when the Hub cannot be asked."""
    from huggingface_hub import HfApi
    from huggingface_hub.hf_api import RepoFile

    revision = revision or os.environ.get("OMNIVOICE_REVISION") or "main"
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes"):
        return None
    try:
        entries = HfApi().list_repo_tree(repo_id, revision=revision, recursive=True)
        return {e.path: e.size for e in entries if isinstance(e, RepoFile)}
    except Exception as exc:  # noqa: BLE001 - any failure means "unknown"
        logger.info("could not list %s (%s)", repo_id, exc)
        return None


def precisions_in(paths) -> list[str]:
    """The precisions whose three main graphs are among ``paths`` (relative POSIX paths)."""
    paths = set(paths)
    return [
        precision
        for precision, folder in PROFILE_DIRS.items()
        if all(
            f"{'' if folder == '.' else folder + '/'}{role}.onnx" in paths for role in MAIN_ROLES
        )
    ]


def available_precisions(source: str | Path | None) -> list[str] | None:
    """The precisions ``source`` offers (a local folder's manifest, or the repo's file list, asked
    once), cuda only where onnxruntime has CUDA; None when the Hub cannot be asked."""
    repo_id = repo_of(source)
    if repo_id is None:
        found = list(load_manifest(Path(source).expanduser()).profiles)
    else:
        files = remote_files(repo_id)
        if files is None:
            return None
        found = precisions_in(files)
    return [p for p in PROFILES if p in found and (p != "cuda" or cuda_available())]


# ----------------------------------------------------------------------------- repair


# What a repaired copy holds, in its key: a copy made by an earlier repair is made again.
# 2: with position_ids wired into every attention node (the frame cache needs them).
REPAIR_VERSION = 2


def repair_storage(folder: Path) -> Path:
    """Where the graphs derived from ``folder``'s (repaired LLMs, integer GEMM rewrites) live:
    beside the download in the HF cache, or, for a local folder (never changed), under
    ``$HF_HOME/omnivoice_repaired/<folder's key>``."""
    from huggingface_hub.constants import HF_HOME

    cache_repo = next((p for p in folder.parents if p.name.startswith("models--")), None)
    if cache_repo is not None:
        return cache_repo / "omnivoice_repaired"
    key = hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:12]
    return Path(HF_HOME) / "omnivoice_repaired" / f"{folder.name[:40]}-{key}"


def repaired_llm(folder: Path, manifest: Manifest, precision: str) -> Path | None:
    """None when the folder's LLM does not declare causal attention; otherwise a repaired copy,
    made once (:mod:`omnivoice_rt.artifacts.derived`).

    ``load_graphs`` then checks whichever graph is loaded for bidirectionality."""
    original = safe_join(folder, manifest.profile(precision).graphs["llm_decoder"].file)
    if not declares_causal(original):
        return None

    def repair(into: Path) -> None:
        make_bidirectional(original, into / "llm_decoder.onnx")
        if precision != "cuda":  # a CUDA graph is checked where a GPU runs it
            import onnxruntime as ort

            options = ort.SessionOptions()
            options.log_severity_level = 3
            session = ort.InferenceSession(
                str(into / "llm_decoder.onnx"), options, providers=["CPUExecutionProvider"]
            )
            check_bidirectional(session, manifest.model.head_dim)

    key = source_key(original, f"repair {REPAIR_VERSION}")
    made = derived(repair_storage(folder), precision, key, repair, "the repaired LLM")
    return made / "llm_decoder.onnx"


# ----------------------------------------------------------------------------- local build


def build_locally(checkpoint: str, precision: str, output: Path | None = None) -> Path:
    """Build the artifacts of ``precision`` from ``checkpoint`` with build_artifacts.py."""
    missing = [
        m
        for m in ("torch", "omnivoice", "olive", "onnxruntime_genai")
        if importlib.util.find_spec(m) is None
    ]
    if missing:
        raise ArtifactError(
            f"building from {checkpoint} needs the build requirements ({', '.join(missing)} missing): "
            "pip install 'omnivoice-onnx[build]' (or -r requirements-dev.txt), or unset "
            "OMNIVOICE_BUILD_FROM to download prebuilt artifacts"
        )
    builder = importlib.util.find_spec("omnivoice_build")
    if builder is None or builder.origin is None:
        raise ArtifactError(
            "building needs omnivoice_build: pip install 'omnivoice-onnx[build]', or run from a "
            "checkout of this project"
        )
    # the folder holding omnivoice_build, for the child wherever this process was started from
    path = os.pathsep.join(
        filter(None, [str(Path(builder.origin).parents[1]), os.environ.get("PYTHONPATH")])
    )
    from huggingface_hub.constants import HF_HOME

    name = re.sub(r"[^\w.-]+", "_", checkpoint.strip("/"))[-80:]
    output = output or Path(HF_HOME) / "omnivoice_builds" / name
    device = PROFILES[precision].device
    try:
        if precision in load_manifest(output).profiles:
            return output
    except ArtifactError:
        pass
    logger.info("building the %s artifacts from %s into %s", precision, checkpoint, output)
    cmd = [
        sys.executable,
        "-m",
        "omnivoice_build.artifacts",
        "--model",
        checkpoint,
        "--output",
        str(output),
        "--device",
        device,
        "--include-higgs",
    ]
    result = subprocess.run(
        cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": path}
    )
    if result.returncode != 0:
        raise ArtifactError(
            f"building from {checkpoint} failed: {result.stderr.strip().splitlines()[-1:]}"
        )
    return output


def resolve_artifacts(
    source: str | Path | None,
    precision: str,
    progress: Progress | None = None,
    revision: str | None = None,
) -> tuple[Path, Manifest, dict[str, Path]]:
    """``(folder, manifest, overrides)`` for ``load_graphs``: see the module docstring."""
    require_cuda(precision)  # before any download
    if os.environ.get("OMNIVOICE_BUILD_FROM") and source is None:
        folder = build_locally(os.environ["OMNIVOICE_BUILD_FROM"], precision)
        return folder, load_manifest(folder), {}
    repo_id = repo_of(source)
    folder = (
        Path(source).expanduser()
        if repo_id is None
        else fetch(repo_id, precision, revision, progress)
    )
    manifest = load_manifest(folder)
    manifest.profile(precision)  # says which profiles the folder has when it lacks this one
    repaired = repaired_llm(folder, manifest, precision)
    return folder, manifest, ({"llm_decoder": repaired} if repaired else {})
