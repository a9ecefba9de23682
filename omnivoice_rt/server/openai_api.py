"""The OpenAI-compatible door: ``POST /v1/audio/speech``, ``GET /v1/models``, ``GET /v1/audio/voices``.

    from openai import OpenAI
    client = OpenAI(base_url="http://127.0.0.1:7860/v1", api_key="unused")
    client.audio.speech.create(model="omnivoice", voice="alloy", input="Hello!").write_to_file("hello.mp3")

Requests wait in the server's one line (``Service.line``) with the page's, gradio_client's and
MCP's, under the same limits, and fail in OpenAI's error shape with OpenAI's status codes. The
audio leaves as it is made: a long text's pieces are sent one by one (pcm, wav, mp3, opus; flac
at the end), or as server-sent events (``stream_format: "sse"``). Beyond OpenAI's fields, a body
may carry ``sentences`` and any of the request's options by its name (``request.DOOR_FIELDS``:
``language``, ``seed``, ``preset``, ``normalize_text``, ``duration``, ``num_step``,
``guidance_scale``...; the ``extra_body`` of the client); ``"captions": true`` answers one JSON object instead, the audio in
base64 and where each piece lies in it (with ``stream_format: "sse"``: in the done event), and
``"words": true`` adds where each word lies (``omnivoice_rt.align``, the ``align`` extra: each
piece aligned once its audio is sent, never before the first audio).
Numbers, dates and money are read as words unless
``normalize_text`` is false, as OpenAI's speech API reads them; the answer's ``X-Text-Normalized``
header says whether that changed the text.
"""

from __future__ import annotations

import base64
import contextlib
import hmac
import json
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import anyio
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import Response, StreamingResponse
from starlette.requests import ClientDisconnect

from omnivoice_rt import captions, dialogue
from omnivoice_rt.audio.formats import (
    FORMATS,
    AudioWriter,
    available_formats,
    check_rate,
    missing_encoder,
)
from omnivoice_rt.dialogue import TURN_PAUSE_S, Script
from omnivoice_rt.errors import Cancelled
from omnivoice_rt.limits import BODY_TIMEOUT_S, MAX_TEXT_CHARS, SEND_TIMEOUT_S
from omnivoice_rt.request import (
    DOOR_NORMALIZE_TEXT,
    DOOR_PRESET,
    KINDS,
    OptionError,
    check_text,
    door_fields,
)
from omnivoice_rt.request import Request as SynthesisRequest
from omnivoice_rt.server.api_errors import ApiError, api_error
from omnivoice_rt.server.clients import from_headers
from omnivoice_rt.server.metrics import CONTENT_TYPE as METRICS_TYPE
from omnivoice_rt.server.serving import Service, closed, resolve_seed
from omnivoice_rt.server.voices_api import voice_routes
from omnivoice_rt.text.instructs import resolve_instruct
from omnivoice_rt.text.languages import quoted
from omnivoice_rt.text.script import ScriptError, has_tags
from omnivoice_rt.voices import AUTO_VOICE, DESIGNED_VOICES, VoiceLibrary

logger = logging.getLogger(__name__)

OPENAI_VOICES = DESIGNED_VOICES  # OpenAI's voice names, as voice designs
# OpenAI's model names, taken as presets of the server's default precision.
OPENAI_MODELS = {"tts-1": "fast", "gpt-4o-mini-tts": DOOR_PRESET, "tts-1-hd": "best"}
MODEL = "omnivoice"  # the server's default precision and preset; "omnivoice-int8" and so on name a precision
# the request's options (OPTIONS) that OpenAI's body names otherwise
FIELDS = {"text": "input", "instruct": "instructions"}
MAX_BODY_BYTES = 1 << 20  # a request body: 10,000 characters of text are at most 40 kB of JSON


@dataclass
class SpeechRequest:
    """A checked body of ``POST /v1/audio/speech``: the synthesis and how to answer."""

    synthesis: SynthesisRequest | Script
    precision: str
    voice: str
    response_format: str
    sse: bool
    sentences: bool
    captions: bool = False  # answer JSON: the audio (base64) and where each piece lies in it
    words: bool = False  # and where each word lies (captions with them)


