"""What every door of the server shares: the loaded models, one line of requests, the voice-prompt
cache, the speech recogniser, and the defaults. The doors (the Gradio page and API, MCP, the
OpenAI-compatible endpoint) only translate requests and errors; the work and its limits are here.

    voices = Voices(Config("artifacts"))
    with voices.prepared("int4", {"text": "Hi.", "ref_audio": "me.wav"}) as (voice, request, reused):
        speech = voice.generate(**request)

Errors are the runtime's (``omnivoice_rt.errors``): ``ValueError`` for bad input and unusable
artifacts, ``Busy`` when the line is full; each door words them in its own protocol.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import random
import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass
from pathlib import Path

from omnivoice_rt.asr import Transcriber
from omnivoice_rt.errors import ArtifactError, Busy, Cancelled
from omnivoice_rt.hub import DEFAULT_REPO, available_precisions
from omnivoice_rt.limits import MAX_WAITING
from omnivoice_rt.manifest import PROFILE_DIRS, load_manifest
from omnivoice_rt.model import OmniVoiceONNX
from omnivoice_rt.profiles import PROFILES, PUBLISHED, ROLE_NAMES, describe_weights
from omnivoice_rt.request import DOOR_PRESET, PRESETS, GenerationSettings, Request
from omnivoice_rt.sessions import cuda_available
from omnivoice_rt.voice_prompt import VoicePrompt

logger = logging.getLogger(__name__)

# The page's settings as they start, and the API's defaults (the doors' preset, a random seed).
DEFAULTS = {
    "num_step": PRESETS[DOOR_PRESET]["num_step"],
    "guidance": GenerationSettings.guidance_scale,
    "speed": 1.0,
    "duration": 0.0,
    "seed": 0,
    "randomize_seed": True,
    "denoise": GenerationSettings.denoise,
    "postprocess": GenerationSettings.postprocess_output,
    "preset": DOOR_PRESET,
}
LEAVE_CHECK_S = 0.1  # how often a request waiting in line checks that its client is still there
# voice prompts kept, keyed by the reference's bytes, its transcript and the precision
PROMPT_CACHE_SIZE = 16


@dataclass
class Config:
    # artifact folder or Hub repo; None: $OMNIVOICE_REPO or the default repo
    source: str | None = None
    precision: str = "int4"
    threads: int | None = None
    preload: bool = False  # load the default precision in the background as the server starts
    concurrency: int = 1  # syntheses at once; loads and downloads do not take a slot
    # speech recogniser: folder or Hub repo; None: $OMNIVOICE_ASR_MODEL or whisper-base
    asr_model: str | None = None
    # requests waiting in line, all doors together; more are turned away
    max_waiting: int = MAX_WAITING


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


def resolve_seed(seed, randomize: bool) -> int:
    return random.randrange(2**31) if randomize or seed is None else int(seed)


class Line:
    """One line for every door: requests get a synthesis slot in the order they came, ``slots`` at
    a time; with ``max_waiting`` already waiting, a newcomer is turned away (:class:`Busy`). A
    finished request hands its slot straight to the first in line, so nobody overtakes."""

    def __init__(self, slots: int, max_waiting: int):
        self.slots, self.max_waiting = slots, max_waiting
        self._free = slots
        self._waiting: deque[threading.Event] = deque()
        self._lock = threading.Lock()

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    @contextlib.contextmanager
    def turn(self, on_wait=None, should_stop=None):
        """Hold a slot for the block; ``on_wait(ahead)`` is told how many are ahead when it must
        wait. A request whose ``should_stop()`` says yes while it waits (its client went away)
        leaves the line, raising :class:`Cancelled`, and the ones behind it move up."""
        with self._lock:
            if self._free and not self._waiting:
                self._free, ticket, ahead = self._free - 1, None, 0
            elif len(self._waiting) >= self.max_waiting:
                raise Busy(
                    f"The server is busy: {len(self._waiting)} requests are waiting already. Try again in a minute."
                )
            else:
                ticket, ahead = threading.Event(), len(self._waiting) + self.slots
                self._waiting.append(ticket)
        if ticket is not None:
            if on_wait is not None:
                try:
                    on_wait(ahead)
                except Exception:  # noqa: BLE001 - a report that failed must not lose the place in line
                    logger.exception("reporting a wait in line failed")
            self._wait(ticket, should_stop)
        try:
            yield
        finally:
            self._release()

    def _wait(self, ticket: threading.Event, should_stop) -> None:
        """Wait until a finished request hands over its slot (it sets the ticket), asking
        ``should_stop`` every ``LEAVE_CHECK_S``. However the wait ends without the slot (the
        client left, ``should_stop`` failed, the thread was interrupted), the ticket leaves the
        line, or the slot it was just handed goes on to the next."""
        try:
            while True:
                handed = ticket.wait(LEAVE_CHECK_S if should_stop is not None else None)
                if should_stop is not None and should_stop():  # left, or left as it was handed
                    logger.info("a request left the line: its client went away")
                    raise Cancelled("the request was abandoned while it waited in line")
                if handed:
                    return
        except BaseException:
            with self._lock:
                handed = ticket.is_set()
                if not handed:
                    self._waiting.remove(ticket)
            if handed:
                self._release()
            raise

    def _release(self) -> None:
        with self._lock:
            if self._waiting:
                self._waiting.popleft().set()
            else:
                self._free += 1


class PromptCache:
    """The last ``PROMPT_CACHE_SIZE`` references encoded (and transcribed), by the reference's
    bytes, its transcript (or the language it is transcribed in) and the precision."""

    def __init__(self, size: int = PROMPT_CACHE_SIZE):
        self.size = size
        self._prompts: OrderedDict[tuple, VoicePrompt] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, voice: OmniVoiceONNX, ref_audio, ref_text, language) -> tuple[VoicePrompt, bool]:
        """The reference's voice prompt, and whether it was already here (else it is made now)."""
        transcript = (ref_text or "").strip()
        is_file = isinstance(ref_audio, (str, Path)) and Path(ref_audio).is_file()
        digest = hashlib.sha256(Path(ref_audio).read_bytes()).hexdigest() if is_file else None
        key = (voice.precision, digest, transcript, None if transcript else language)
        with self._lock:
            prompt = self._prompts.get(key) if digest else None
            if prompt is not None:
                self._prompts.move_to_end(key)
                return prompt, True
        prompt = voice.create_voice_prompt(ref_audio, transcript or None, language=language)
        with self._lock:
            self._prompts[key] = prompt
            while len(self._prompts) > self.size:
                self._prompts.popitem(last=False)
        return prompt, False


