"""The Wyoming door, for Home Assistant: ``python app.py --wyoming tcp://0.0.0.0:10200``.

Served with the ``wyoming`` package's own server (``AsyncServer``) on an event loop of its own, in
the server's one line with the other doors, under the same limits, preset and defaults:

- ``describe`` -> ``info``: one TTS program whose voices are the auto voice, the designed voices
  and the voice library's (read again at every describe);
- ``synthesize`` -> ``audio-start``, ``audio-chunk``..., ``audio-stop``: 16-bit mono PCM at 24 kHz,
  sentence by sentence as they are made;
- streamed text (``synthesize-start``, ``synthesize-chunk``..., ``synthesize-stop``): each sentence
  is spoken as soon as it is complete, the later ones in the first one's voice (each as long as
  it would be alone, not at the first one's pace); then
  ``synthesize-stopped``. A stream is a dialogue script where its start's data says
  ``"script": true`` ("Name:" lines) or its text has ``[voice:NAME]`` tags: each sentence in
  its speaker's voice (the library's of that name), each speaker one voice across the stream,
  a pause before each turn but the first. The ``synthesize`` sent inside a stream (for older
  servers) is ignored;
- bad input: an ``error`` event with a code and the runtime's one-line message; the connection
  stays usable (except after a frame that cannot be read: then it is closed). A client that goes
  away stops its synthesis at the next step and frees the line;
- bounded: at most ``max_connections`` at once (a newcomer past them gets an ``error`` event,
  code ``busy``, and is closed), at most ``MAX_QUEUED_EVENTS`` events read ahead of the answers
  (a stream's chunks that come while a sentence is made join into one: ``Connection.joined``),
  and a connection that sends nothing for ``idle_timeout`` seconds while nothing is being made
  for it is closed (code ``idle``).

Beyond the protocol, a ``synthesize`` or ``synthesize-start`` may carry any of the request's
options by its name in its data (``request.DOOR_FIELDS``: ``seed`` for the same audio again,
``preset``, ``speed``, ``language``...), each checked by its declaration.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from urllib.parse import urlparse

import numpy as np
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Attribution, Describe, Info, TtsProgram, TtsVoice
from wyoming.ping import Ping, Pong
from wyoming.server import AsyncEventHandler, AsyncServer
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
)

from omnivoice_rt import __version__, dialogue
from omnivoice_rt.audio.formats import pcm16
from omnivoice_rt.dialogue import TURN_PAUSE_S
from omnivoice_rt.errors import ArtifactError, Busy, Cancelled, Stopping, SynthesisError
from omnivoice_rt.limits import (
    MAX_SPEAKERS,
    MAX_TEXT_CHARS,
    MAX_WYOMING_CONNECTIONS,
    SEND_TIMEOUT_S,
    WYOMING_IDLE_S,
)
from omnivoice_rt.request import (
    DOOR_NORMALIZE_TEXT,
    DOOR_PRESET,
    OPTIONS,
    OptionError,
    Request,
    check_text,
    door_fields,
)
from omnivoice_rt.server.clients import client_key
from omnivoice_rt.server.connections import closed_connection, refused_connection
from omnivoice_rt.server.serving import Service, closed, resolve_seed
from omnivoice_rt.server.turns import Listener
from omnivoice_rt.speakers import merged_voices
from omnivoice_rt.text.chunks import ArrivingSentences
from omnivoice_rt.text.durations import estimate_frames
from omnivoice_rt.text.languages import LANG_IDS, TAG_ALIASES, resolve_language
from omnivoice_rt.text.markup import is_ssml, pause_seconds
from omnivoice_rt.text.script import ScriptError, TurnReader, has_tags
from omnivoice_rt.voice_prompt import VoicePrompt
from omnivoice_rt.voices import VoiceLibrary

logger = logging.getLogger(__name__)

PROGRAM = "omnivoice-onnx"
ATTRIBUTION = Attribution(name="k2-fsa", url="https://github.com/k2-fsa/OmniVoice")
SAMPLES_PER_CHUNK = 1024  # audio-chunk events of 1024 samples, as wyoming-piper sends them
MAX_FRAME_BYTES = 256 << 10  # an event's data and payload: a text is at most 40 kB of JSON
# events read ahead of the one being answered: with the frame bound, 32 MB a connection at most
MAX_QUEUED_EVENTS = 64
# Languages advertised (BCP-47): OmniVoice's codes that have a two-letter form, the two-letter tags
# of those it knows by a three-letter code only, and the widely spoken ones with no two-letter tag.
# A request may name any language the runtime takes (a code, a name, a tag such as en-US).
DEPRECATED_TAGS = {"iw", "in", "ji"}
EXTRA_LANGUAGES = ("yue",)  # Cantonese
LANGUAGES = sorted(
    {code for code in LANG_IDS if len(code) == 2}
    | {tag for tag, code in TAG_ALIASES.items() if code in LANG_IDS and tag not in DEPRECATED_TAGS}
    | {code for code in EXTRA_LANGUAGES if code in LANG_IDS}
)


class WyomingError(Exception):
    """A request refused: sent as an ``error`` event with ``code``."""

    def __init__(self, code: str, text: str):
        super().__init__(text)
        self.code, self.text = code, text


class BadFrame(Exception):
    """Bytes that are not a Wyoming event: the connection cannot go on."""


def error_event(exc: Exception) -> Event:
    """The runtime's error vocabulary as a Wyoming ``error`` event."""
    if isinstance(exc, WyomingError):
        return Error(text=exc.text, code=exc.code).event()
    if isinstance(exc, Stopping):
        return Error(text=str(exc), code="stopping").event()
    if isinstance(exc, Busy):
        return Error(text=str(exc), code="busy").event()
    if isinstance(exc, ArtifactError):
        return Error(text=f"The model cannot be loaded: {exc}", code="model-unavailable").event()
    if isinstance(exc, SynthesisError):
        return Error(text=str(exc), code="synthesis-failed").event()
    if isinstance(exc, (ValueError, FileNotFoundError)):
        return Error(text=str(exc), code="bad-request").event()
    logger.error("the Wyoming door failed on a request", exc_info=exc)
    return Error(
        text="The server failed on this request; its log has the detail.", code="server-error"
    ).event()