class OpenAIDoor:
    """The routes, over the server's ``Service`` and its voice ``library``; with ``api_key`` set,
    every request must carry it as a bearer token."""

    def __init__(
        self, service: Service, library: VoiceLibrary | None = None, api_key: str | None = None
    ):
        self.service = service
        self.library = library or VoiceLibrary()
        self.api_key = api_key or None
        self.formats = available_formats()
        # Threads for the requests waiting in the line or being served; past it a request waits without one.
        self.waiting_threads = anyio.CapacityLimiter(
            service.line.max_waiting + service.line.slots + 1
        )

    # ------------------------------------------------------------------ tables

    def models(self) -> dict[str, tuple[str, str]]:
        """Every model name this server answers to: (precision, preset)."""
        default = self.service.models.default
        table = {MODEL: (default, DOOR_PRESET)}
        table.update(
            {
                f"{MODEL}-{precision}": (precision, DOOR_PRESET)
                for precision in self.service.models.offered
            }
        )
        table.update({name: (default, preset) for name, preset in OPENAI_MODELS.items()})
        return table

    # ------------------------------------------------------------------ requests

    def parse(self, body, should_stop=None) -> SpeechRequest:
        """The body checked field by field; each problem named with its field (``param``); its
        numbers read as words by the server's worker (stopped when ``should_stop()``)."""
        if not isinstance(body, dict):
            raise ApiError(400, "The body must be a JSON object with at least 'input'.")
        text = body.get("input")
        if not isinstance(text, str) or not text.strip():
            raise ApiError(
                400, "'input' is required: the text to speak, a non-empty string.", param="input"
            )
        # a dialogue: "Name:" lines where asked for, [voice:NAME] tags always (dialogue.py)
        script = optional(body, "script", bool) or has_tags(text)
        try:
            # before the line: a request that cannot run does not wait for its turn
            text = text if script else check_text(text)
        except ValueError as exc:
            raise ApiError(400, str(exc), param="input") from exc
        model = optional(body, "model", str) or MODEL
        models = self.models()
        if model not in models:
            raise ApiError(
                404,
                f"The model {quoted(model)} does not exist here; choose one of {', '.join(models)}.",
                param="model",
                code="model_not_found",
            )
        precision, preset = models[model]  # the preset of the model: a body's own replaces it
        voice, voice_options = self._voice(body)
        fmt = optional(body, "response_format", str) or "mp3"
        if fmt not in self.formats:
            missing = f" ({missing_encoder(fmt)})" if fmt in FORMATS else ""
            raise ApiError(
                400,
                f"Unsupported response_format {quoted(fmt)}{missing}; this server writes "
                f"{', '.join(self.formats)}.",
                param="response_format",
            )
        try:  # before the line: a rate the format cannot take is refused at once
            if body.get("sample_rate") is not None:
                check_rate(fmt, body["sample_rate"])
        except ValueError as exc:
            raise ApiError(400, f"{exc}.", param="sample_rate") from exc
        stream_format = optional(body, "stream_format", str) or "audio"
        if stream_format not in ("audio", "sse"):
            raise ApiError(
                400,
                f"Unknown stream_format {quoted(stream_format)}; use 'audio' or 'sse'.",
                param="stream_format",
            )
        instruct = optional(body, "instructions", str) or voice_options.get("instruct")
        try:
            instruct = resolve_instruct(instruct)
        except ValueError as exc:
            raise ApiError(
                400, f"'instructions' are voice-design items here. {exc}", param="instructions"
            ) from exc
        options = {
            "text": text,
            "language": voice_options.get("language"),
            "instruct": instruct,
            "voice_prompt": voice_options.get("voice_prompt"),
            "seed": resolve_seed(None, True),
            "normalize_text": DOOR_NORMALIZE_TEXT,
            # every other option by its own name (speed is OpenAI's too), each the request's to
            # check: a language given (of any type) replaces the voice's
            **door_fields(body),
        }
        speakers = _speakers(body, script)
        normalizer = self.service.normalizer(should_stop)
        try:  # each option checked once, by the request, which names the option it refuses
            if script:
                synthesis = self._script(body, options, preset, normalizer, speakers)
            else:
                synthesis = SynthesisRequest.from_options(options, preset, normalizer=normalizer)
        except OptionError as exc:
            raise ApiError(400, str(exc), param=FIELDS.get(exc.option, exc.option)) from exc
        except ScriptError as exc:
            raise ApiError(400, f"{exc}.", param="input") from exc
        words = _words_asked(body)
        return SpeechRequest(
            synthesis=synthesis,
            precision=precision,
            voice=voice,
            response_format=fmt,
            sse=stream_format == "sse",
            sentences=optional(body, "sentences", bool) or False,
            captions=optional(body, "captions", bool) or words,
            words=words,
        )

    def _voice(self, body: dict) -> tuple[str, dict]:
        """The body's ``voice`` (a name, or OpenAI's ``{"id": ...}``; none: the auto voice) and
        the options the library gives it."""
        voice = body.get("voice")
        if isinstance(voice, dict):  # OpenAI's {"id": "voice_..."} form of a custom voice
            voice = voice.get("id")
        voice = AUTO_VOICE if voice is None or voice == "" else voice
        if not isinstance(voice, str):
            raise ApiError(
                400,
                "'voice' must be a voice name (GET /v1/audio/voices lists them).",
                param="voice",
            )
        try:
            return voice, self.library.options(voice)
        except ValueError as exc:
            raise ApiError(400, str(exc), param="voice") from exc

    def _script(
        self, body: dict, options: dict, preset: str, normalizer, given: dict[str, str]
    ) -> Script:
        """The body's ``input`` as a dialogue script: "Name:" lines with ``"script": true``,
        ``[voice:NAME]`` tags always; each name the voice ``speakers`` gives it (a voice of the
        library or a design), else the library's of that name, the body's ``voice`` the
        default speaker's; ``turn_pause`` seconds between turns."""
        pause = body.get("turn_pause", TURN_PAUSE_S)  # checked by prepare, named if refused
        try:
            speakers = dialogue.library_speakers(self.library, given)
        except ScriptError as exc:
            raise ApiError(400, f"{exc}.", param="speakers") from exc
        return dialogue.prepare(
            options["text"],
            {k: v for k, v in options.items() if k != "text"},
            speakers,
            named_lines=optional(body, "script", bool) or False,
            turn_pause=pause,
            limit=MAX_TEXT_CHARS,
            request_of=lambda turn: SynthesisRequest.from_options(
                turn, preset, normalizer=normalizer
            ),
        )

    def check_key(self, request: Request) -> None:
        if self.api_key is None:
            return
        given = request.headers.get("authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {self.api_key}".encode()):
            raise ApiError(
                401,
                "Incorrect or missing API key: send 'Authorization: Bearer <OMNIVOICE_API_KEY>'.",
                code="invalid_api_key",
            )

    # ------------------------------------------------------------------ routes

    def router(self) -> APIRouter:
        router = APIRouter(prefix="/v1")

        @router.post("/audio/speech")
        async def speech(request: Request):
            try:
                return await self.speech(request)
            except BaseException as exc:  # counted here; answered by the handler in install()
                self.service.metrics.ended("openai", exc)
                raise

        @router.get("/models")
        async def models(request: Request):
            self.check_key(request)
            data = [
                {
                    "id": name,
                    "object": "model",
                    "created": 0,
                    "owned_by": "omnivoice-onnx",
                    "precision": precision,
                    "preset": preset,
                }
                for name, (precision, preset) in self.models().items()
            ]
            return {"object": "list", "data": data}

        return router

    async def speech(self, request: Request) -> SpeechResponse:
        """POST /v1/audio/speech: the audio, streamed as it is made; an ``ApiError`` before it.
        The request is counted as ended when its response ends (``SpeechJob``)."""
        self.check_key(request)
        body = await read_json(request, json_only=True)
        stopped = threading.Event()  # the client went away: what is under way for it stops
        try:
            # in a thread, which waits for the text normalization worker (seconds for a long text)
            async with watching(request.receive, stopped):
                parsed = await anyio.to_thread.run_sync(self.parse, body, stopped.is_set)
        except Exception as exc:  # noqa: BLE001 - a full worker line, a client gone: in OpenAI's words
            raise api_error(exc) from exc
        job = SpeechJob(self.service, parsed, stopped, from_headers(request.headers))
        # Waiting for a turn holds a thread: these come from the door's own pool, never Gradio's.
        # A client that leaves meanwhile stops it: out of the line, or at the next step.
        try:
            async with watching(request.receive, job.stopped):
                await anyio.to_thread.run_sync(job.start, limiter=self.waiting_threads)
            return SpeechResponse(job)  # which closes the job when it ends
        except BaseException:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(job.close)  # the turn in the line goes back
            raise

    async def metrics(self, request: Request) -> Response:
        """GET /metrics: the server's metrics in Prometheus' text format (``server/metrics.py``),
        behind the API key where one is set, as /v1 is."""
        self.check_key(request)
        return Response(self.service.metrics.scrape(), media_type=METRICS_TYPE)

    def install(self, app: FastAPI) -> None:
        app.include_router(self.router())
        app.include_router(voice_routes(self))
        app.add_api_route("/metrics", self.metrics, methods=["GET"])
        app.add_middleware(SameSiteWrites)

        async def handler(_request, exc: ApiError):
            return exc.response()

        app.add_exception_handler(ApiError, handler)


