"""What the server tells a Prometheus scrape: ``GET /metrics`` in Prometheus' text format
(``prometheus_client``), behind the API key where one is set.

=========================================  ====================================================
``omnivoice_requests_total{door,outcome}``  requests each door ended, by how (:data:`ENDS`)
``omnivoice_errors_total{code}``            the same but ``ok``, all doors together
``omnivoice_line_waiting``, ``_serving``    the line now: waiting, and generations under way
``omnivoice_generations_parked``            generations under way waiting for the CPU now
``omnivoice_line_wait_seconds``             a request's wait in line to be admitted
``omnivoice_first_turn_wait_seconds``       from its admission to its first turn on the CPU
``omnivoice_turn_wait_seconds``             each later wait for the CPU (between steps, pieces)
``omnivoice_synthesis_seconds``             from its first turn to its end: its turns and its
                                            waits between them (turns.py) both counted
``omnivoice_time_to_first_audio_seconds``   from its arrival (load and line included) to its
                                            first audio: the first piece of a stream, else all
``omnivoice_audio_seconds_total``           seconds of audio made
``omnivoice_real_time_factor``              synthesis seconds (waits included) / audio seconds
``omnivoice_model_load_seconds{precision}`` its last load; ``omnivoice_model_loaded``: 1 or 0
``omnivoice_model_unloads_total``           idle unloads (``--idle-unload``)
``process_resident_memory_bytes``...        the process (``prometheus_client``'s, on Linux)
=========================================  ====================================================

Doors are ``page`` (the page, its ``gradio_client`` API and MCP, which calls that API),
``openai`` and ``wyoming``. Every label is a word of this module or a precision's name: never a
request's text, a voice's name or anything else a client chose.
"""

from __future__ import annotations

import time
from contextlib import closing

from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from omnivoice_rt.errors import ArtifactError, Busy, Cancelled, Stopping, SynthesisError

# How a request ended, from the runtime's error vocabulary (the first that matches)
ENDS = (
    ((Cancelled, GeneratorExit), "cancelled"),  # its client went away
    (Stopping, "stopping"),  # the server was stopping (a Busy, so before it)
    (Busy, "busy"),  # the line was full
    (ArtifactError, "model_unavailable"),
    (SynthesisError, "synthesis_failed"),
    ((ValueError, FileNotFoundError), "bad_request"),
)
# A door's own refusals that carry an HTTP status (the OpenAI door's ApiError)
STATUS_ENDS = {401: "unauthorized", 429: "busy", 499: "cancelled", 503: "model_unavailable"}
CONTENT_TYPE = CONTENT_TYPE_LATEST


def outcome(exc: BaseException | None) -> str:
    """A request's end in one word: ``ok``, a word of :data:`ENDS`, or ``server_error``. A door's
    wording of the runtime's error (raised from it) ends as that error; a door's own refusal with
    an HTTP status, by its status."""
    if exc is None:
        return "ok"
    seen = []  # the chain of causes (an error raised from itself ends it)
    while exc is not None and exc not in seen:
        seen.append(exc)
        for kind, word in ENDS:
            if isinstance(exc, kind):
                return word
        exc = exc.__cause__
    status = next((e.status for e in seen if isinstance(getattr(e, "status", None), int)), None)
    if status is not None:
        return STATUS_ENDS.get(status, "bad_request" if status < 500 else "server_error")
    return "server_error"


