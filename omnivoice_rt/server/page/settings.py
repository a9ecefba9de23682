"""The settings every synthesis tab shares (under the tabs): the preset, the steps, guidance,
speed, duration, seed, denoising, post-processing, the sample rate, reading numbers as words,
sentence by sentence, and word timings. Each control is keyed by the handlers' parameter it
fills."""

from __future__ import annotations

import gradio as gr

from omnivoice_rt.audio.ops import SAMPLE_RATE
from omnivoice_rt.request import DOOR_PRESET, OPTIONS, PRESETS
from omnivoice_rt.server.page import options
from omnivoice_rt.server.page.shared import PRESET_LABELS, SENTENCES_LABEL
from omnivoice_rt.server.serving import DEFAULTS


def slider(name: str, label: str) -> gr.Slider:
    """The slider of option ``name``: the range declared beside it (``Option.control``), the
    doors' default."""
    low, high, step = OPTIONS[name].control
    return gr.Slider(low, high, value=DEFAULTS[name], step=step, label=label)


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
            steps = slider("num_step", "Unmasking steps")
            guidance = slider("guidance_scale", "Guidance scale")
        with gr.Row():
            speed = slider("speed", "Speed")
            duration = gr.Number(  # 0: none, estimated (the option takes above 0)
                value=0,
                minimum=0,
                maximum=OPTIONS["duration"].high,
                label="Duration in s (0: automatic)",
            )
        with gr.Row():
            seed = gr.Number(value=0, precision=0, label="Seed")
            randomize = gr.Checkbox(value=DEFAULTS["randomize_seed"], label="Randomize seed")
            denoise = gr.Checkbox(value=True, label="Denoise reference")
            postprocess = gr.Checkbox(
                value=DEFAULTS["postprocess_output"], label="Trim silences and normalize"
            )
        with gr.Row():
            sample_rate = gr.Number(
                value=SAMPLE_RATE,
                precision=0,
                minimum=OPTIONS["sample_rate"].low,
                maximum=OPTIONS["sample_rate"].high,
                label="Sample rate (Hz)",
                info="the model's is 24000; 8000 or 16000 for telephony, 48000 for video",
                elem_id="sample-rate",
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
        words = gr.Checkbox(
            value=False,
            label="Word timings",
            info="each word placed in the audio, highlighted as it plays (captions: WebVTT)",
            elem_id="words",
        )
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
        "sample_rate": sample_rate,
        "sentences": sentences,
        "words": words,
    }


def aliases() -> dict[str, gr.components.Component]:
    """The API's older names (``options.ALIASES``): inputs the page never sets, empty unless a
    client gives them, of their options' kinds."""
    return {alias: options.hidden(name) for alias, name in options.ALIASES.items()}
