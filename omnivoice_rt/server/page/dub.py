"""The "Dubbing" tab: a subtitle file spoken cue by cue in its windows, in a voice of the library
or a design, with the fastest speech a cue may take to fit."""

from __future__ import annotations

import functools
import time

import gradio as gr

from omnivoice_rt import dubbing
from omnivoice_rt.align import speech_words
from omnivoice_rt.audio.formats import pcm16
from omnivoice_rt.limits import DUB_MAX_SPEED, MAX_SPEED
from omnivoice_rt.request import door_request
from omnivoice_rt.server.page.options import inputs
from omnivoice_rt.server.page.shared import (
    abandoned,
    as_messages,
    asked_words,
    caption_lines,
    captions_file,
    escaped,
    language_choice,
    page_cues,
    page_flag,
    page_request,
    prepared,
    report_file,
    voice_choice,
    wire_whole,
)
from omnivoice_rt.voices import VoiceLibrary

DUB_TIPS = (
    "Each cue of a subtitle file is spoken in its window and placed at its start time, in one "
    "track as long as the last cue: at its natural pace where it fits, else faster, up to the "
    "fastest speech below. A cue that cannot fit is named, with the time it needs, and nothing "
    "is made. The Settings apply, but the duration: each cue's is its window's. Up to 200 cues "
    "and 600 s here; `omnivoice-onnx dub` takes longer files."
)


def layout(library: VoiceLibrary) -> dict[str, gr.components.Component]:
    """The tab's controls by the parameter of ``Handlers.dub`` each fills, its button and its
    report."""
    gr.Markdown(DUB_TIPS)
    subtitles_file = gr.File(  # any file type: an MCP client's data: URI has no name
        label="Subtitles (.srt or .vtt)",
        type="filepath",
        elem_id="dub-subtitles",
    )
    with gr.Row():
        voice = voice_choice(
            library,
            "Voice of the library",
            "empty: the voice design below, or the model's choice",
            "dub-voice",
        )
        instruct = gr.Textbox(
            label="Voice design (instead)",
            placeholder="e.g. female, low pitch",
            elem_id="dub-instruct",
        )
        language = language_choice()
    with gr.Row():
        max_speed = gr.Slider(
            1.0,
            MAX_SPEED,
            value=DUB_MAX_SPEED,
            step=0.05,
            label="Fastest speech, to fit a cue's window",
            elem_id="dub-max-speed",
        )
        speakers = gr.Checkbox(
            value=False,
            label='Cues "Name: text" speak in the library\'s voice Name',
            elem_id="dub-speakers",
        )
    button = gr.Button("Dub", variant="primary", elem_id="dub-generate")
    report = gr.File(label="The dub's report (.json)", interactive=False, elem_id="dub-report")
    return {
        "subtitles_file": subtitles_file,
        "voice": voice,
        "instruct": instruct,
        "language": language,
        "max_speed": max_speed,
        "speakers": speakers,
        "button": button,
        "report": report,
    }


class DubHandlers:
    """The tab's endpoint, ``/dub``, a part of ``handlers.Handlers``."""

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
            words = asked_words(fields)
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
        placed = None
        if words:  # each cue's words in the samples it was placed at
            with as_messages():
                placed = speech_words(
                    dubbed.waveform, dubbed.sample_rate, dubbed.captions, request.language
                )
        line = (
            f"{len(dubbed.captions)} cues in {dubbed.seconds:.2f} s of track, made in "
            f"{time.perf_counter() - started:.1f} s, {precision}, seed {request.seed}"
        ) + "".join(f"\n- {escaped(warning)}" for warning in dubbed.report["warnings"])
        return (
            (dubbed.sample_rate, pcm16(dubbed.waveform)),
            line,
            captions_file(dubbed.captions, placed),
            report_file(dubbed.report),
            caption_lines(dubbed.captions, placed),
        )


def wire(handlers, top, shared, result, dubbing) -> None:
    """A dub: the settings but the duration (``Handlers.dub`` takes none: each cue's window is
    its own)."""
    made = [result["output"], result["info"], result["subtitles"], dubbing["report"]]
    wire_whole(
        dubbing["button"],
        handlers.dub,
        inputs(handlers.dub, shared, dubbing),
        [*made, result["lines"]],
        "dub",
        top,
        result,
    )