class Metrics:
    """The server's counters and histograms, in a registry of its own (two servers in one
    process, as in the tests, do not mix); ``service`` is read at every scrape (the line, the
    models)."""

    def __init__(self, service):
        self.registry = registry = CollectorRegistry()
        self.requests = Counter(
            "omnivoice_requests",
            "Requests each door ended, by how they ended",
            ["door", "outcome"],
            registry=registry,
        )
        self.errors = Counter(
            "omnivoice_errors", "Requests that did not end ok, by code", ["code"], registry=registry
        )
        self.line_wait = Histogram(
            "omnivoice_line_wait_seconds",
            "Seconds a request waited in line for its turn",
            buckets=(0.01, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300),
            registry=registry,
        )
        self.first_turn = Histogram(
            "omnivoice_first_turn_wait_seconds",
            "Seconds from a request's admission to its first turn on the CPU",
            buckets=(0.01, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
            registry=registry,
        )
        self.turn_wait = Histogram(
            "omnivoice_turn_wait_seconds",
            "Seconds a request under way waited for the CPU, each time after its first turn",
            buckets=(0.01, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
            registry=registry,
        )
        self.synthesis = Histogram(
            "omnivoice_synthesis_seconds",
            "Seconds from a request's first turn to its end (synthesis, post-processing, and "
            "its waits for other requests' turns)",
            buckets=(0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 60, 120, 300, 600),
            registry=registry,
        )
        self.first_audio = Histogram(
            "omnivoice_time_to_first_audio_seconds",
            "Seconds from a request's arrival to its first audio (load and line included)",
            buckets=(0.1, 0.25, 0.5, 1, 1.5, 2, 3, 5, 10, 30, 60, 120),
            registry=registry,
        )
        self.audio = Counter("omnivoice_audio_seconds", "Seconds of audio made", registry=registry)
        self.rtf = Histogram(
            "omnivoice_real_time_factor",
            "A request's synthesis seconds (its waits for other requests' turns included) per "
            "second of audio (below 1: faster than real time)",
            buckets=(0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 20),
            registry=registry,
        )
        self.unloads = Counter(
            "omnivoice_model_unloads", "Idle unloads of the models", registry=registry
        )
        registry.register(_State(service))
        ProcessCollector(registry=registry)  # process_resident_memory_bytes, cpu, open fds

    def ended(self, door: str, exc: BaseException | None = None) -> None:
        """Count one request of ``door`` ended, ok (``exc`` None) or by ``exc``."""
        word = outcome(exc)
        self.requests.labels(door, word).inc()
        if word != "ok":
            self.errors.labels(word).inc()

    def synthesized(self, measured: Measured, arrived: float, turn: float) -> None:
        """A request's turn is over: its time in the turn, its audio, its first audio's time
        (``arrived``, ``turn``: ``time.perf_counter()`` at its arrival and at its turn)."""
        if measured.first_audio is None:  # nothing made: refused, or gone before a piece
            return
        spent = time.perf_counter() - turn
        self.synthesis.observe(spent)
        self.first_audio.observe(measured.first_audio - arrived)
        self.audio.inc(measured.audio_seconds)
        if measured.audio_seconds > 0:
            self.rtf.observe(spent / measured.audio_seconds)

    def waited(self, seconds: float, first: bool) -> None:
        """A wait for the CPU (``turns.Turns.waited``): the first of a request, or a later one."""
        (self.first_turn if first else self.turn_wait).observe(seconds)

    def scrape(self) -> bytes:
        return generate_latest(self.registry)


class _State:
    """Gauges read from the server as it is at the scrape: the line, the models."""

    def __init__(self, service):
        self._service = service

    def collect(self):
        service = self._service
        line = service.line
        waiting = GaugeMetricFamily("omnivoice_line_waiting", "Requests waiting in line now")
        waiting.add_metric([], line.waiting)
        serving = GaugeMetricFamily("omnivoice_line_serving", "Generations under way now")
        serving.add_metric([], line.serving)
        parked = GaugeMetricFamily(
            "omnivoice_generations_parked", "Generations under way waiting for the CPU now"
        )
        parked.add_metric([], service.turns.parked)
        loaded = GaugeMetricFamily(
            "omnivoice_model_loaded", "1 where the precision is loaded", labels=["precision"]
        )
        loads = GaugeMetricFamily(
            "omnivoice_model_load_seconds",
            "Seconds the precision's last load took",
            labels=["precision"],
        )
        models = service.models
        for precision in models.offered:
            loaded.add_metric([precision], int(precision in models.loaded))
            if precision in models.load_seconds:
                loads.add_metric([precision], models.load_seconds[precision])
        yield from (waiting, serving, parked, loaded, loads)


class Measured:
    """A voice whose ``generate`` and ``stream`` note the audio they make and when the first
    of it came, and pause at their boundaries for other requests (``generation``, a
    ``turns.Generation``: its ``boundary``); everything else is the voice's own.
    ``Service.prepared`` hands one to each door."""

    def __init__(self, voice, generation=None):
        self._voice, self.generation = voice, generation
        self.audio_seconds = 0.0
        self.first_audio: float | None = None  # time.perf_counter() when the first audio came

    def __getattr__(self, name):
        return getattr(self._voice, name)

    def generate(self, *args, **kwargs):
        speech = self._voice.generate(*args, **self._paused(kwargs))
        self._made(speech)
        return speech

    def stream(self, *args, **kwargs):
        with closing(self._voice.stream(*args, **self._paused(kwargs))) as pieces:
            for piece in pieces:
                self._made(piece)
                yield piece

    def _paused(self, kwargs: dict) -> dict:
        if self.generation is not None:
            kwargs.setdefault("boundary", self.generation.boundary)
        return kwargs

    def _made(self, speech) -> None:
        if self.first_audio is None:
            self.first_audio = time.perf_counter()
        self.audio_seconds += speech.waveform.shape[-1] / speech.sample_rate
