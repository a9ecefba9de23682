"""What the page's buttons, its ``gradio_client`` API and its MCP tools call: ``Handlers``, one
method per endpoint, whose signatures and docstrings are the endpoints' and the tools'."""

from __future__ import annotations

import functools
import inspect
import logging
import time
from collections.abc import Callable

import gradio as gr

from omnivoice_rt import dubbing
from omnivoice_rt.audio.formats import pcm16
from omnivoice_rt.request import door_request
from omnivoice_rt.server.page import options
from omnivoice_rt.server.page.shared import (
    ALIASES,
    LIBRARY_KEYED,
    abandoned,
    as_messages,
    caption_lines,
    captions_file,
    escaped,
    language_arg,
    page_cues,
    page_flag,
    page_request,
    prepared,
    prompt_file,
    refused,
    report_file,
    run_synthesis,
    stream_synthesis,
)
from omnivoice_rt.server.serving import DEFAULTS, Service
from omnivoice_rt.text.languages import check_string
from omnivoice_rt.voices import VoiceLibrary

logger = logging.getLogger(__name__)


def with_defaults(handler: Callable, **defaults) -> Callable:
    """``handler`` with the defaults of some parameters replaced: Gradio reads a handler's
    signature for its API's parameters and their defaults (the server's default precision)."""
    signature = inspect.signature(handler)
    parameters = [
        p.replace(default=defaults.get(p.name, p.default)) for p in signature.parameters.values()
    ]

    @functools.wraps(handler)
    def defaulted(*args, **kwargs):
        return handler(*args, **kwargs)

    defaulted.__signature__ = signature.replace(parameters=parameters)
    return defaulted


def counted(handler: Callable, metrics) -> Callable:
    """``handler`` (a function, or a generator function: the page's pieces) with each call's end
    counted as a request of the page's door (``Metrics.ended``); its signature kept for Gradio."""

    def end(exc: BaseException) -> BaseException:  # a message the page wrote itself: bad input
        plain = isinstance(exc, gr.Error) and exc.__cause__ is None
        return ValueError(str(exc)) if plain else exc

    if inspect.isgeneratorfunction(handler):

        @functools.wraps(handler)
        def pieces(*args, **kwargs):
            try:
                yield from handler(*args, **kwargs)
            except BaseException as exc:
                metrics.ended("page", end(exc))
                raise
            metrics.ended("page")

        return pieces

    @functools.wraps(handler)
    def whole(*args, **kwargs):
        try:
            result = handler(*args, **kwargs)
        except BaseException as exc:
            metrics.ended("page", end(exc))
            raise
        metrics.ended("page")
        return result

    return whole


SPEECH = (
    "The speech as a 24 kHz wav file, one line saying its length, time taken and seed, and its "
    "captions: an SRT file, one cue per spoken piece (its start, end and text, exact to the "
    "sample)."
)
# Each synthesis endpoint's summary and what it returns; its parameters are options.ENDPOINTS'.
SUMMARIES = {
    "synthesize": (
        "Speak a text in a new voice: chosen by the model, or designed from a short description. "
        "Takes 0.7 to 3.6 s of work per second of speech on two cores, by CPU (balanced preset).",
        SPEECH,
    ),
    "clone": (
        "Speak a text in the voice of a reference recording, of a voice prompt saved earlier, or "
        "of a voice of the server's library (list_voices).",
        SPEECH,
    ),
    "dub": (
        "Dub a subtitle file: each cue spoken in its window and placed at its start time, in one "
        "track as long as the last cue.",
        "The track as a 24 kHz wav file, one line saying what was made (and any warnings), its "
        "captions where each cue was placed (an SRT file), the dub's report (a JSON file: each "
        "cue's window, duration, speed and placing), and the captions as lines of text.",
    ),
}