def check_uri(uri: str, zeroconf: str | None = None) -> None:
    """``ValueError`` naming the fix unless ``uri`` is an address the door can serve."""
    parsed = urlparse(uri)
    try:
        port = parsed.port
    except ValueError:
        port = None
    if parsed.scheme not in ("tcp", "unix") or (
        parsed.scheme == "tcp" and (not parsed.hostname or port is None)
    ):
        raise ValueError(
            f"--wyoming {uri!r}: give an address such as tcp://0.0.0.0:10200 (Home Assistant's "
            "usual port) or unix:///path/to/socket"
        )
    if zeroconf and parsed.scheme != "tcp":
        raise ValueError("--wyoming-zeroconf needs a tcp:// address")


class WyomingDoor:
    """Serves ``uri`` (tcp://HOST:PORT or unix://PATH) over ``service`` and ``library``; with
    ``zeroconf`` (a name), advertised over mDNS for Home Assistant's discovery; at most
    ``max_connections`` at once, each closed after ``idle_timeout`` seconds without an event."""

    def __init__(
        self,
        service: Service,
        library: VoiceLibrary,
        uri: str,
        zeroconf: str | None = None,
        max_connections: int = MAX_WYOMING_CONNECTIONS,
        idle_timeout: float = WYOMING_IDLE_S,
    ):
        check_uri(uri, zeroconf)
        self.service, self.library, self.uri, self.zeroconf = service, library, uri, zeroconf
        self.max_connections, self.idle_timeout = max_connections, idle_timeout
        self.connections = 0  # open now (counted on the door's event loop)
        # Waiting for a turn holds a thread: as many as can wait, and the ones being served.
        self.executor = ThreadPoolExecutor(
            service.line.max_waiting + service.line.slots + 1, thread_name_prefix="wyoming"
        )
        self.ready = threading.Event()  # listening
        self.server: AsyncServer | None = None

    def start(self) -> threading.Thread:
        """Serve in the background, on an event loop of its own; returns once it listens."""
        failure: list[BaseException] = []

        def run() -> None:
            try:
                asyncio.run(self.serve())
            except BaseException as exc:  # noqa: BLE001 - reported to start(), then logged
                failure.append(exc)
                self.ready.set()
                logger.error("the Wyoming door stopped: %s", exc)

        thread = threading.Thread(target=run, name="wyoming", daemon=True)
        thread.start()
        self.ready.wait(30)
        if failure:
            raise ValueError(f"--wyoming {self.uri}: cannot serve there: {failure[0]}")
        return thread

    async def serve(self) -> None:
        self.server = AsyncServer.from_uri(self.uri)
        await self.server.start(partial(Connection, self))
        logger.info("Wyoming door listening on %s", self.uri)
        if self.zeroconf:
            await self.advertise(self.server.host, self.server.port)
        self.ready.set()
        await asyncio.Event().wait()  # until the process ends

    async def advertise(self, host: str, port: int) -> None:
        try:
            from wyoming.zeroconf import HomeAssistantZeroconf

            announced = None if host in ("0.0.0.0", "", "::") else host
            await HomeAssistantZeroconf(
                port=port, name=self.zeroconf, host=announced
            ).register_server()
            logger.info("Wyoming door advertised over zeroconf as %r", self.zeroconf)
        except Exception as exc:  # noqa: BLE001 - the door works without it; Home Assistant can be told the address
            logger.warning("zeroconf advertisement failed (%s); add the server by its address", exc)

    def info(self) -> Info:
        voices = [
            TtsVoice(
                name=entry.name,
                description=describe_voice(entry),
                attribution=ATTRIBUTION,
                installed=True,
                version=None,
                languages=[as_tag(entry.language)] if entry.language else list(LANGUAGES),
            )
            for entry in self.library.entries()
        ]
        program = TtsProgram(
            name=PROGRAM,
            description="OmniVoice text to speech on ONNX Runtime (no PyTorch)",
            attribution=ATTRIBUTION,
            installed=True,
            version=__version__,
            voices=voices,
            supports_synthesize_streaming=True,
        )
        return Info(tts=[program])


