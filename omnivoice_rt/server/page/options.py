"""The page's options, declared once: which parameters each synthesis endpoint of the page takes
(``/synthesize``, ``/clone``, ``/dub``: the page's buttons, ``gradio_client`` and the MCP tools),
in the order the API takes them; their defaults; and what each means. A parameter is a request
option of ``OPTIONS`` (its bound and its slider's range declared there) or one of the page's own
(``PAGE_ONLY``). The handlers' signatures (``signature``), their docstrings, which are the MCP
tools' descriptions (``docstring``), and the settings' sliders (``settings.py``) are made from
here; a new option reaches every door, the page included, by its declaration in ``OPTIONS`` and
its name in ``ENDPOINTS`` (docs/design.md, section 8).
"""

from __future__ import annotations

import inspect

import gradio as gr

from omnivoice_rt.audio.ops import SAMPLE_RATE
from omnivoice_rt.dialogue import TURN_PAUSE_S
from omnivoice_rt.limits import (
    DUB_MAX_SPEED,
    MAX_DURATION_S,
    MAX_SAMPLE_RATE,
    MAX_SPEED,
    MAX_TEXT_CHARS,
    MAX_TURN_PAUSE_S,
    MIN_SAMPLE_RATE,
)
from omnivoice_rt.request import DOOR_PRESET, OPTIONS
from omnivoice_rt.server.serving import DEFAULTS

# The settings every synthesis endpoint takes, in the API's order.
SETTINGS = (
    "num_step",
    "guidance_scale",
    "speed",
    "duration",
    "seed",
    "randomize_seed",
    "denoise",
    "postprocess_output",
    "preset",
    "normalize_text",
)
# The API's older names (gradio_client, MCP), still taken: the request's names are OPTIONS'.
ALIASES = {"guidance": "guidance_scale", "postprocess": "postprocess_output"}

# Each endpoint's parameters in the order the API takes them (positional for gradio_client), the
# older names last.
ENDPOINTS = {
    "synthesize": (
        "text",
        "language",
        "instruct",
        "precision",
        *SETTINGS,
        *ALIASES,
        "sample_rate",
        "words",
    ),
    "clone": (
        "text",
        "ref_audio",
        "ref_text",
        "voice_prompt",
        "language",
        "precision",
        *SETTINGS,
        "instruct",
        "voice",
        *ALIASES,
        "sample_rate",
        "words",
    ),
    # a dub has no duration: each cue's window is its own
    "dub": (
        "subtitles_file",
        "language",
        "instruct",
        "voice",
        "precision",
        *(name for name in SETTINGS if name != "duration"),
        "max_speed",
        "speakers",
        "sample_rate",
        "words",
    ),
    # a script has no duration either: each turn's is its own
    "script": (
        "text",
        "speaker_voices",
        "voice",
        "language",
        "instruct",
        "precision",
        *(name for name in SETTINGS if name != "duration"),
        "turn_pause",
        "sample_rate",
        "words",
    ),
}

# What a parameter that is no request option means, by name.
PAGE_ONLY = {
    "precision": "Model precision, one this server offers (the page's selector lists them; int4 "
    "is the fastest on most CPUs); left out: the server's default.",
    "randomize_seed": "True draws a new seed each call (the seed argument is then ignored).",
    "voice": "The name of a voice of the server's library (list_voices lists them), used "
    "instead of the other voice arguments; empty otherwise.",
    "guidance": "The older name of guidance_scale, still taken (it wins where given).",
    "postprocess": "The older name of postprocess_output, still taken (it wins where given).",
    "subtitles_file": "An .srt or .vtt file (UTF-8; its format by its name, else by its first "
    "line), at most 200 cues, 10,000 characters and 600 s here: an http(s) URL, a data: URI, or "
    "the path POST /gradio_api/upload returned.",
    "max_speed": f"The fastest a cue may be spoken to fit its window, 1 to {MAX_SPEED:g} "
    f"({DUB_MAX_SPEED:g} by default); a cue that needs more is reported and nothing is made.",
    "speakers": 'True: cues written "Name: text" speak in the library\'s voice Name (the prefix '
    "is not said).",
    "name": "The voice's name in the library: 1 to 64 letters, digits, '_', '.' or '-'.",
    "speaker_voices": "Each speaker's voice, one NAME=VOICE a line (VOICE: a voice of the "
    "library, or a voice design such as 'female, low pitch'); a name the script uses that is a "
    "voice of the library needs no line.",
    "turn_pause": f"Seconds of silence between two turns, 0 to {MAX_TURN_PAUSE_S:g} "
    f"({TURN_PAUSE_S:g} by default).",
    "words": "True: every word placed in the audio (its start and end, from aligning the audio "
    "with its text: the server's align extra, eSpeak NG); the captions file is then WebVTT, "
    "each word after its start's timestamp tag, and the lines show the words.",
}

