"""The "Text to speech" tab: a text in a voice the model chooses or one designed from a few
choices (the instruct), with the non-verbal tags at a click and the examples."""

from __future__ import annotations

import gradio as gr

from omnivoice_rt.server.page.shared import language_choice
from omnivoice_rt.text.chunks import NONVERBAL_TAGS
from omnivoice_rt.text.instructs import INSTRUCT_EXCLUSIVE

GENDERS, AGES, PITCHES, STYLES = (
    sorted({x for x in INSTRUCT_EXCLUSIVE[i] if x.isascii()}) for i in range(4)
)
ACCENTS, DIALECTS = sorted(INSTRUCT_EXCLUSIVE[4]), sorted(INSTRUCT_EXCLUSIVE[5])
DEFAULT_TEXT = "Hello! This is OmniVoice, speaking from ONNX Runtime on a CPU."
EXAMPLES = [
    ["Hello! This is OmniVoice, running on ONNX Runtime without PyTorch.", "English", ""],
    ["The weather is lovely today [laughter], let's go for a walk.", "Auto", "female, young adult"],
    ["今天天气很好，我们一起去公园散步吧。", "Chinese", "男，中年"],
]


def design_instruct(gender, age, pitch, style, accent, dialect) -> str:
    """The voice-design choices as one instruct string, for the box that is sent (and editable)."""
    items = [x for x in (gender, age, pitch, style, accent, dialect) if x and x != "Any"]
    return ", ".join(items)


def tag_buttons(textbox: gr.Textbox) -> None:
    with gr.Row():
        for tag in NONVERBAL_TAGS:
            gr.Button(f"[{tag}]", size="sm", min_width=0, elem_classes=["tag-button"]).click(
                lambda text, t=tag: (text or "") + f"[{t}]",
                textbox,
                textbox,
                api_visibility="private",
            )


def layout(handlers, results: dict) -> dict[str, gr.components.Component]:
    """The tab's controls by the parameter of ``Handlers.synthesize`` each fills, and its
    ``button``; the examples fill the text, language and instruct and show their result in
    ``results``."""
    text = gr.Textbox(
        DEFAULT_TEXT,
        label="Text",
        lines=4,
        placeholder="What should be said?",
        elem_id="tts-text",
    )
    tag_buttons(text)
    language = language_choice()
    # One control for the voice: the choices compose the instruct, which is sent as it stands in
    # its box (and may be typed or edited there).
    with gr.Accordion("Voice design (empty: the model chooses)", open=True):
        with gr.Row():
            controls = [
                gr.Dropdown(["Any"] + options, value="Any", label=label)
                for label, options in (
                    ("Gender", GENDERS),
                    ("Age", AGES),
                    ("Pitch", PITCHES),
                    ("Style", STYLES),
                    ("English accent", ACCENTS),
                    ("Chinese dialect", DIALECTS),
                )
            ]
        instruct = gr.Textbox(
            label="Instruct sent to the model",
            info="what the choices above make; or type items yourself",
            placeholder="empty: the model chooses; or e.g. female, low pitch, british accent",
            elem_id="tts-instruct",
        )
    for control in controls:
        control.change(design_instruct, controls, instruct, api_visibility="private")
    button = gr.Button("Generate", variant="primary", elem_id="tts-generate")
    # A click fills the text, the language and the voice design, and plays the example (made
    # once, then kept).
    gr.Examples(
        EXAMPLES,
        [text, language, instruct],
        [results["output"], results["info"], results["subtitles"]],
        fn=handlers.example,
        run_on_click=True,
        cache_examples=True,
        cache_mode="lazy",
        api_visibility="private",
        elem_id="examples",
    )
    return {"text": text, "language": language, "instruct": instruct, "button": button}
