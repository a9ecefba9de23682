"""The "Dubbing" tab: a subtitle file spoken cue by cue in its windows, in a voice of the library
or a design, with the fastest speech a cue may take to fit."""

from __future__ import annotations

import gradio as gr

from omnivoice_rt.limits import DUB_MAX_SPEED, MAX_SPEED
from omnivoice_rt.server.page.shared import language_choice
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
        voice = gr.Dropdown(
            [""] + library.names(),
            value="",
            label="Voice of the library",
            info="empty: the voice design below, or the model's choice",
            allow_custom_value=True,
            elem_id="dub-voice",
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