class SpeechJob:
    """One request's synthesis: ``start`` loads, waits for a turn and makes the first piece (so
    every error before the first byte gets its status); ``body`` is the response's bytes; ``close``
    ends it, however the response ends. The turn in the line is held from ``start`` to ``close``.
    ``client``: who asked (``clients.py``)."""

    def __init__(
        self,
        service: Service,
        request: SpeechRequest,
        stopped: threading.Event,
        client: str | None = None,
    ):
        self.service, self.request, self.client = service, request, client
        self.stopped = stopped  # the client went away: the synthesis stops at its next step
        self.ahead = 0  # requests ahead in the line when this one arrived
        self._stack = contextlib.ExitStack()
        self._pieces: Iterator | None = None
        self._first = None
        self.kept: str | None = None  # the id of this result's voice (Service.results)
        self.load_seconds: float | None = None  # the model's load, where this request waited for it
        self.started = False  # its first piece is made: the response's end counts it
        self._counted = False
        self.body = self._body()  # runs when the response sends it

    def start(self) -> None:
        request = self.request
        models = self.service.models
        loading = request.precision not in models.loaded  # first use, or freed while idle
        try:
            self._pieces = self.service.speak(
                request.precision,
                request.synthesis,
                sentences=request.sentences,
                keep=True,
                on_wait=self._waiting,
                should_stop=self.stopped.is_set,
                client=self.client,
            )
            self._stack.callback(self._pieces.close)  # the turn goes back with it
            self._first = next(self._pieces)
            if loading:
                self.load_seconds = models.load_seconds.get(request.precision)
            self.kept = self._first.metadata["kept"]  # its voice, to keep by this id
            self.started = True
        except BaseException as exc:
            self._stack.close()
            raise api_error(exc) from exc

    def _waiting(self, ahead: int) -> None:
        self.ahead = ahead

    def _body(self) -> Iterator[bytes]:
        """The response's bytes as the pieces come (one piece: a whole file; several: streamed);
        with ``captions``, one JSON object at the end (server-sent events: in the done event)."""
        request, sse = self.request, self.request.sse
        whole = request.captions and not sse  # one JSON object: the audio as one file
        error: BaseException | None = Cancelled("the client went away")  # until it is all sent
        try:
            writer, placed, words, at = None, [], [] if request.words else None, 0
            for piece in self._all_pieces():
                if writer is None:
                    streamed = piece.metadata["pieces_in_request"] > 1 and not whole
                    writer = AudioWriter(request.response_format, piece.sample_rate, streamed)
                placed += [caption.moved(at) for caption in piece.captions]
                data = writer.write(piece.waveform)
                yield from (() if whole else framed(data, sse))
                if words is not None:  # once its audio is sent: never before the first audio
                    words += self._words(piece, at / piece.sample_rate)
                at += piece.waveform.shape[-1]
            data = writer.close()
            if whole:
                yield captioned(data, request.response_format, writer.sample_rate, placed, words)
                error = None
                return
            yield from framed(data, sse)
            if sse:
                done = {
                    "type": "speech.audio.done",
                    "usage": {
                        "input_tokens": len(request.synthesis.text),
                        "output_tokens": 0,
                        "total_tokens": len(request.synthesis.text),
                    },
                }
                if request.captions:
                    done["captions"] = captions.as_json(placed)
                if words is not None:
                    done["words"] = [w.as_dict() for w in words]
                yield sse_event(done)
            error = None
        except Cancelled as exc:
            error = exc
            logger.info("a /v1/audio/speech client went away; its synthesis stopped")
        except Exception as exc:  # noqa: BLE001 - the status is sent; the stream ends early and the log says why
            error = exc
            logger.error("/v1/audio/speech failed after its first piece: %s", exc)
            if sse:
                yield sse_event({"type": "error", "error": {"message": api_error(exc).message}})
        finally:
            self._stack.close()
            self._ended(error)

    def _words(self, piece, seconds: float) -> list:
        """A piece's words (``align.speech_words``) in the whole answer's seconds."""
        from omnivoice_rt.align import speech_words

        synthesis = self.request.synthesis
        language = getattr(synthesis, "language", None)  # a script's turns: each script's own
        found = speech_words(piece.waveform, piece.sample_rate, piece.captions, language)
        return [w.moved(seconds) for w in found]

    def _ended(self, error: BaseException | None) -> None:
        """Count this request's end, once (``Metrics.ended``)."""
        if not self._counted:
            self._counted = True
            self.service.metrics.ended("openai", error)

    def _all_pieces(self) -> Iterator:
        yield self._first
        yield from self._pieces

    def close(self) -> None:
        """End the job: stop the synthesis and give the turn back. Called when the response ends,
        finished or not; a piece being made in another thread is waited for (it stops at its next
        step)."""
        self.stopped.set()
        closed(self.body)  # its finally gives the turn back
        self._stack.close()  # for a body never started (the client left before the first byte)
        if self.started:  # else its refusal was counted as it was raised
            self._ended(Cancelled("the client went away before the first byte"))