def declared(endpoint: str, body: Callable, precision: str) -> Callable:
    """``body(fields, progress)`` as the endpoint Gradio reads: the signature and docstring of
    ``options`` (``precision``: the server's default), the arguments, positional or by name,
    gathered into ``fields`` by their names."""
    signature = options.signature(endpoint, precision)

    def call(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        fields = dict(bound.arguments)
        progress = fields.pop("progress")
        return body(fields, progress)

    call.__signature__ = signature
    call.__name__ = call.__qualname__ = endpoint
    call.__doc__ = options.docstring(endpoint, *SUMMARIES[endpoint])
    return call


class Handlers:
    """What the page's buttons and its API call. The API's handlers (``synthesize``, ``clone``...:
    the whole result at the end; their docstrings describe the MCP tools) and the page's
    (``synthesize_page``, ``clone_page``: pieces as they are made, when ``STREAMING``) share the
    service, its line and its messages. Each handler's signature is its endpoint's, read by
    Gradio. ``keyed``: the server has an API key, which the library's writes need
    (``LIBRARY_KEYED``): the page and MCP, which carry none, do not write."""

    def __init__(self, service: Service, default: str, library: VoiceLibrary, keyed: bool = False):
        self.service, self.default, self.library, self.keyed = service, default, library, keyed
        # the endpoints of options.ENDPOINTS: synthesize and clone speak their fields, whole
        self.synthesize = declared("synthesize", self.speak, default)
        self.clone = declared("clone", self.speak, default)
        self.dub = declared("dub", self.dub, default)
        for name in ("save_voice_prompt", "save_to_library"):
            setattr(self, name, with_defaults(getattr(self, name), precision=default))
        self.synthesize_page = self.page_twin(self.synthesize)
        self.clone_page = self.page_twin(self.clone)
        for name in ("synthesize", "clone", "dub", "synthesize_page", "clone_page"):
            setattr(self, name, counted(getattr(self, name), service.metrics))

    def speak(self, fields: dict, progress):
        """``/synthesize`` and ``/clone``: an API handler's fields (by the page's names:
        ``page_request``) spoken, whole, at their precision."""
        precision = fields.pop("precision")
        request = page_request(fields, self.service, self.library)
        return run_synthesis(self.service, precision or self.default, progress, request)

    def page_twin(self, api_handler):
        """The page's button for an API handler: the same fields (this signature, which Gradio
        reads, is the handler's), then the "sentence by sentence" box; the pieces go to the
        player as they are made."""
        signature = inspect.signature(api_handler)
        *fields, progress = signature.parameters.values()
        sentences = inspect.Parameter(
            "sentences", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=False
        )
        twin_signature = signature.replace(parameters=[*fields, sentences, progress])

        def twin(*args, **kwargs):
            bound = twin_signature.bind(*args, **kwargs)
            bound.apply_defaults()
            values = bound.arguments
            for old in ALIASES:  # the page's own controls carry the values
                values.pop(old, None)
            tracker = values.pop("progress", progress.default)
            with as_messages():
                pieces = page_flag(values.pop("sentences", False), "sentences")
            request = page_request(values, self.service, self.library)
            precision = values["precision"] or self.default
            yield from stream_synthesis(self.service, precision, tracker, request, pieces)

        twin.__signature__ = twin_signature
        twin.__name__ = f"{api_handler.__name__}_page"
        return twin

    def save_voice_prompt(self, ref_audio, ref_text=None, precision=None, progress=gr.Progress()):
        """Encode a reference recording once as a voice prompt file, to clone that voice again without the recording.

        Args:
            ref_audio: A recording of the voice: 3-10 s of one person speaking clearly (0.5-30 s accepted; up to 20 MB): an http(s) URL, a data: URI, or the path POST /gradio_api/upload returned.
            ref_text: What the recording says; empty: it is transcribed with Whisper.
            precision: The model precision that encodes the prompt (prompts work across precisions); left out: the server's default.
        Returns:
            A voice prompt file (.npz, kept for an hour on this server) to pass to clone as voice_prompt.
        """
        if not ref_audio:
            raise refused("Record or upload a reference voice first.")
        with as_messages():
            if ref_text is not None:
                check_string(ref_text, "ref_text (the reference's transcript)")
            reference = self.service.reference(
                precision, ref_audio, ref_text, None, progress, None, abandoned()
            )
            with reference as (_, prompt, _):
                pass
        path = prompt_file()
        prompt.save(path)
        return str(path)

    def transcribe(self, ref_audio, language="Auto", progress=gr.Progress()):
        """Transcribe a reference recording with Whisper: what the recording says, to check before cloning.

        Args:
            ref_audio: A recording of up to 30 s (longer ones are cut at a silence near 20 s): an http(s) URL, a data: URI, or the path POST /gradio_api/upload returned.
            language: The recording's language by name or code; "Auto" detects it.
        Returns:
            The transcript, one line of text.
        """
        if not ref_audio:
            return ""
        with as_messages():
            return self.service.transcribe(
                ref_audio, language_arg(language), progress, should_stop=abandoned()
            )

    def list_voices(self):
        """The voices of the server's library, to clone by name (clone's voice argument): saved references and named voice designs.

        Returns:
            A list of voices: name, kind ("clone": a saved reference, "design": an instruct), language, instruct, duration of the reference in seconds, created.
        """
        return [entry.as_dict() for entry in self.library.saved()]

    def save_to_library(
        self,
        name,
        ref_audio=None,
        ref_text=None,
        language="Auto",
        precision=None,
        progress=gr.Progress(),
    ):
        """Save a reference recording in the server's voice library under a name, for every door (the page, clone's voice argument, the OpenAI and Wyoming doors). Only where the server allows it (--voices-writable) and has no API key (with a key: POST /v1/audio/voices).

        Args:
            name: The voice's name: 1 to 64 letters, digits, '_', '.' or '-'.
            ref_audio: A recording of the voice: 3-10 s of one person speaking clearly: an http(s) URL, a data: URI, or the path POST /gradio_api/upload returned.
            ref_text: What the recording says; empty: it is transcribed with Whisper.
            language: The recording's language by name or code; "Auto": none.
            precision: The model precision that encodes it; left out: the server's default.
        Returns:
            One line saying what was saved.
        """
        if self.keyed and self.library.writable:
            raise refused(LIBRARY_KEYED)
        if not ref_audio:
            raise refused("Record or upload a reference voice first.")
        with as_messages():
            language = language_arg(language)

        def encode():
            reference = self.service.reference(
                precision, ref_audio, ref_text or None, language, progress, None, abandoned()
            )
            with reference as (_, prompt, _):
                return prompt

        with as_messages():
            try:
                named = name.strip() if isinstance(name, str) else name
                entry = self.library.add_recording(named, encode, language)
            except (FileExistsError, PermissionError) as exc:  # not REPORTED: said here
                raise ValueError(str(exc)) from None
        return f"Saved {entry.name!r} in the library ({entry.duration:g} s of speech)."

    def keep_voice(self, result, name=None):
        """The page's "Keep this voice": the last result's voice (its first piece's codes and
        text: ``Speech.voice_prompt``) as a voice prompt file, and, given a name where the page
        may write to the library, as a voice of the library too."""
        if not result:
            raise refused("Generate something first: the voice of the result is what is kept.")
        with as_messages():
            prompt = self.service.results.get(result)
        path = prompt_file()
        prompt.save(path)
        named = name.strip() if isinstance(name, str) else ""
        if not named or not self.library.writable or self.keyed:
            return str(path), (
                "This voice is in the prompt file: load it under Voice cloning to speak in it "
                "again."
            )
        with as_messages():
            try:
                entry = self.library.add_prompt(named, prompt)
            except (FileExistsError, PermissionError) as exc:  # not REPORTED: said here
                raise ValueError(str(exc)) from None
        return str(path), (
            f"Kept {entry.name!r} in the library ({entry.duration:g} s of its speech): choose it "
            "under Voice cloning, or as the voice of any door."
        )

    def dub(self, fields: dict, progress):
        """``/dub``: a subtitle file spoken cue by cue in its windows (``SUMMARIES``)."""
        cues = page_cues(fields.pop("subtitles_file"))
        precision, max_speed, speakers = (
            fields.pop(name) for name in ("precision", "max_speed", "speakers")
        )
        # the options checked with the first cue's text; each cue's duration is its window's
        fields.update(text=next(cue.text for cue in cues if cue.text.strip()), duration=None)
        request = page_request(fields, self.service, self.library)
        options = {k: v for k, v in request.options().items() if k not in ("text", "duration")}
        options["voice_prompt"] = request.voice_prompt
        with as_messages():
            flag = page_flag(speakers, "speakers")
            names = {e.name: self.library.options(e.name) for e in self.library.entries()}
        gone = abandoned()
        request_of = functools.partial(door_request, normalizer=self.service.normalizer(gone))

        def told(done: int, total: int) -> None:
            progress(done / total, desc=f"Cue {done} of {total}")

        precision = precision or self.default
        started = time.perf_counter()
        with prepared(self.service, precision, progress, request, gone) as (model, _, _):
            dubbed = dubbing.dub(
                model, cues, options, names if flag else None, max_speed, request_of, told, gone
            )
        line = (
            f"{len(dubbed.captions)} cues in {dubbed.seconds:.2f} s of track, made in "
            f"{time.perf_counter() - started:.1f} s, {precision}, seed {request.seed}"
        ) + "".join(f"\n- {escaped(warning)}" for warning in dubbed.report["warnings"])
        return (
            (dubbed.sample_rate, pcm16(dubbed.waveform)),
            line,
            captions_file(dubbed.captions),
            report_file(dubbed.report),
            caption_lines(dubbed.captions),
        )

    def example(self, text, language, instruct, progress=gr.Progress()):
        """An example of the page, as the page's defaults make it (seed 0, so a cached result is its result)."""
        fields = {**DEFAULTS, "randomize_seed": False, "text": text, "language": language}
        return run_synthesis(
            self.service,
            self.default,
            progress,
            page_request({**fields, "instruct": instruct or None}, self.service),
        )


# ----------------------------------------------------------------------------- layout
