"""The models a server holds: each precision's ``OmniVoiceONNX``, loaded once on first need, and
the one speech recogniser; what the source offers, and what is on disk or still to download.

Each precision has its own lock, so a request for a loaded precision never waits behind another
one's download. ``progress(fraction, desc=...)`` callbacks are Gradio's shape; any may be None.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from omnivoice_rt.artifacts.hub import available_precisions, fetch, repo_of
from omnivoice_rt.artifacts.manifest import PROFILE_DIRS, GraphEntry, load_manifest, safe_join
from omnivoice_rt.artifacts.profiles import (
    PROFILES,
    PUBLISHED,
    ROLE_NAMES,
    describe_weights,
    folder_file,
    weights_of,
)
from omnivoice_rt.audio.asr import Transcriber
from omnivoice_rt.engine.sessions import cuda_available
from omnivoice_rt.errors import ArtifactError
from omnivoice_rt.model import OmniVoiceONNX

logger = logging.getLogger(__name__)


def offered_precisions(source: str | None) -> list[str]:
    """What the server offers: the precisions the source has (its manifest, or the repo's file
    list, asked once), cuda only with CUDA; when the Hub cannot be asked, what the published repo
    has (``PUBLISHED``)."""
    try:
        found = available_precisions(source)
    except ArtifactError as exc:
        logger.warning("%s", exc)
        found = None
    found = found or [*PUBLISHED, *(["cuda"] if cuda_available() else [])]
    return [p for p in PROFILES if p in found]


def default_precision(source: str | None, offered: list[str]) -> tuple[str, str]:
    """The server's precision when none is asked for, and why: int4, the fastest, unless its heads
    are int4 (the published repo's int4/: block-128 heads, which ports that listened on the real
    weights found audibly worse) and fp16 is offered (there: fp16 heads and the same int4 LLM,
    within 3% of int4's speed; docs/performance.md "The published profiles")."""
    if "int4" not in offered:
        return offered[0], "the first precision offered"
    heads = heads_of(source, "int4")
    if "fp16" in offered and heads.startswith("int4"):
        return "fp16", f"int4's heads are {heads}; fp16's are fp16, beside the same int4 LLM"
    return "int4", "the fastest"


def heads_of(source: str | None, precision: str) -> str:
    """What ``precision``'s heads graph holds (``fp32``, ``int4 (block 128)``), read from the graph
    (of a Hub repo, the graphs are fetched without their weights); "" when that cannot be had."""
    try:
        repo = repo_of(source)
        folder = (
            Path(source).expanduser() if repo is None else fetch(repo, precision, graphs_only=True)
        )
        graphs = load_manifest(folder).profile(precision).graphs
        return weights_of(safe_join(folder, graphs["audio_heads_decoder"].file))
    except (ArtifactError, KeyError, OSError, ValueError) as exc:
        logger.debug("what the %s heads hold is unknown (%s)", precision, exc)
        return ""


class Models:
    """Each offered precision's ``OmniVoiceONNX``, loaded once and kept. ``activity`` says what a
    load under way is doing, ``failures`` why the last one failed (for the page)."""

    def __init__(
        self,
        source: str | None,
        offered: list[str] | None = None,
        default: str | None = None,
        threads: int | None = None,
    ):
        self.source, self.threads = source, threads
        self.offered = offered or list(PROFILES)
        if default in self.offered:
            self.default, self.default_reason = default, "asked for"
        else:  # not asked for (None), or not offered
            self.default, self.default_reason = default_precision(source, self.offered)
        logger.info("default precision %s (%s)", self.default, self.default_reason)
        self.loaded: dict[str, OmniVoiceONNX] = {}
        self.activity: dict[str, str] = {}
        self.failures: dict[str, str] = {}
        self.load_seconds: dict[str, float] = {}  # each precision's last load
        self.unloaded: dict[str, str] = {}  # precisions freed while idle, and why
        self._locks = {precision: threading.Lock() for precision in PROFILES}

    def get(self, precision: str, progress=None) -> OmniVoiceONNX:
        if precision not in self.offered:
            raise ValueError(
                f"Precision {precision!r} is not offered here; choose one of {', '.join(self.offered)}."
            )
        voice = self.loaded.get(precision)
        if voice is not None:
            return voice
        lock = self._locks[precision]
        if lock.locked() and progress is not None:
            progress(0.0, desc=f"Waiting for the {precision} model to load")
        with lock:
            if precision not in self.loaded:
                self._load(precision, progress)
            return self.loaded[precision]

    def _load(self, precision: str, progress) -> None:
        def report(fraction: float, message: str) -> None:
            self.activity[precision] = f"{message}: {fraction:.0%}"
            if progress is not None:
                progress(fraction, desc=message)

        again = self.unloaded.pop(precision, None)
        self.activity[precision] = f"Loading again ({again})" if again else "Loading"
        if again and progress is not None:
            progress(0.0, desc=f"Loading the {precision} model again: it was {again}")
        started = time.perf_counter()
        try:
            self.loaded[precision] = OmniVoiceONNX.load(
                self.source, precision, threads=self.threads, download_progress=report
            )
            self.failures.pop(precision, None)
        except Exception as exc:
            self.failures[precision] = str(exc)
            raise
        finally:
            self.activity.pop(precision, None)
        self.load_seconds[precision] = time.perf_counter() - started
        logger.info("loaded %s in %.1f s", precision, self.load_seconds[precision])

    def unload(self, why: str) -> list[str]:
        """Drop every loaded precision (the idle unload; ``why`` is said when it loads again);
        the precisions dropped."""
        dropped = []
        for precision in list(self.loaded):
            with self._locks[precision]:
                if self.loaded.pop(precision, None) is not None:
                    self.unloaded[precision] = why
                    dropped.append(precision)
        return dropped

    def weights(self, precision: str) -> str | None:
        """What the precision's graphs hold (``LLM int4 (block 32), encoder ..., heads ...``),
        read from the graphs loaded, or from a local folder's; None before a download."""
        voice = self.loaded.get(precision)
        if voice is not None:
            return describe_weights({role: voice.graphs[role].path for role in ROLE_NAMES})
        if not (self.source and Path(self.source).is_dir()):
            return None
        try:
            graphs = load_manifest(self.source).profile(precision).graphs
            return describe_weights(
                {role: Path(self.source) / graphs[role].file for role in ROLE_NAMES}
            )
        except (ArtifactError, KeyError, OSError, ValueError):
            return None

    def availability(self, precision: str) -> str:
        """Whether a not-yet-loaded precision is on disk, or must be downloaded first."""
        return availability(self.source, precision)


class Recogniser:
    """The speech recogniser every precision shares, loaded (and downloaded) once on first need;
    ``model`` is a folder or Hub repo (None: ``$OMNIVOICE_ASR_MODEL`` or whisper-base)."""

    def __init__(self, model: str | None = None):
        self.model = model
        self.loaded: Transcriber | None = None
        self._lock = threading.Lock()

    def get(self, progress=None) -> Transcriber:
        with self._lock:
            if self.loaded is None:
                if progress is not None:
                    progress(0.0, desc="Loading the speech recogniser")
                report = (lambda f, m: progress(f, desc=m)) if progress is not None else None
                try:
                    self.loaded = Transcriber.load(self.model or None, progress=report)
                except ArtifactError as exc:  # it could not be fetched or loaded
                    raise ValueError(str(exc)) from exc  # it says to type the transcript instead
            return self.loaded

    def unload(self) -> None:
        with self._lock:
            self.loaded = None


def graphs_size(root: Path, graphs: dict[str, GraphEntry]) -> int:
    """Bytes of the given graphs and their external weights."""
    paths = [root / spec.file for spec in graphs.values()]
    return sum(
        p.stat().st_size
        for path in paths
        for p in (path, path.with_name(path.name + ".data"))
        if p.exists()
    )


def availability(source: str | None, precision: str) -> str:
    """Whether a not-yet-loaded precision is on disk, or must be downloaded first."""
    if source and Path(source).is_dir():
        try:
            profile = load_manifest(source).profiles.get(precision)
        except ArtifactError:
            profile = None
        if profile is None:
            return f"This artifact folder has no {precision} profile."
        return f"On disk: {graphs_size(Path(source), profile.graphs) / 1e6:.0f} MB."
    from huggingface_hub import try_to_load_from_cache

    try:
        repo = repo_of(source)
    except ArtifactError as exc:
        return str(exc)
    name = folder_file(PROFILE_DIRS.get(precision, precision), "llm_decoder.onnx.data")
    cached = try_to_load_from_cache(repo, name)
    return "Downloaded." if isinstance(cached, str) else f"Not downloaded yet from {repo}."