# OmniVoice's codes of the languages advertised under another tag (arb -> ar)
TAG_OF_CODE = {code: tag for tag, code in TAG_ALIASES.items() if tag not in DEPRECATED_TAGS}


def as_tag(code: str) -> str:
    """A language code as Home Assistant's BCP-47 tag (``arb`` -> ``ar``)."""
    return TAG_OF_CODE.get(code, code)


def describe_voice(entry) -> str:
    if entry.kind == "auto":
        return "OmniVoice chooses a voice"
    if entry.kind == "design":
        return f"designed: {entry.instruct}"
    return f"cloned from {entry.duration:g} s of speech"


class Connection(AsyncEventHandler):
    """One client. Its events are read as they come (so a client that leaves is noticed at once)
    and answered one after another, in order, by ``answer``."""

    def __init__(self, door: WyomingDoor, reader, writer):
        super().__init__(reader, writer)
        self.door = door
        self.loop = asyncio.get_running_loop()
        self.stopped = threading.Event()  # the client went away: its synthesis stops
        self.events: asyncio.Queue = asyncio.Queue()
        self.queued_chunk: Event | None = None  # the last event queued, a chunk not yet taken
        self.stream: dict | None = None  # a text stream under way: voice, options, text so far
        self.answering = False  # an event is being answered (its speech made)
        self.heard = self.loop.time()  # when the client last sent an event, or was last answered
        self.frame_rate: float | None = None  # the model's codes a second, read as it speaks
        # what the client was sent and has played: its sentences are one listener's (turns.py)
        self.listener = Listener()
        peer = writer.get_extra_info("peername")  # (host, port...), or a Unix socket's name
        self.client = client_key(peer[0] if isinstance(peer, tuple) and peer else None)

    async def handle_event(self, event: Event) -> bool:  # the base class's; run() is ours
        return True

    async def write_event(self, event: Event) -> None:
        """Send ``event``; a client that reads nothing for ``SEND_TIMEOUT_S`` is taken as gone
        (its synthesis stops and its turn in the line goes to the next)."""
        try:
            await asyncio.wait_for(super().write_event(event), SEND_TIMEOUT_S)
        except asyncio.TimeoutError:
            self.stopped.set()
            self.writer.close()
            raise ConnectionError(f"the client read nothing for {SEND_TIMEOUT_S:g} s") from None

    async def run(self) -> None:
        door = self.door
        if door.connections >= door.max_connections:
            refused_connection("Wyoming", door.max_connections)
            with contextlib.suppress(Exception):
                busy = "The server has too many connections open; try again in a minute."
                await self.write_event(Error(text=busy, code="busy").event())
            self.writer.close()
            return
        door.connections += 1
        try:
            await self.serve()
        finally:
            door.connections -= 1

    async def serve(self) -> None:
        worker = asyncio.create_task(self.answer())
        watchdog = asyncio.create_task(self.close_when_idle())
        try:
            while True:
                event = await read_event(self.reader)
                if event is None:
                    break
                self.heard = self.loop.time()
                if self.joined(event):
                    continue
                if self.events.qsize() >= MAX_QUEUED_EVENTS:
                    raise BadFrame(
                        f"more than {MAX_QUEUED_EVENTS} events sent ahead of the answers"
                    )
                self.events.put_nowait(event)
                self.queued_chunk = event if _text_chunk(event) else None
        except BadFrame as exc:
            with contextlib.suppress(Exception):
                await self.write_event(
                    Error(text=f"Not a Wyoming event: {exc}", code="bad-frame").event()
                )
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self.stopped.set()  # whatever is being made stops at its next step
            self.events.put_nowait(None)
            watchdog.cancel()
            with contextlib.suppress(BaseException):
                await worker
            self.writer.close()

    def joined(self, event: Event) -> bool:
        """Whether ``event``, a stream's chunk, joined the chunk queued before it and not yet
        taken: one text, read as the two would be (a stream reads any cut of its text alike,
        ``text.chunks.ArrivingSentences``), so that an answer streamed a word a chunk while a
        sentence is made never counts as events sent ahead. Kept to ``MAX_TEXT_CHARS`` and one
        more: past that the stream is refused as too long anyway."""
        queued = self.queued_chunk
        if queued is None or not _text_chunk(event):
            return False
        queued.data["text"] = (queued.data["text"] + event.data["text"])[: MAX_TEXT_CHARS + 1]
        return True

    async def close_when_idle(self) -> None:
        """Close the connection once the client sent nothing for ``idle_timeout`` seconds while
        nothing was being answered (reading then ends, and ``serve`` with it)."""
        timeout = self.door.idle_timeout
        while True:
            await asyncio.sleep(max(0.05, timeout - (self.loop.time() - self.heard)))
            if self.answering or not self.events.empty():
                self.heard = self.loop.time()
            elif self.loop.time() - self.heard >= timeout:
                closed_connection("Wyoming", f"nothing was sent for {timeout:g} s")
                with contextlib.suppress(Exception):
                    idle = f"Nothing was sent for {timeout:g} s; the connection is closed."
                    await self.write_event(Error(text=idle, code="idle").event())
                self.writer.close()
                return

    async def answer(self) -> None:
        while (event := await self.events.get()) is not None and not self.stopped.is_set():
            if event is self.queued_chunk:  # taken: a later chunk is queued on its own
                self.queued_chunk = None
            self.answering = True
            metrics = self.door.service.metrics
            try:
                await self.handle(event)
            except Cancelled as exc:
                metrics.ended("wyoming", exc)
                logger.info("a Wyoming client went away; its synthesis stopped")
                return
            except Exception as exc:  # noqa: BLE001 - every refusal in the protocol's words
                if isinstance(exc, ConnectionError) or self.writer.is_closing():
                    self.stopped.set()  # the client is gone: nobody to tell
                    metrics.ended("wyoming", Cancelled("the client went away"))
                    logger.info("a Wyoming client went away; its answer stopped")
                    return
                await self.refused(exc)
            finally:
                self.answering, self.heard = False, self.loop.time()

    async def refused(self, exc: Exception) -> None:
        """An answer (or a stream's sentence) refused: counted, and told as an ``error``."""
        self.door.service.metrics.ended("wyoming", exc)
        await self.write_event(error_event(exc))

    # ------------------------------------------------------------------ events

    async def handle(self, event: Event) -> None:
        data = event.data if isinstance(event.data, dict) else {}
        if Describe.is_type(event.type):
            info = await self.in_thread(self.door.info)
            await self.write_event(info.event())
        elif Ping.is_type(event.type):
            await self.write_event(Pong(text=data.get("text")).event())
        elif Synthesize.is_type(event.type):
            if self.stream is not None:  # sent inside a stream for older servers: ignored
                return
            voice, options, pause = self.voice(data), options_of(data), turn_pause_of(data)
            script = data.get("script") is True  # "Name:" lines; [voice:NAME] tags always
            given = speakers_of(data)
            await self.speak(text_of(data), voice, options, script, turn_pause=pause, given=given)
        elif SynthesizeStart.is_type(event.type):
            self.stream = None  # a start inside a stream begins a new one
            voice, options, pause = self.voice(data), options_of(data), turn_pause_of(data)
            self.stream = {
                "voices": {None: voice},  # each speaker's, a voice kept from its first sentence
                "given": speakers_of(data),  # the voices the start gives its speakers by name
                "options": options,
                "reader": TurnReader(named_lines=data.get("script") is True),
                "script": data.get("script") is True,
                "document": None,  # an SSML stream's text so far: spoken whole at its end
                "begun": False,  # whether its start told whether it is SSML
                "head": "",  # its text until then
                "speaker": None,  # whose turn it is
                "text": ArrivingSentences(),  # the turn's text not yet spoken
                "said": 0,
                "turn_pause": pause,
                "pause": 0.0,  # silence before the next sentence: a turn's, but the first's
                "said_any": False,
            }
        elif SynthesizeChunk.is_type(event.type):
            stream = self.streaming("synthesize-chunk")
            text = data.get("text")
            if not isinstance(text, str):
                raise WyomingError("bad-event", "synthesize-chunk needs 'text', a string.")
            room = MAX_TEXT_CHARS - stream["said"]
            stream["said"] += len(text)
            if len(text) > room:  # what fits is read first, as chunks of its own would have been
                await self.stream_text(stream, text[:room])
                self.stream = None
                raise WyomingError(
                    "text-too-long",
                    f"The streamed text is over {MAX_TEXT_CHARS} characters; the stream is "
                    "dropped. Send shorter answers.",
                )
            await self.stream_text(stream, text)
        elif SynthesizeStop.is_type(event.type):
            stream = self.streaming("synthesize-stop")
            try:
                await self.stream_text(stream, "", end=True)
            finally:  # ended, spoken or not: the next event is not this stream's
                self.stream = None
            await self.write_event(SynthesizeStopped().event())
        else:
            raise WyomingError(
                "unknown-event",
                f"This server does not take {event.type[:40]!r} events; it takes describe, "
                "synthesize, synthesize-start, synthesize-chunk, synthesize-stop and ping.",
            )

    def streaming(self, what: str) -> dict:
        if self.stream is None:
            raise WyomingError("no-stream", f"{what} came without a synthesize-start before it.")
        return self.stream

    def voice(self, data: dict) -> dict:
        """A request's voice options (``voice`` of the event's data: name, language)."""
        voice = data.get("voice") or {}
        if not isinstance(voice, dict):
            raise WyomingError("bad-event", "'voice' must be an object: {'name', 'language'}.")
        name, language = voice.get("name") or "auto", voice.get("language")
        try:
            options = self.door.library.options(name)
        except ValueError as exc:
            raise WyomingError("unknown-voice", str(exc)) from None
        if language is not None:
            if not isinstance(language, str):
                raise WyomingError(
                    "bad-event", "the voice's 'language' must be a string such as 'en-US'."
                )
            options["language"] = resolve_language(language) or options.get("language")
        return options

    # ------------------------------------------------------------------ speech

    async def stream_text(self, stream: dict, text: str, end: bool = False) -> None:
        """A stream's text as it comes: each sentence spoken once it is complete, in the voice
        of the speaker whose turn it is (a script's: "Name:" lines where the start said
        ``script``, ``[voice:NAME]`` tags always; ``text.script.TurnReader``). An SSML document
        (``markup.is_ssml``: its first six characters tell) is read whole at the stream's end,
        as a synthesize event's text is."""
        if not stream["begun"]:
            stream["head"] += text
            head = stream["head"].lstrip()
            if not (end or len(head) >= len("<speak") or head[:1] not in ("", "<")):
                return  # it may yet be "<speak"
            stream["begun"], text = True, stream["head"]
            if is_ssml(head):
                stream["document"] = ""
        if stream["document"] is not None:
            stream["document"] += text
            if end:
                voice, options = stream["voices"][None], stream["options"]
                pause = stream["turn_pause"]
                given = stream["given"]
                await self.speak(
                    stream["document"],
                    voice,
                    options,
                    stream["script"],
                    turn_pause=pause,
                    given=given,
                )
            return
        try:
            parts = stream["reader"].feed(text, end)
        except ScriptError as exc:
            self.stream = None
            raise WyomingError("bad-request", f"{exc}; the stream is dropped.") from None
        for part in [*parts, None] if end else parts:
            if part is not None and part.text:  # the turn's words
                sentences = stream["text"].feed(part.text)
            else:  # a turn begins, or the stream ends: the last turn's rest is said
                sentences, stream["text"] = [stream["text"].rest], ArrivingSentences()
            for sentence in filter(str.strip, sentences):
                await self.speak_told(stream, sentence)
            if part is not None and not part.text:
                self.turn_begins(stream, part)

    def turn_begins(self, stream: dict, turn) -> None:
        """A stream's speaker changes: the library's voice of that name, the stream's options
        beneath it; a pause before its first sentence (but the stream's first)."""
        voices = stream["voices"]
        if turn.speaker not in voices:
            try:
                mine = self.speaker_voice(stream["given"], turn.speaker)
            except ValueError as exc:
                self.stream = None
                raise WyomingError(
                    "unknown-voice",
                    f"line {turn.line}: no voice for speaker {turn.speaker!r}: {exc} The stream "
                    "is dropped.",
                ) from None
            if len(voices) > MAX_SPEAKERS:  # the default voice and MAX_SPEAKERS named
                self.stream = None
                raise WyomingError(
                    "bad-request",
                    f"line {turn.line}: {turn.speaker!r} is speaker {len(voices)}; a script has "
                    f"at most {MAX_SPEAKERS} speakers. The stream is dropped.",
                )
            voices[turn.speaker] = merged_voices(voices[None], {turn.speaker: mine})[turn.speaker]
        if stream["said_any"]:  # every turn but the first, as dialogue.stream's
            stream["pause"] = stream["turn_pause"]
        stream["speaker"] = turn.speaker

    def speaker_voice(self, given: dict, name: str) -> dict:
        """A stream's speaker's voice: the one its start gives that name (any case), else the
        library's voice of that name; ``ValueError`` where neither is."""
        key = dialogue.speaker_key(given, name)
        if key is not None:
            return dialogue.given_voice(self.door.library, name, given[key])
        return dialogue.library_voice(self.door.library, name)

    async def speak_told(self, stream: dict, sentence: str) -> None:
        """One sentence of a stream; where it cannot be spoken (no letters, the line full, its
        synthesis failed) the client is told (an ``error`` event) and the stream goes on with
        the next, so that no sentence of a chunk is lost with the one before it."""
        try:
            await self.speak_streamed(stream, sentence)
        except (Cancelled, Stopping, ConnectionError):
            raise
        except Exception as exc:  # noqa: BLE001 - told in the protocol's words, as answer() does
            if self.writer.is_closing():
                raise
            await self.refused(exc)

    async def speak_streamed(self, stream: dict, sentence: str) -> None:
        """One sentence of a stream, in its speaker's voice; a speaker's first sentence's voice
        becomes the voice of its later ones (where the voice is not a reference's already), as
        a long text's pieces take the first's."""
        speaker = stream["speaker"]
        voice, lead = stream["voices"][speaker], stream["pause"]
        first = await self.speak(sentence, voice, stream["options"], script=None, lead=lead)
        stream["said_any"], stream["pause"] = True, 0.0
        if first is not None and "voice_prompt" not in voice:
            try:  # the first piece's codes, text and loudness, as the library keeps a voice
                prompt = first.voice_prompt()
            except ValueError as exc:  # a first sentence too long to be a reference
                logger.info("a Wyoming stream keeps no voice from its first sentence: %s", exc)
                return
            stream["voices"][speaker] = {
                **voice,
                "voice_prompt": prompt,
                "frame_rate": self.frame_rate,
            }

    async def speak(
        self,
        text: str,
        voice: dict,
        options: dict,
        script: bool | None = False,
        lead: float = 0.0,
        turn_pause: float = TURN_PAUSE_S,
        given: dict | None = None,
    ):
        """audio-start, ``lead`` seconds of silence, the audio as it is made, audio-stop; returns
        the first piece. A dialogue script (``script``: "Name:" lines, or ``[voice:NAME]`` tags;
        None: never a script) speaks each name in the library's voice of that name, ``voice``
        the default speaker's (``given``: the voices the event gives speakers by name), a turn
        a piece, ``turn_pause`` seconds between turns."""
        reader = self.door.service.normalizer(self.stopped.is_set)
        if script or script is not None and has_tags(text):
            made = (text, voice, options, script, turn_pause, reader, given)
            request = await self.in_thread(self.script, *made)
        else:
            request = await self.in_thread(build_request, text, voice, options, reader)
        service = self.door.service
        pieces = service.speak(
            service.models.default,
            request,
            sentences=True,
            should_stop=self.stopped.is_set,
            listener=self.listener,
            client=self.client,
        )
        first = None
        try:
            while (piece := await self.in_thread(next, pieces, None)) is not None:
                if first is None:
                    first = piece
                    # a stream's later sentences' lengths need it (build_request)
                    self.frame_rate = service.models.loaded[service.models.default].frame_rate
                    await self.write_event(
                        AudioStart(rate=piece.sample_rate, width=2, channels=1).event()
                    )
                waveform = piece.waveform
                if lead:  # a turn's pause, before its first sentence
                    silence = np.zeros(round(lead * piece.sample_rate), np.float32)
                    waveform, lead = np.concatenate([silence, waveform]), 0.0
                samples, step = pcm16(waveform).tobytes(), SAMPLES_PER_CHUNK * 2
                for offset in range(0, len(samples), step):
                    chunk = AudioChunk(
                        rate=piece.sample_rate,
                        width=2,
                        channels=1,
                        audio=samples[offset : offset + step],
                    )
                    await self.write_event(chunk.event())
            await self.write_event(AudioStop().event())
            self.door.service.metrics.ended("wyoming")
        except Exception:
            if first is not None and not self.writer.is_closing():  # the audio ends here
                with contextlib.suppress(Exception):
                    await self.write_event(AudioStop().event())
            raise
        finally:
            await self.in_thread(closed, pieces)  # the turn in the line goes back
        return first

    def script(
        self, text: str, voice: dict, options: dict, named_lines: bool, pause: float, reader, given
    ):
        """The checked script (a ``ScriptError`` is a bad-request event naming its line)."""
        return dialogue.prepare(
            text,
            {"normalize_text": DOOR_NORMALIZE_TEXT, **voice, **options},
            dialogue.library_speakers(self.door.library, given),
            named_lines,
            pause,
            request_of=lambda turn: Request.from_options(turn, DOOR_PRESET, normalizer=reader),
            limit=MAX_TEXT_CHARS,
        )

    async def in_thread(self, function, *args):
        return await self.loop.run_in_executor(self.door.executor, function, *args)