class SpeechResponse(StreamingResponse):
    """The audio of a ``SpeechJob``, streamed; the job is closed when the response ends, however it
    ends (sent, client gone, server stopping), so its turn in the line is never left held."""

    def __init__(self, job: SpeechJob):
        request = job.request
        media_type = "text/event-stream" if request.sse else FORMATS[request.response_format][0]
        media_type = "application/json" if request.captions and not request.sse else media_type
        super().__init__(
            job.body,
            media_type=media_type,
            headers={
                "X-Seed": str(request.synthesis.seed),
                "X-Queue-Ahead": str(job.ahead),
                "X-Text-Normalized": str(request.synthesis.normalized).lower(),
                # POST /v1/audio/voices {"name", "result": this} keeps this result's voice
                **({"X-Voice-Result": job.kept} if job.kept else {}),
                # the seconds this request waited for the model to load (first use, or --idle-unload)
                **(
                    {"X-Model-Load-Seconds": f"{job.load_seconds:.2f}"}
                    if job.load_seconds is not None
                    else {}
                ),
            },
        )
        self.job = job

    async def __call__(self, scope, receive, send) -> None:
        async def send_in_time(message) -> None:
            with anyio.fail_after(SEND_TIMEOUT_S):
                await send(message)

        try:
            # a client gone mid-answer stops the piece being made
            async with watching(receive, self.job.stopped):
                await super().__call__(scope, receive, send_in_time)
        except TimeoutError:  # it stopped reading: its turn in the line goes to the next
            logger.info(
                "a /v1/audio/speech client read nothing for %g s; its answer stopped",
                SEND_TIMEOUT_S,
            )
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self.job.close)


