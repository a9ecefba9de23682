"""What every door of the server shares, one object (:class:`Service`) holding the models
(``omnivoice_rt/server/models.py``), the line of requests (``omnivoice_rt/server/line.py``), the voice-prompt cache and the
speech recogniser, and the doors' defaults. The doors (the Gradio page and API, MCP, the
OpenAI-compatible endpoint) only translate requests and errors; the work and its limits are here.

    service = Service(Config("artifacts"))
    with service.prepared("int4", Request.from_options({"text": "Hi.", "ref_audio": "me.wav"})) as (
        voice, request, reused
    ):
        speech = voice.generate(request)

Errors are the runtime's (``omnivoice_rt.errors``): ``ValueError`` for bad input and unusable
artifacts, ``Busy`` when the line is full; each door words them in its own protocol.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import logging
import random
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from omnivoice_rt import dialogue
from omnivoice_rt.dialogue import Script
from omnivoice_rt.limits import CONCURRENCY, MAX_WAITING, PER_CLIENT
from omnivoice_rt.model import OmniVoiceONNX
from omnivoice_rt.request import (
    DOOR_NORMALIZE_TEXT,
    DOOR_PRESET,
    PRESETS,
    GenerationSettings,
    Request,
)
from omnivoice_rt.server.line import ClientLine
from omnivoice_rt.server.memory import release_memory
from omnivoice_rt.server.metrics import Measured, Metrics
from omnivoice_rt.server.models import Models, Recogniser
from omnivoice_rt.server.normalizing import TextReader
from omnivoice_rt.server.turns import FIRST_PIECE_S, TURNS, Generation, Listener, Turns
from omnivoice_rt.speech import Speech
from omnivoice_rt.voice_prompt import VoicePrompt

logger = logging.getLogger(__name__)

# The page's settings as they start, and the API's defaults (the doors' preset, a random seed).
DEFAULTS = {
    "num_step": PRESETS[DOOR_PRESET]["num_step"],
    "guidance_scale": GenerationSettings.guidance_scale,
    "speed": 1.0,
    "duration": 0.0,
    "seed": 0,
    "randomize_seed": True,
    "denoise": GenerationSettings.denoise,
    "postprocess_output": GenerationSettings.postprocess_output,
    "preset": DOOR_PRESET,
    "normalize_text": DOOR_NORMALIZE_TEXT,
}
# voice prompts kept, keyed by the reference's bytes, its transcript and the precision
PROMPT_CACHE_SIZE = 16
# the voices of the latest results, for a client to keep in the library (KeptVoices)
RESULTS_KEPT, RESULT_KEPT_S = 64, 3600.0


@dataclass
class Config:
    # artifact folder or Hub repo; None: $OMNIVOICE_REPO or the default repo
    source: str | None = None
    precision: str | None = None  # None: int4, or fp16 where int4's heads are int4 (Models)
    threads: int | None = None
    preload: bool = False  # load the default precision in the background as the server starts
    # generations under way at once (their caches in memory); loads and downloads take none
    concurrency: int = CONCURRENCY
    turns: str = TURNS  # who computes next among them (turns.POLICIES)
    # a streamed long text's first piece in seconds (its later ones upstream's); 0: upstream's
    first_piece: float = FIRST_PIECE_S
    # of those, how many one client's requests may be (line.ClientLine; clients.py says who);
    # None: PER_CLIENT, or the concurrency where it is lower
    per_client: int | None = None
    # speech recogniser: folder or Hub repo; None: $OMNIVOICE_ASR_MODEL or whisper-base
    asr_model: str | None = None
    # requests waiting in line, all doors together; more are turned away
    max_waiting: int = MAX_WAITING
    # free the models after this many seconds without a request (None: keep them)
    idle_unload: float | None = None


def resolve_seed(seed, randomize: bool) -> int:
    return random.randrange(2**31) if randomize or seed is None else int(seed)


class PromptCache:
    """The last ``PROMPT_CACHE_SIZE`` references encoded (and transcribed), by the reference's
    bytes, its transcript (or the language it is transcribed in) and the precision."""

    def __init__(self, size: int = PROMPT_CACHE_SIZE):
        self.size = size
        self._prompts: OrderedDict[tuple, VoicePrompt] = OrderedDict()
        self._lock = threading.Lock()

    def get(
        self, voice: OmniVoiceONNX, ref_audio, ref_text, language, boundary=None
    ) -> tuple[VoicePrompt, bool]:
        """The reference's voice prompt, and whether it was already here (else it is made now,
        pausing at ``boundary()`` between its stages for other generations)."""
        transcript = (ref_text or "").strip()
        is_file = isinstance(ref_audio, (str, Path)) and Path(ref_audio).is_file()
        digest = hashlib.sha256(Path(ref_audio).read_bytes()).hexdigest() if is_file else None
        key = (voice.precision, digest, transcript, None if transcript else language)
        with self._lock:
            prompt = self._prompts.get(key) if digest else None
            if prompt is not None:
                self._prompts.move_to_end(key)
                return prompt, True
        prompt = voice.create_voice_prompt(
            ref_audio, transcript or None, language=language, boundary=boundary
        )
        with self._lock:
            self._prompts[key] = prompt
            while len(self._prompts) > self.size:
                self._prompts.popitem(last=False)
        return prompt, False


class ResultGone(ValueError):
    """A result id this server does not hold (never given, or kept past ``RESULT_KEPT_S``)."""


class KeptVoices:
    """The voices of the latest results (``Speech.voice_prompt``: the first piece's codes and
    text), each under an id its door hands out (the OpenAI door's ``X-Voice-Result`` header, the
    page's state), so that a client can keep that voice in the library afterwards without
    sending any audio back. At most ``RESULTS_KEPT``, each for ``RESULT_KEPT_S``."""

    def __init__(self, size: int = RESULTS_KEPT, seconds: float = RESULT_KEPT_S):
        self.size, self.seconds = size, seconds
        self._voices: OrderedDict[str, tuple[float, VoicePrompt]] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, speech: Speech) -> str | None:
        """An id for ``speech``'s voice, or None where it has none to keep."""
        try:
            prompt = speech.voice_prompt()
        except ValueError:
            return None
        key = secrets.token_urlsafe(12)
        with self._lock:
            self._voices[key] = (time.monotonic(), prompt)
            self._drop_old()
        return key

    def get(self, key) -> VoicePrompt:
        with self._lock:
            self._drop_old()
            found = self._voices.get(key) if isinstance(key, str) else None
        if found is None:
            raise ResultGone(
                f"No result {str(key)[:40]!r} is held here: a result's voice is kept for "
                f"{self.seconds / 60:g} minutes (the latest {self.size}); make it again."
            )
        return found[1]

    def _drop_old(self) -> None:
        now = time.monotonic()
        while self._voices and (
            len(self._voices) > self.size
            or now - next(iter(self._voices.values()))[0] > self.seconds
        ):
            self._voices.popitem(last=False)


def closed(pieces: Iterator) -> None:
    """Close a generator of pieces (``Service.speak``, a door's body over it) from any thread,
    once the piece a worker thread may still be making is done: its client gone, ``should_stop``
    ends it at its next step."""
    while pieces.gi_running:
        time.sleep(0.01)
    pieces.close()


class Service:
    """What the doors share: ``models`` (each precision loaded once), ``line`` (one FIFO line for
    every door), ``prompts`` (references already encoded) and ``recogniser`` (the speech
    recogniser). ``progress(fraction, desc=...)`` callbacks are Gradio's shape; any may be None."""

    def __init__(self, config: Config, offered: list[str] | None = None):
        self.config = config
        self.models = Models(config.source, offered, config.precision, config.threads)
        per_client = config.per_client
        if per_client is None:
            per_client = min(PER_CLIENT, config.concurrency)
        self.line = ClientLine(config.concurrency, config.max_waiting, per_client)
        self.turns = Turns(config.turns)
        self.prompts = PromptCache()
        self.results = KeptVoices()
        self.recogniser = Recogniser(config.asr_model)
        self.reader = TextReader(config.max_waiting)
        self.metrics = Metrics(self)
        self.turns.waited = self.metrics.waited
        self.stopping = False  # SIGTERM came: no new request (server.lifecycle)
        self.working = 0  # requests between their load and the end of their turn
        self._last_used = time.monotonic()
        self._use = threading.Lock()

    def health(self) -> dict:
        """What ``GET /health`` answers: the line (served now, waiting, its bounds), the
        precisions offered and loaded, the idle unload; nothing about requests or files."""
        return {
            "status": "stopping" if self.stopping else "ok",
            "serving": self.line.serving,
            "waiting": self.line.waiting,
            "slots": self.line.slots,
            "per_client": self.line.per_client,
            "turns": self.turns.policy,
            "parked": self.turns.parked,  # under way, waiting for the CPU
            "max_waiting": self.line.max_waiting,
            "offered": list(self.models.offered),
            "loaded": sorted(self.models.loaded),
            # the kernel each loaded precision's LLM multiplies with, and why (omnivoice_rt.engine.matmul)
            "kernels": {
                precision: {"kernel": voice.matmul[0], "why": voice.matmul[1]}
                for precision, voice in sorted(self.models.loaded.items())
            },
            "text_pieces_read": self.reader.pieces_read,
            # --idle-unload: its seconds (None: off), the seconds since a request last worked,
            # and whether the models were freed for it (the next request loads them again)
            "idle_unload": self.config.idle_unload,
            "idle_s": round(time.monotonic() - self._last_used, 1) if not self.working else 0.0,
            "unloaded": bool(self.models.unloaded) and not self.models.loaded,
        }

    @contextlib.contextmanager
    def in_use(self):
        """A request's use of the models (its load, its turn): no idle unload meanwhile."""
        with self._use:
            self.working += 1
        try:
            yield
        finally:
            with self._use:
                self.working -= 1
                self._last_used = time.monotonic()

    def unload_if_idle(self, seconds: float) -> bool:
        """Free the models and the recogniser if nothing has used them for ``seconds`` (and
        nothing uses them now); whether it did. The next request loads them again."""
        with self._use:
            idle = time.monotonic() - self._last_used
            if self.working or idle < seconds or not (self.models.loaded or self.recogniser.loaded):
                return False
            freed = self.models.unload(f"freed after {idle:.0f} s without a request")
            self.recogniser.unload()
            gc.collect()  # the sessions' last references, if a cycle holds them
        release_memory()
        self.metrics.unloads.inc()
        logger.info(
            "idle for %.0f s: freed %s and the recogniser", idle, ", ".join(freed) or "no model"
        )
        return True

    def stop(self) -> None:
        """SIGTERM: take no new request (the line turns newcomers away, ``errors.Stopping``);
        those under way go on, the oldest first."""
        self.stopping = True
        self.line.close()
        self.turns.draining = True  # the oldest under way finish first
        logger.info("stopping: no new request; %d under way", self.working)

    def normalizer(self, should_stop=None):
        """How a request of this server reads its numbers as words (``Request``'s
        ``normalizer``): in the worker process, bounded, stopped when ``should_stop()``."""
        return lambda text, language: self.reader.normalize(text, language, should_stop)

    @contextlib.contextmanager
    def slot(self, progress=None, on_wait=None, should_stop=None, generation=None, client=None):
        """A place in the line, then the CPU: the model work of a request runs inside one, its
        download and load outside, so a load never holds up requests for a loaded precision.
        Yields the request's :class:`Generation` (``generation``, or one made here) holding the
        CPU; it may give it back and take it again inside (``turns.py``), and gives it back at
        the end. ``on_wait(ahead)`` is told how many are ahead when the request must wait;
        ``should_stop()`` says that its client went away (it then leaves the line, or its
        turn); ``client`` is who asked (``clients.py``), whose requests beyond ``per_client``
        let other clients' go first. After the turn, the memory it freed goes back."""

        def waiting(ahead: int) -> None:
            if progress is not None:
                progress(0.0, desc=self._where(ahead, client))
            if on_wait is not None:
                on_wait(ahead)

        queued = time.perf_counter()
        generation = generation or self.turns.generation(should_stop=should_stop)
        with self.line.turn(waiting, should_stop, client):
            self.metrics.line_wait.observe(time.perf_counter() - queued)
            try:
                with generation:
                    generation.take()
                    yield generation
            finally:
                release_memory()

    def _where(self, ahead: int, client: str | None) -> str:
        """Where a request that must wait stands, as the page says it."""
        mine = self.line.held(client)
        if mine >= self.line.per_client:
            return (
                f"Waiting for your own requests: {mine} are being made ({self.line.per_client} "
                f"of a visitor's at a time), {ahead} in all before this one"
            )
        return f"Waiting in line: {ahead} request{'s' * (ahead != 1)} before this one"

    def speak(
        self,
        precision: str,
        request: Request | Script,
        *,
        whole: bool = False,
        sentences: bool = False,
        keep: bool = False,
        progress=None,
        on_wait=None,
        should_stop=None,
        listener: Listener | None = None,
        client: str | None = None,
    ) -> Iterator[Speech]:
        """The one synthesis call of every door: a checked request made into speech, each piece
        as it is made (``sentences``: a sentence a piece), or (``whole``) the whole result once.
        It loads ``precision`` (outside the line), waits for a turn (``on_wait(ahead)``), encodes
        the reference (the prompt cache), counts the synthesis in the metrics and, with ``keep``,
        keeps the result's voice (``results``, for a door's "keep this voice"); each piece's
        metadata says whether the reference's encoding was reused (``reused_reference``), and the
        first's the id its voice is kept by (``kept``: None where none is). The turn is held
        until the pieces end or the generator is closed: a door closes it when its client leaves
        (``contextlib.closing``; from another thread, ``closed``); the CPU is given back while a
        piece is with the door (``turns.py``), and ``listener`` (a new one when not given) is
        told the audio each piece carries, which ranks the request among the others.
        ``should_stop()``: the client went away; the synthesis stops at its next step.
        ``client``: who asked (``clients.py``; the line bounds each client's share). A dialogue
        script (``dialogue.Script``) is one request to the line too: a piece a turn, each turn's
        generation taking turns with the others'."""
        script = request if isinstance(request, Script) else None
        request = script.first if script is not None else request
        told = None
        if progress is not None:
            told = lambda done, total: progress(done / total, desc=f"Step {done}/{total}")  # noqa: E731
        how = {
            "progress": progress,
            "on_wait": on_wait,
            "should_stop": should_stop,
            "client": client,
        }
        with self.prepared(precision, request, **how, listener=listener) as prepared:
            voice, ready, reused = prepared
            generation = voice.generation

            def pieces() -> Iterator[Speech]:  # closing it closes the voice's stream
                if script is not None:
                    by_turn = None  # a Gradio progress bar is falsy: "is None", not "and"
                    if progress is not None:
                        by_turn = lambda d, t: progress(d / t, desc=f"Turn {d} of {t}")  # noqa: E731
                    turns = dialogue.stream(voice, script, should_stop, by_turn)
                    yield from [Speech.join(list(turns))] if whole else turns
                elif whole:
                    yield voice.generate(ready, progress=told, should_stop=should_stop)
                else:
                    yield from voice.stream(
                        ready,
                        progress=told,
                        should_stop=should_stop,
                        sentences=sentences,
                        first_seconds=self.config.first_piece or None,
                    )

            with contextlib.closing(pieces()) as made:
                for n, piece in enumerate(made):
                    piece.metadata["reused_reference"] = reused
                    if n == 0:
                        piece.metadata["kept"] = self.results.add(piece) if keep else None
                    generation.give()  # the CPU is another's while the door sends the piece
                    generation.delivered(piece.seconds)
                    yield piece  # the next piece takes the CPU at its first boundary

    def synthesized(self, precision: str, request: Request, **how) -> Speech:
        """``speak(whole=True)``'s one result, its turn given back."""
        with contextlib.closing(self.speak(precision, request, whole=True, **how)) as made:
            return next(made)

    @contextlib.contextmanager
    def prepared(
        self,
        precision: str,
        request: Request,
        progress=None,
        on_wait=None,
        should_stop=None,
        listener: Listener | None = None,
        client: str | None = None,
    ):
        """Load the precision (outside the line), wait for a turn, turn the reference into a voice
        prompt (from the cache, or transcribed and encoded now); yields (voice, request, reused)
        for the block, which does its work in the turn: the voice's ``generate`` and ``stream``
        pause at their boundaries for other requests (``turns.py``). ``speak`` is the synthesis
        of every door on it; a door that holds one turn for several generations (a dub) uses it
        directly.
        ``should_stop()``: the client went away; the request leaves the line (:class:`Cancelled`).
        ``client``: who asked (``slot``)."""
        reference = (request.ref_audio, request.ref_text, request.language)
        arrived = time.perf_counter()
        generation = self.turns.generation(listener, should_stop)
        with self.reference(
            precision, *reference, progress, on_wait, should_stop, generation, client
        ) as ready:
            voice, prompt, reused = ready
            measured, turn = Measured(voice, generation), time.perf_counter()  # for the metrics
            try:
                yield measured, request if prompt is None else request.with_prompt(prompt), reused
            finally:
                self.metrics.synthesized(measured, arrived, turn)

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
        generation: Generation | None = None,
        client: str | None = None,
    ):
        """A turn in the line (``slot``) with ``ref_audio`` (if any) encoded: yields (voice, voice
        prompt or None, whether it was reused); the speech recogniser is loaded first if it must
        transcribe."""
        with self.in_use():  # from the load on: no idle unload
            voice = self.models.get(precision, progress)
            if ref_audio is not None and not (ref_text or "").strip():
                voice.asr = self.recogniser.get(progress)  # the server's one recogniser
            with self.slot(progress, on_wait, should_stop, generation, client) as generation:
                if ref_audio is None:
                    yield voice, None, False
                else:  # encoded in turns: between the transcription and the encoder's graphs
                    made = self.prompts.get(
                        voice, ref_audio, ref_text, language, generation.boundary
                    )
                    yield voice, *made

    def transcribe(
        self, audio, language: str | None, progress=None, should_stop=None, client=None
    ) -> str:
        """What a recording says, heard by the server's recogniser (loaded outside the line) in a
        turn of the line, as a synthesis is made in one."""
        with self.in_use():
            recogniser = self.recogniser.get(progress)
            with self.slot(progress, should_stop=should_stop, client=client):
                if progress is not None:
                    progress(0.5, desc="Transcribing the reference")
                return recogniser.transcribe(audio, language)

    def preload(self, precision: str) -> threading.Thread:
        """Load ``precision``, then the speech recogniser, in the background; requests wait for these loads."""

        def run() -> None:
            with self.in_use():  # the idle time of --idle-unload starts when the loads end
                try:
                    self.models.get(precision)
                except Exception as exc:  # noqa: BLE001 - kept in activity; a request tries again
                    logger.warning("preloading %s failed: %s", precision, exc)
                try:
                    self.recogniser.get()
                except Exception as exc:  # noqa: BLE001 - a request that needs it says why
                    logger.warning("the speech recogniser is not available: %s", exc)

        thread = threading.Thread(target=run, name=f"preload-{precision}", daemon=True)
        thread.start()
        return thread
