"""The "Voice cloning" tab: a reference recording (its transcript filled in as it arrives), a
voice prompt file or a voice of the library, a style over it, and the text; saving the voice as a
prompt file or into the library."""

from __future__ import annotations

import gradio as gr

from omnivoice_rt.server.page.shared import language_choice
from omnivoice_rt.voices import VoiceLibrary

REFERENCE_TIPS = (
    "A good reference: 3-10 s of one person speaking clearly, little background noise, in the language "
    "you will synthesize. Its transcript is filled in when you record or upload it: check it, or type "
    "it; left empty, it is transcribed when you generate. Or load a voice prompt saved earlier."
)


def layout(library: VoiceLibrary, keyed: bool) -> dict[str, gr.components.Component]:
    """The tab's controls by the parameter of ``Handlers.clone`` (and of ``save_voice_prompt``,
    ``save_to_library``, ``transcribe``) each fills, and its buttons and outputs."""
    gr.Markdown(REFERENCE_TIPS)
    ref_audio = gr.Audio(
        sources=["microphone", "upload"],
        type="filepath",
        label="Reference voice",
        elem_id="ref-audio",
    )
    ref_text = gr.Textbox(
        label="What the reference says (transcribed for you; editable)",
        lines=2,
        elem_id="ref-text",
    )
    with gr.Row():
        prompt_file = gr.File(
            label="Voice prompt (.npz), instead of the audio",
            file_types=[".npz"],
            type="filepath",
        )
        saved_prompt = gr.File(label="Saved voice prompt", interactive=False)
        library_voice = gr.Dropdown(
            [""] + [entry.name for entry in library.saved()],
            value="",
            label="Or a voice of the library",
            info="instead of the reference and the prompt file",
            allow_custom_value=True,  # the library changes while the page is open
            elem_id="library-voice",
        )
    with gr.Row():
        save_button = gr.Button("Save this voice as a prompt file")
    with gr.Row(visible=library.writable and not keyed):
        library_name = gr.Textbox(
            label="Name in the library", placeholder="narrator", elem_id="library-name"
        )
        library_button = gr.Button("Save to the library", elem_id="library-save")
    library_line = gr.Markdown(elem_id="library-line")
    instruct = gr.Textbox(
        label="Style over the cloned voice (optional voice-design items)",
        placeholder="e.g. whisper, or high pitch",
        elem_id="clone-instruct",
    )
    text = gr.Textbox(label="Text to say in this voice", lines=3, elem_id="clone-text")
    language = language_choice()
    button = gr.Button("Generate", variant="primary", elem_id="clone-generate")
    return {
        "text": text,
        "ref_audio": ref_audio,
        "ref_text": ref_text,
        "voice_prompt": prompt_file,
        "language": language,
        "instruct": instruct,
        "voice": library_voice,
        "name": library_name,
        "button": button,
        "save_button": save_button,
        "saved_prompt": saved_prompt,
        "library_button": library_button,
        "library_line": library_line,
    }