class SameSiteWrites:
    """ASGI middleware: a browser's request to ``/v1`` that would change something (speech made,
    a voice added or removed) sent from another site's page is refused (403): a page cannot make
    its visitors' browsers use a server on their network. Browsers say where a request comes
    from (``Sec-Fetch-Site``, else ``Origin``); other clients send neither and pass."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if (
            scope["type"] == "http"
            and scope["path"].startswith("/v1/")
            and scope["method"] not in ("GET", "HEAD", "OPTIONS")
            and cross_site(dict(scope["headers"]))
        ):
            refusal = ApiError(
                403,
                "Requests from another site's page are refused here; call this server from its "
                "own page or from a program.",
                code="cross_site_request",
                kind="permission_error",
            )
            await refusal.response()(scope, receive, send)
            return
        await self.app(scope, receive, send)


def cross_site(headers: dict[bytes, bytes]) -> bool:
    """Whether a browser sent the request from another site's page."""
    fetch_site = headers.get(b"sec-fetch-site")
    if fetch_site is not None:
        return fetch_site == b"cross-site"
    origin = headers.get(b"origin")
    if origin is None:
        return False
    host = urlsplit(origin.decode("latin-1")).netloc.encode("latin-1")
    return host not in (headers.get(b"host"), headers.get(b"x-forwarded-host"))  # behind a proxy