# The parameters' defaults (none: required); the settings' are the doors' DEFAULTS.
NO_DEFAULT = inspect.Parameter.empty
DEFAULT_OF = {
    **{name: DEFAULTS[name] for name in SETTINGS},
    "text": NO_DEFAULT,
    "subtitles_file": NO_DEFAULT,
    "language": "Auto",
    "preset": DOOR_PRESET,
    "max_speed": DUB_MAX_SPEED,
    "speakers": False,
    "sample_rate": SAMPLE_RATE,
    "speaker_voices": None,
    "turn_pause": TURN_PAUSE_S,
    "words": False,
}


def slider_range(name: str) -> str:
    """An option's slider range and bound, as the docstrings quote them."""
    option = OPTIONS[name]
    low, high, _ = option.control
    if (low, high) == (option.low, option.high):
        return f"{low:g} to {high:g}"
    return f"the page's slider {low:g} to {high:g}; {option.wanted()} accepted"


# What each request option means on the page, where it says more than OPTIONS' help; the
# sliders' ranges and bounds quoted from OPTIONS.
MEANING = {
    "text": f"What to say, up to {MAX_TEXT_CHARS:,} characters, in any of 600+ languages. "
    "Non-verbal tags such as [laughter] or [sigh] may appear in it, and pauses: [pause:1.5s] or "
    "[pause:300ms]; a text starting with <speak> is SSML (break, p, s, prosody rate, sub, lang).",
    "language": 'The text\'s language by name ("English") or code ("en"); "Auto" detects it.',
    "instruct": "The voice, as comma-separated items (at most one per kind): gender (male, "
    "female), age (child, teenager, young adult, middle-aged, elderly), pitch (very low pitch "
    '... very high pitch), whisper, an English accent ("british accent"). Empty: the model '
    "chooses.",
    "ref_audio": "A recording of the voice to clone: 3-10 s of one person speaking clearly "
    "(0.5-30 s accepted; wav, flac, mp3, ogg; up to 20 MB): an http(s) URL, a data: URI, or the "
    "path POST /gradio_api/upload returned. Leave it out (or empty) when voice_prompt is given.",
    "ref_text": "What the recording says, up to 2,000 characters; empty: it is transcribed with "
    "Whisper.",
    "voice_prompt": "A voice prompt file (.npz) from save_voice_prompt (the URL it returned), "
    "used instead of ref_audio and ref_text; leave it out (or empty) otherwise.",
    "num_step": f"Unmasking steps ({slider_range('num_step')}; the preset's: 16 balanced, 32 "
    "best, 12 fast).",
    "guidance_scale": f"Classifier-free guidance scale, 2 by default ({slider_range('guidance_scale')}).",
    "speed": f"Speaking rate, 1.0 normal; above 1 is faster ({slider_range('speed')}).",
    "duration": f"Length of the speech in seconds, up to {MAX_DURATION_S:g}; 0 estimates it from "
    "the text.",
    "seed": "Random seed; the same seed and settings give the same audio.",
    "denoise": "Denoise a reference (cloning only).",
    "postprocess_output": "Trim long silences and normalise the loudness.",
    "preset": '"balanced" (default), "best" (32 steps, as upstream), "fast" (12 steps) or '
    '"turbo" (experimental: 12 steps, only changed frames run between refreshes).',
    "sample_rate": f"The audio's samples a second, {MIN_SAMPLE_RATE} to {MAX_SAMPLE_RATE} "
    f"({SAMPLE_RATE}, the model's, by default; 8000 or 16000 for telephony, 48000 for video); "
    "captions keep their times in seconds.",
    "normalize_text": "True (default) reads numbers, dates, times, money and percentages as "
    'words ("$12.50" as "twelve point five dollars"), as upstream\'s normalize_text does; False '
    "reads the text as written (spell numbers out yourself then).",
}
# Where an endpoint means a parameter its own way.
MEANING_IN = {
    "clone": {
        "text": f"What to say, up to {MAX_TEXT_CHARS:,} characters; pauses as [pause:1.5s], or "
        "SSML (<speak>...</speak>).",
        "language": 'The text\'s language by name or code; "Auto" detects it.',
        "denoise": "Denoise the reference first.",
        "postprocess_output": "Trim long silences and match the reference's loudness.",
        "instruct": 'A style over the cloned voice, as voice-design items ("whisper", "high '
        "pitch\"); empty: the reference's own.",
        "voice": "The name of a voice of the server's library (list_voices lists them), used "
        "instead of ref_audio and voice_prompt; empty otherwise.",
    },
    "script": {
        "text": 'The dialogue: "Name: what Name says" lines (a name in any script, "小明：" too; '
        "the lines after one without a name carry on its turn), or [voice:Name] tags anywhere; "
        "pauses and SSML within a turn as in any text. Up to 10,000 characters, 16 speakers.",
        "voice": "The voice of what no name claims: a voice of the server's library, or empty "
        "(the instruct, or the model's choice).",
        "language": 'The script\'s language by name or code; "Auto" detects it turn by turn.',
        "instruct": "The voice design of what no name claims; empty: the model chooses.",
        "seed": "Random seed; the same seed and settings give the same dialogue.",
    },
    "dub": {
        "language": 'The cues\' language by name ("English") or code ("en"); "Auto" detects it.',
        "instruct": 'The voice as voice-design items ("female, low pitch"); empty: the model '
        "chooses, and keeps its first cue's voice for the rest.",
        "voice": "A voice of the server's library by name (instead of the instruct), or empty.",
        "speed": "Speaking rate for cues with room to spare, 1.0 normal; a cue is sped up only "
        f"as much as its window needs ({slider_range('speed')}).",
        "seed": "Random seed; the same seed and settings give the same track.",
        "denoise": "Denoise a reference (a cloned voice of the library).",
        "postprocess_output": "Trim long silences and normalise the loudness of each cue.",
        "normalize_text": "True (default) reads numbers and dates as words.",
    },
}


