"""What the page's buttons, its ``gradio_client`` API and its MCP tools call: ``Handlers``, one
method per endpoint, whose signatures and docstrings are the endpoints' and the tools'."""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable

import gradio as gr

from omnivoice_rt.server.page import options
from omnivoice_rt.server.page.dub import DubHandlers
from omnivoice_rt.server.page.script import ScriptHandlers
from omnivoice_rt.server.page.shared import (
    ALIASES,
    as_messages,
    asked_words,
    page_flag,
    page_request,
    run_synthesis,
    stream_synthesis,
)
from omnivoice_rt.server.page.voices import VoiceHandlers
from omnivoice_rt.server.serving import DEFAULTS, Service
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
    "The speech as a wav file (24 kHz, or sample_rate), one line saying its length, time taken and seed, and its "
    "captions: an SRT file, one cue per spoken piece (its start, end and text, exact to the "
    "sample); with words, a WebVTT file whose cues carry each word's start as a timestamp tag."
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
        "The track as a wav file (24 kHz, or sample_rate), one line saying what was made (and any warnings), its "
        "captions where each cue was placed (an SRT file; with words, WebVTT with each word's "
        "timestamp tag), the dub's report (a JSON file: each cue's window, duration, speed and "
        "placing), and the captions as lines of text.",
    ),
    "script": (
        "Speak a dialogue script turn by turn, each speaker in its voice (a voice of the "
        "library by the speaker's name, or the one speaker_voices gives it), as one track with "
        "a pause between turns.",
        "The dialogue as a wav file (24 kHz, or sample_rate), one line saying what was made, its captions (an SRT "
        'file, each cue "Name: text"), and the captions as lines of text.',
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


class Handlers(VoiceHandlers, DubHandlers, ScriptHandlers):
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
        self.script = declared("script", self.script, default)
        for name in ("save_voice_prompt", "save_to_library"):
            setattr(self, name, with_defaults(getattr(self, name), precision=default))
        self.synthesize_page = self.page_twin(self.synthesize)
        self.clone_page = self.page_twin(self.clone)
        for name in ("synthesize", "clone", "dub", "script", "synthesize_page", "clone_page"):
            setattr(self, name, counted(getattr(self, name), service.metrics))

    def speak(self, fields: dict, progress):
        """``/synthesize`` and ``/clone``: an API handler's fields (by the page's names:
        ``page_request``) spoken, whole, at their precision."""
        precision = fields.pop("precision")
        with as_messages():
            words = asked_words(fields)
        request = page_request(fields, self.service, self.library)
        return run_synthesis(self.service, precision or self.default, progress, request, words)

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
                words = asked_words(values)
            request = page_request(values, self.service, self.library)
            precision = values["precision"] or self.default
            yield from stream_synthesis(self.service, precision, tracker, request, pieces, words)

        twin.__signature__ = twin_signature
        twin.__name__ = f"{api_handler.__name__}_page"
        return twin

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