def build_request(text: str, voice: dict, options: dict, normalizer=None) -> Request:
    """The synthesis request, checked, its text read as words by ``normalizer`` (the server's
    worker: a moment for a long text); ``options``: the event's (:func:`options_of`)."""
    options = {
        "text": check_text(text),
        "normalize_text": DOOR_NORMALIZE_TEXT,
        "language": voice.get("language"),
        "instruct": voice.get("instruct"),
        **options,
    }
    prompt = voice.get("voice_prompt")  # a library voice's file, or a stream's first sentence
    if isinstance(prompt, str):
        options["voice_prompt"] = prompt
    request = Request.from_options(options, DOOR_PRESET, normalizer=normalizer)
    if isinstance(prompt, VoicePrompt) and request.duration is None:  # a stream's first sentence
        # Its length was upstream's estimate for it alone, which stretches a short sentence (under
        # 2 s); cloned, its pace would stretch every later one ("Good evening." made the next
        # sentence 1.8x as long). So each later one keeps the length it would have alone.
        frames = estimate_frames(request.spoken_text, None, None)
        # half a frame over: the plan takes int(duration * frame_rate) frames, and frames /
        # frame_rate * frame_rate can fall a hair short of frames (29 frames at 25 Hz gave 28)
        # its pauses ([pause:1s]) on top: the duration counts them
        duration = (frames + 0.5) / voice["frame_rate"] + pause_seconds(request.parts)
        request = request.with_prompt(prompt, duration=duration)
    return request