def meaning(endpoint: str, name: str) -> str:
    """What parameter ``name`` of ``endpoint`` means, for its docstring."""
    told = MEANING_IN.get(endpoint, {}).get(name) or MEANING.get(name) or PAGE_ONLY.get(name)
    if told is None:  # an option declared with no page text: its own help
        told = OPTIONS[name].help[:1].upper() + OPTIONS[name].help[1:] + "."
    return told


def signature(endpoint: str, precision: str | None) -> inspect.Signature:
    """The endpoint's signature, which Gradio reads for its API and MCP: its parameters with
    their defaults (``precision``: the server's default precision), then Gradio's progress."""
    defaults = {**DEFAULT_OF, "precision": precision}
    keyword = inspect.Parameter.POSITIONAL_OR_KEYWORD
    parameters = [
        inspect.Parameter(name, keyword, default=defaults.get(name))
        if defaults.get(name, None) is not NO_DEFAULT
        else inspect.Parameter(name, keyword)
        for name in ENDPOINTS[endpoint]
    ]
    parameters.append(inspect.Parameter("progress", keyword, default=gr.Progress()))
    return inspect.Signature(parameters)


def docstring(endpoint: str, summary: str, returns: str) -> str:
    """The endpoint's docstring (its MCP tool's description), in the layout Gradio parses: the
    summary, each parameter's meaning, what it returns."""
    args = "".join(f"    {name}: {meaning(endpoint, name)}\n" for name in ENDPOINTS[endpoint])
    return f"{summary}\n\nArgs:\n{args}Returns:\n    {returns}\n"


def hidden(name: str) -> gr.components.Component:
    """An input of the API that the page shows no control for (an option added to ``ENDPOINTS``
    without one in ``settings.py``): empty unless a client gives it, of its option's kind."""
    kind = OPTIONS[name].kind
    if kind == "bool":
        box = gr.Checkbox(visible=False)
        box.value = None  # a Checkbox makes its None False
        return box
    if kind in ("number", "whole"):
        return gr.Number(value=None, visible=False)
    return gr.Textbox(value=None, visible=False)


def inputs(handler, *controls: dict) -> list:
    """The components that fill ``handler``'s parameters, in its signature's order, found by
    name in ``controls`` (a later dict's name wins); an option the page shows no control for
    gets a hidden one (``options.hidden``); ``progress`` is Gradio's own."""
    by_name = {name: control for named in controls for name, control in named.items()}
    parameters = inspect.signature(handler).parameters
    return [
        by_name[name] if name in by_name else hidden(name)
        for name in parameters
        if name != "progress"
    ]
