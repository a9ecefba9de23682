"""The result under the tabs, shared by them: the player (pieces as they are made), the whole
result, its line, its captions (a file and lines), and "Keep this voice"."""

from __future__ import annotations

import gradio as gr

from omnivoice_rt.server.page.shared import STREAMING
from omnivoice_rt.voices import VoiceLibrary


def made() -> dict[str, gr.components.Component]:
    """The result's components, made before the tabs (the first tab's examples fill them) and
    shown under them by ``render``."""
    return {
        "player": gr.Audio(
            label="Result, played as it is made",
            type="numpy",
            streaming=True,
            autoplay=True,
            interactive=False,
            visible=STREAMING,
            elem_id="result-stream",
            render=False,
        ),
        "output": gr.Audio(
            label="Whole result (wav)" if STREAMING else "Result",
            type="numpy",
            interactive=False,
            elem_id="result-audio",
            render=False,
        ),
        "info": gr.Markdown(elem_id="result-info", render=False),
        # the result's captions: a file to download (the API's third output), and its lines
        "subtitles": gr.File(
            label="Captions (.srt; .vtt with word timings)",
            interactive=False,
            elem_id="result-captions",
            render=False,
        ),
        "lines": gr.Markdown(elem_id="result-lines", render=False),
        # the id of the last result's voice (Service.results), in a hidden box rather than a
        # gr.State, whose clean-up keeps an event stream open from every page (a heartbeat)
        "kept": gr.Textbox(visible=False, render=False, elem_id="kept-result"),
    }


def render(results: dict, library: VoiceLibrary, keyed: bool) -> dict[str, gr.components.Component]:
    """Shows the result and the "Keep this voice" row; returns the row's controls, keyed by the
    parameter of ``Handlers.keep_voice`` each fills (``result``: the kept id)."""
    for name in ("player", "output", "info", "lines", "subtitles"):
        results[name].render()
    with gr.Row():
        keep_name = gr.Textbox(
            label="Name in the library (optional)",
            placeholder="narrator",
            visible=library.writable and not keyed,
            elem_id="keep-name",
        )
        keep_button = gr.Button("Keep this voice", elem_id="keep-voice")
        kept_file = gr.File(
            label="This voice as a prompt file", interactive=False, elem_id="kept-voice"
        )
    keep_line = gr.Markdown(elem_id="keep-line")
    results["kept"].render()
    return {
        "result": results["kept"],
        "name": keep_name,
        "button": keep_button,
        "file": kept_file,
        "line": keep_line,
    }