def _text_chunk(event: Event) -> bool:
    """Whether ``event`` is a ``synthesize-chunk`` with its text (a string)."""
    data = event.data
    return (
        SynthesizeChunk.is_type(event.type)
        and isinstance(data, dict)
        and isinstance(data.get("text"), str)
    )


def text_of(data: dict) -> str:
    text = data.get("text")
    if not isinstance(text, str):
        raise WyomingError("bad-event", "synthesize needs 'text', a string.")
    return text


def options_of(data: dict) -> dict:
    """The request's options the event's data names (beyond the protocol: ``DOOR_FIELDS``), each
    checked by its declaration, and its ``seed`` (drawn where it is not given)."""
    options = door_fields(data)
    try:
        for name, value in options.items():
            OPTIONS[name].check(name, value)
    except OptionError as exc:
        raise WyomingError("bad-event", f"{exc}.") from None
    seed = options.get("seed")
    return {**options, "seed": resolve_seed(seed, seed is None)}


def speakers_of(data: dict) -> dict[str, str]:
    """The voices the event's data gives a script's speakers by name (``"speakers": {"María":
    "female"}``: a voice of the library or a design), checked."""
    try:
        return dialogue.checked_speakers(data.get("speakers"))
    except ValueError as exc:
        raise WyomingError("bad-event", f"{exc}.") from None


