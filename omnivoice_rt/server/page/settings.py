"""The settings every synthesis tab shares (under the tabs): the preset, the steps, guidance,
speed, duration, seed, denoising, post-processing, reading numbers as words, and sentence by
sentence. Each control is keyed by the handlers' parameter it fills."""

from __future__ import annotations

import gradio as gr

from omnivoice_rt.limits import MAX_STEPS
from omnivoice_rt.request import DOOR_PRESET, PRESETS
from omnivoice_rt.server.page.shared import PRESET_LABELS, SENTENCES_LABEL
from omnivoice_rt.server.serving import DEFAULTS


def layout() -> dict[str, gr.components.Component]:
    """The settings' controls by parameter name; ``sentences`` is the page's alone (the API's
    handlers take no such parameter)."""
    with gr.Accordion("Settings", open=False):
        with gr.Row():
            preset = gr.Radio(
                [(PRESET_LABELS[name], name) for name in PRESETS],
                value=DOOR_PRESET,
                label="Speed preset",
                info="balanced is this page's default on a CPU; best is upstream's generation, exactly",
                elem_id="preset",
            )
            steps = gr.Slider(
                1, MAX_STEPS, value=DEFAULTS["num_step"], step=1, label="Unmasking steps"
            )
            guidance = gr.Slider(
                0.0, 5.0, value=DEFAULTS["guidance_scale"], step=0.1, label="Guidance scale"
            )
        with gr.Row():
            speed = gr.Slider(0.5, 2.0, value=1.0, step=0.05, label="Speed")
            duration = gr.Number(
                value=0, minimum=0, maximum=600, label="Duration in s (0: automatic)"
            )
        with gr.Row():
            seed = gr.Number(value=0, precision=0, label="Seed")
            randomize = gr.Checkbox(value=DEFAULTS["randomize_seed"], label="Randomize seed")
            denoise = gr.Checkbox(value=True, label="Denoise reference")
            postprocess = gr.Checkbox(
                value=DEFAULTS["postprocess_output"], label="Trim silences and normalize"
            )
        preset.change(
            lambda name: PRESETS[name]["num_step"], preset, steps, api_visibility="private"
        )
    with gr.Row():
        normalize = gr.Checkbox(
            value=DEFAULTS["normalize_text"],
            label="Read numbers and dates as words",
            info='"$12.50 on Jan. 5" as "twelve point five dollars on the fifth of january"',
            elem_id="normalize-text",
        )
        sentences = gr.Checkbox(value=False, label=SENTENCES_LABEL, elem_id="sentences")
    return {
        "num_step": steps,
        "guidance_scale": guidance,
        "speed": speed,
        "duration": duration,
        "seed": seed,
        "randomize_seed": randomize,
        "denoise": denoise,
        "postprocess_output": postprocess,
        "preset": preset,
        "normalize_text": normalize,
        "sentences": sentences,
    }


def aliases() -> dict[str, gr.components.Component]:
    """The API's older names (``shared.ALIASES``), of their options' kinds: inputs the page never
    sets, empty unless a client gives them (a Checkbox makes its None False: put back after)."""
    guidance, postprocess = gr.Number(value=None, visible=False), gr.Checkbox(visible=False)
    postprocess.value = None
    return {"guidance": guidance, "postprocess": postprocess}
