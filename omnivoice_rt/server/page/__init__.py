"""The Gradio page over ``omnivoice_rt``: its tabs, its handlers and its API.

Tabs for text-to-speech (auto voice and voice design, ``speak.py``), voice cloning (``clone.py``,
its voices kept in prompt files and the library: ``voices.py``), dubbing (``dub.py``) and dialogue
scripts (``script.py``), each tab with its layout, its endpoints and their wiring; the settings they share (``settings.py``), the
result under them (``results.py``), a precision selector, progress over download and unmasking,
audio played as it is made, and stable API endpoints for ``gradio_client``: ``/synthesize``,
``/clone``, ``/dub``, ``/script``, ``/save_voice_prompt``, ``/save_to_library``, ``/list_voices`` and
``/transcribe`` (also MCP tools with ``--mcp``), whose parameters are the signatures of
``handlers.Handlers`` (its voice, dubbing and script endpoints are ``voices.VoiceHandlers``,
``dub.DubHandlers`` and ``script.ScriptHandlers``). Each tab's controls are keyed by the parameter they fill, and every button
is wired by those names (``options.inputs``). ``main.py`` serves the page with the other doors
from one process; every door shares ``serving.py``'s line.
"""

from __future__ import annotations

import gradio as gr

from omnivoice_rt.server.models import offered_precisions
from omnivoice_rt.server.page import (
    clone,
    dub,
    options,
    results,
    script,
    settings,
    speak,
    voices,
)
from omnivoice_rt.server.page.handlers import Handlers
from omnivoice_rt.server.page.shared import (
    HIGHLIGHT,
    examples_cache,
    page_request,
    precision_line,
)
from omnivoice_rt.server.serving import Config, Service
from omnivoice_rt.voices import VoiceLibrary

__all__ = ["LICENCE_LINE", "PAGE_CSS", "PAGE_HEAD", "build_demo", "page_request", "precision_line"]

# The non-verbal tag buttons keep their labels on one line; they wrap as a row instead.
PAGE_CSS = (
    ".tag-button { white-space: nowrap; flex: 0 0 auto !important; }\n"
    "#result-lines span.word.spoken { background: #fde68a; border-radius: 3px; }"
)
PAGE_HEAD = HIGHLIGHT  # the result's words highlighted as the player plays them
LICENCE_LINE = (  # the page's footer; README "Licences" says more
    "Code: Apache-2.0. The OmniVoice weights (k2-fsa/OmniVoice): CC-BY-NC, non-commercial use "
    "only, as their authors state. The Higgs Audio V2 tokenizer: Boson AI's licence."
)


def header(service: Service) -> dict:
    """The title and the precision selector with its line (which follows a load under way)."""
    config, default = service.config, service.models.default

    def describe(precision: str) -> str:
        return precision_line(service, precision)

    gr.Markdown(
        "# OmniVoice ONNX\nOmnilingual text-to-speech on ONNX Runtime: no PyTorch, fast on a CPU."
    )
    with gr.Row():
        precision = gr.Radio(
            service.models.offered, value=default, label="Precision", scale=1, elem_id="precision"
        )
        info = gr.Markdown(describe(default), elem_id="precision-info")
    precision.change(describe, precision, info, api_visibility="private")
    # While a load is under way, the precision line follows it (outside the synthesis queue).
    watch = gr.Timer(1.0, active=config.preload)
    watch.tick(
        lambda p: (describe(p), gr.Timer(active=bool(service.models.activity))),
        precision,
        [info, watch],
        queue=False,
        show_progress="hidden",
        api_visibility="private",
    )
    return {"precision": precision, "info": info, "describe": describe}


def build_demo(
    config: Config | None = None,
    service: Service | None = None,
    library: VoiceLibrary | None = None,
    keyed: bool = False,
) -> gr.Blocks:
    """The page and its API over ``service`` (made from ``config`` when not given) and the voice
    ``library`` (none when not given); ``keyed``: the server has an API key (the page then does
    not write to the library)."""
    if service is None:
        config = config or Config()
        service = Service(config, offered_precisions(config.source))
    library = library or VoiceLibrary()
    if service.config.preload:
        service.preload(service.models.default)
    handlers = Handlers(service, service.models.default, library, keyed)
    examples_cache()
    # Uploads and results in Gradio's cache are deleted after an hour, checked every ten minutes.
    with gr.Blocks(title="OmniVoice ONNX", delete_cache=(600, 3600)) as demo:
        top = header(service)
        result = results.made()
        with gr.Tabs():
            with gr.Tab("Text to speech", id="tts"):
                tts = speak.layout(handlers, result)
            with gr.Tab("Voice cloning", id="clone"):
                cloning = clone.layout(library, keyed)
            with gr.Tab("Dubbing", id="dub"):
                dubbing = dub.layout(library)
            with gr.Tab("Script", id="script"):
                scripting = script.layout(library)
        shared = {"precision": top["precision"], **settings.layout()}
        keep = results.render(result, library, keyed)
        shared.update(settings.aliases())
        # in this order, the order of the API's endpoints (fn_index) as before
        wire_page(handlers, top, shared, result, tts, cloning)
        dub.wire(handlers, top, shared, result, dubbing)
        wire_api(handlers, shared, result, tts, cloning)
        voices.wire(handlers, top, library, cloning, keep)
        script.wire(handlers, top, shared, result, scripting)  # the newest endpoint, last
        gr.Markdown(LICENCE_LINE, elem_id="licence")
    return demo


def wire_page(handlers: Handlers, top, shared, result, tts, cloning) -> None:
    """Text to speech and cloning on the page: pieces to the player as they are made, then the
    whole result."""
    shown = [result[name] for name in ("player", "output", "info", "subtitles", "lines", "kept")]
    for button, handler, tab in (
        (tts["button"], handlers.synthesize_page, tts),
        (cloning["button"], handlers.clone_page, cloning),
    ):
        button.click(
            handler, options.inputs(handler, shared, tab), shown, api_visibility="private"
        ).then(top["describe"], top["precision"], top["info"], api_visibility="private")


def wire_api(handlers: Handlers, shared, result, tts, cloning) -> None:
    """The API's stable endpoints (gradio_client, MCP): the whole result at the end, from
    buttons the page does not show."""
    whole = [result["output"], result["info"], result["subtitles"]]
    for api_name, handler, tab in (
        ("synthesize", handlers.synthesize, tts),
        ("clone", handlers.clone, cloning),
    ):
        gr.Button(visible=False).click(
            handler, options.inputs(handler, shared, tab), whole, api_name=api_name
        )