@contextlib.asynccontextmanager
async def watching(receive, stopped: threading.Event):
    """For the block: ``stopped`` is set as soon as the client disconnects (ASGI's
    ``http.disconnect``), so a synthesis running in a thread, or waiting in line, stops."""

    async def watch() -> None:
        try:
            while (await receive())["type"] != "http.disconnect":
                pass
        except Exception:  # noqa: BLE001 - a connection that cannot be read is a client gone
            logger.info("reading a client's connection failed; taking it as gone")
        stopped.set()

    failure = None
    async with anyio.create_task_group() as group:
        group.start_soon(watch)
        try:
            yield
        except Exception as exc:  # noqa: BLE001 - raised below, as itself rather than in an ExceptionGroup
            failure = exc
        finally:
            group.cancel_scope.cancel()
    if failure is not None:
        raise failure


async def read_json(request: Request, json_only: bool = False):
    """The body as JSON, read up to ``MAX_BODY_BYTES``; ``json_only``: only as
    ``application/json`` (which a browser does not send across sites without asking first)."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if json_only and kind != "application/json":
        raise ApiError(
            415,
            "Send the body as JSON, with the header 'Content-Type: application/json'.",
            code="unsupported_media_type",
        )
    data = bytearray()
    try:
        with anyio.fail_after(BODY_TIMEOUT_S):
            async for chunk in request.stream():
                data += chunk
                if len(data) > MAX_BODY_BYTES:
                    raise ApiError(
                        413,
                        f"The request body is over {MAX_BODY_BYTES >> 10} kB; 'input' takes up to 10,000 characters.",
                    )
    except ClientDisconnect:  # it left while sending: nobody reads the answer
        raise ApiError(400, "The client went away while sending its body.") from None
    except TimeoutError:
        raise ApiError(
            408, f"The request body took over {BODY_TIMEOUT_S:g} s to arrive.", code="timeout"
        ) from None
    try:
        return json.loads(data)
    except RecursionError:
        raise ApiError(400, "The body is not valid JSON here: it is nested too deeply.") from None
    except ValueError as exc:
        raise ApiError(400, f"The body is not valid JSON: {exc}.") from exc


def _speakers(body: dict, script: bool) -> dict[str, str]:
    """The body's ``speakers`` (beyond OpenAI's): each speaker's name -> its voice, checked
    (``dialogue.checked_speakers``), and only with a ``script``."""
    if body.get("speakers") is not None and not script:
        raise ApiError(
            400,
            "'speakers' gives a script's voices: send 'script': true with 'Name: text' lines, "
            "or [voice:NAME] tags in 'input'.",
            param="speakers",
        )
    try:
        return dialogue.checked_speakers(body.get("speakers"))
    except ScriptError as exc:
        raise ApiError(400, f"{exc}.", param="speakers") from exc


def _words_asked(body: dict) -> bool:
    """``"words": true``: the answer's captions carry each word's place; a 400 naming the extra
    where the process's aligner is eSpeak NG and it is missing, before anything is made."""
    if not optional(body, "words", bool):
        return False
    from omnivoice_rt.align import espeak, load_aligner

    try:
        load_aligner()
    except espeak.EspeakMissing as exc:
        raise ApiError(400, f"{exc}.", param="words") from exc
    return True


def optional(body: dict, field: str, kind: type):
    """``body[field]`` where it is given (not null) and of ``kind`` (a string, or true or false),
    None where it is not given; ``ApiError`` naming the field where it is of another kind."""
    value = body.get(field)
    if value is not None and not isinstance(value, kind):
        raise ApiError(
            400,
            f"'{field}' must be {KINDS['bool' if kind is bool else 'text']}, got "
            f"{type(value).__name__}.",
            param=field,
        )
    return value


def framed(data: bytes, sse: bool) -> Iterator[bytes]:
    """Audio bytes as they go out: raw, or as a server-sent ``speech.audio.delta`` event."""
    if data:
        yield (
            sse_event({"type": "speech.audio.delta", "audio": base64.b64encode(data).decode()})
            if sse
            else data
        )


def captioned(
    audio: bytes, response_format: str, sample_rate: int, placed: list, words: list | None = None
) -> bytes:
    """The answer to ``"captions": true``: the audio file in base64 and its captions (each
    piece's), with ``"words": true`` each word's too, as Kokoro-FastAPI's captioned speech
    carries its timestamps (a word not found: null times)."""
    answer = {
        "audio": base64.b64encode(audio).decode(),
        "audio_format": response_format,
        "sample_rate": sample_rate,
        "captions": captions.as_json(placed),
    }
    if words is not None:
        answer["words"] = [w.as_dict() for w in words]
    return json.dumps(answer).encode()


def sse_event(payload: dict) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()