def turn_pause_of(data: dict) -> float:
    """A script's silence between turns (``dialogue.TURN_PAUSE_S`` where the event's data does
    not give ``turn_pause``), checked."""
    try:
        return dialogue.checked_turn_pause(data.get("turn_pause", TURN_PAUSE_S))
    except OptionError as exc:
        raise WyomingError("bad-event", f"{exc}.") from None


async def read_event(reader: asyncio.StreamReader) -> Event | None:
    """The next event (None: the client closed), each part bounded; ``BadFrame`` for bytes that
    are not one (``wyoming.event.async_read_event`` reads unbounded and says nothing)."""
    try:
        line = await reader.readline()
    except ValueError:  # over the reader's line limit (64 kB)
        raise BadFrame("its header line is over 64 kB") from None
    if not line:
        return None
    try:
        header = json.loads(line)
    except RecursionError:
        raise BadFrame("its header line is nested too deeply") from None
    except ValueError:
        raise BadFrame("its header line is not JSON") from None
    if not isinstance(header, dict) or not isinstance(header.get("type"), str):
        raise BadFrame("its header is not an object with a 'type'")
    lengths = [header.get("data_length") or 0, header.get("payload_length") or 0]
    if any(not isinstance(n, int) or n < 0 or n > MAX_FRAME_BYTES for n in lengths):
        raise BadFrame(f"its data_length and payload_length must be 0 to {MAX_FRAME_BYTES} bytes")
    data = header.get("data") or {}
    if not isinstance(data, dict):
        raise BadFrame("its 'data' is not an object")
    if lengths[0]:
        try:
            extra = json.loads(await reader.readexactly(lengths[0]))
        except RecursionError:
            raise BadFrame("its data is nested too deeply") from None
        except ValueError:
            raise BadFrame("its data is not JSON") from None
        if not isinstance(extra, dict):
            raise BadFrame("its data is not an object")
        data.update(extra)
    payload = await reader.readexactly(lengths[1]) if lengths[1] else None
    return Event(type=header["type"], data=data, payload=payload)