class Voices:
    """Each precision's ``OmniVoiceONNX``, loaded once and kept. Each precision has its own lock,
    so a request for a loaded precision never waits behind another one's download. ``activity``
    says what a load under way is doing, ``failures`` why the last one failed, for the page.
    ``progress(fraction, desc=...)`` callbacks are Gradio's shape; every door may pass None."""

    def __init__(self, config: Config, offered: list[str] | None = None):
        self.config = config
        self.offered = offered or list(PROFILES)
        self.default = config.precision if config.precision in self.offered else self.offered[0]
        self.loaded: dict[str, OmniVoiceONNX] = {}
        self.activity: dict[str, str] = {}
        self.failures: dict[str, str] = {}
        self._locks = {precision: threading.Lock() for precision in PROFILES}
        self.line = Line(config.concurrency, config.max_waiting)
        self.asr: Transcriber | None = None  # one speech recogniser for every precision
        self._asr_lock = threading.Lock()
        self.prompts = PromptCache()

    def slot(self, progress=None, on_wait=None, should_stop=None):
        """A turn in the line: the model work of a request runs inside one, its download and load
        outside, so a load never holds up requests for a loaded precision. ``on_wait(ahead)`` is
        told how many are ahead when the request must wait; ``should_stop()`` says that its client
        went away (it then leaves the line)."""

        def waiting(ahead: int) -> None:
            if progress is not None:
                progress(
                    0.0,
                    desc=f"Waiting in line: {ahead} request{'s' * (ahead != 1)} before this one",
                )
            if on_wait is not None:
                on_wait(ahead)

        return self.line.turn(waiting, should_stop)

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

        self.activity[precision] = "Loading"
        started = time.perf_counter()
        try:
            self.loaded[precision] = OmniVoiceONNX.load(
                self.config.source, precision, threads=self.config.threads, download_progress=report
            )
            self.failures.pop(precision, None)
        except Exception as exc:
            self.failures[precision] = str(exc)
            raise
        finally:
            self.activity.pop(precision, None)
        logger.info("loaded %s in %.1f s", precision, time.perf_counter() - started)

    def transcriber(self, progress=None) -> Transcriber:
        """The speech recogniser, loaded (and downloaded) once on first need, outside the line."""
        with self._asr_lock:
            if self.asr is None:
                if progress is not None:
                    progress(0.0, desc="Loading the speech recogniser")
                report = (lambda f, m: progress(f, desc=m)) if progress is not None else None
                try:
                    self.asr = Transcriber.load(self.config.asr_model or None, progress=report)
                except ArtifactError as exc:  # it could not be fetched or loaded
                    raise ValueError(str(exc)) from exc  # it says to type the transcript instead
            return self.asr

    @contextlib.contextmanager
    def prepared(
        self, precision: str, request: Request, progress=None, on_wait=None, should_stop=None
    ):
        """What every synthesis door does first: load the precision (outside the line), wait for
        a turn, turn the reference into a voice prompt (from the cache, or transcribed and encoded
        now); yields (voice, request, reused) for the block, which does the synthesis in its turn.
        ``should_stop()``: the client went away; the request leaves the line (:class:`Cancelled`)."""
        reference = (request.ref_audio, request.ref_text, request.language)
        with self.reference(precision, *reference, progress, on_wait, should_stop) as ready:
            voice, prompt, reused = ready
            yield voice, request if prompt is None else request.with_prompt(prompt), reused

    @contextlib.contextmanager
    def reference(
        self,
        precision,
        ref_audio,
        ref_text,
        language,
        progress=None,
        on_wait=None,
        should_stop=None,
    ):
        """A turn in the line with ``ref_audio`` (if any) encoded: yields (voice, voice prompt or
        None, whether it was reused); the speech recogniser is loaded first if it must transcribe."""
        voice = self.get(precision, progress)
        if ref_audio is not None and not (ref_text or "").strip():
            voice.asr = self.transcriber(progress)  # the server's one recogniser
        with self.slot(progress, on_wait, should_stop):
            if ref_audio is None:
                yield voice, None, False
            else:
                yield voice, *self.prompts.get(voice, ref_audio, ref_text, language)

    def preload(self, precision: str) -> threading.Thread:
        """Load ``precision``, then the speech recogniser, in the background; requests wait for these loads."""

        def run() -> None:
            try:
                self.get(precision)
            except Exception as exc:  # noqa: BLE001 - kept in activity; a request will try again
                logger.warning("preloading %s failed: %s", precision, exc)
            try:
                self.transcriber()
            except Exception as exc:  # noqa: BLE001 - a request that needs it says why
                logger.warning("the speech recogniser is not available: %s", exc)

        thread = threading.Thread(target=run, name=f"preload-{precision}", daemon=True)
        thread.start()
        return thread

    def weights(self, precision: str) -> str | None:
        """What the precision's graphs hold (``LLM int4 (block 32), encoder ..., heads ...``),
        read from the graphs loaded, or from a local folder's; None before a download."""
        voice = self.loaded.get(precision)
        if voice is not None:
            return describe_weights({role: voice.graphs[role].path for role in ROLE_NAMES})
        source = self.config.source
        if not (source and Path(source).is_dir()):
            return None
        try:
            graphs = load_manifest(source)["profiles"][precision]["graphs"]
            return describe_weights(
                {role: Path(source) / graphs[role]["file"] for role in ROLE_NAMES}
            )
        except (ArtifactError, KeyError, OSError, ValueError):
            return None


def graphs_size(root: Path, graphs: dict) -> int:
    """Bytes of the given graphs and their external weights."""
    paths = [root / spec["file"] for spec in graphs.values()]
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
            profile = load_manifest(source)["profiles"].get(precision)
        except ArtifactError:
            profile = None
        if profile is None:
            return f"This artifact folder has no {precision} profile."
        return f"On disk: {graphs_size(Path(source), profile['graphs']) / 1e6:.0f} MB."
    from huggingface_hub import try_to_load_from_cache

    repo = source or os.environ.get("OMNIVOICE_REPO") or DEFAULT_REPO
    folder = PROFILE_DIRS.get(precision, precision)
    name = "llm_decoder.onnx.data" if folder == "." else f"{folder}/llm_decoder.onnx.data"
    cached = try_to_load_from_cache(repo, name)
    return "Downloaded." if isinstance(cached, str) else f"Not downloaded yet from {repo}."
