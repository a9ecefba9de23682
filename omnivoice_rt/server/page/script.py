"""The "Script" tab: a dialogue ("Name: text" lines, or ``[voice:Name]`` tags) spoken turn by turn,
each name in its voice: a voice of the library by that name, or the one the speakers' table
gives it (``omnivoice_rt.dialogue``). ``/script`` in gradio_client and MCP."""

from __future__ import annotations

import functools
import time

import gradio as gr

from omnivoice_rt import dialogue
from omnivoice_rt.audio.formats import pcm16
from omnivoice_rt.dialogue import TURN_PAUSE_S
from omnivoice_rt.limits import MAX_SPEAKERS, MAX_TEXT_CHARS, MAX_TURN_PAUSE_S
from omnivoice_rt.request import door_request
from omnivoice_rt.server.page.options import inputs
from omnivoice_rt.server.page.shared import (
    abandoned,
    as_messages,
    asked_words,
    caption_lines,
    captions_file,
    language_choice,
    page_client,
    page_request,
    voice_choice,
    wire_whole,
)
from omnivoice_rt.text import script
from omnivoice_rt.voices import VoiceLibrary

SCRIPT_TIPS = (
    'Write a dialogue, a turn a line: "Name: what Name says" (a name in any script, "小明：" '
    "too), or [voice:Name] tags anywhere. Each name speaks in the library's voice of that name, "
    "or in the voice the speakers' table gives it: a voice of the library, or a voice design "
    '("female, low pitch"). A designed voice keeps its first turn\'s voice. What no name claims '
    "is said in the voice below."
)
EXAMPLE = "alloy: Good morning! Did you sleep well?\necho: Not really. [pause:400ms] The storm."
COLUMNS = ("Speaker", "Voice")
TABLE_LABEL = (
    "Speakers: each name the script uses, filled in as you write, and its voice (a voice of the "
    "library, or a design such as 'female, low pitch'; left empty: the library's voice of that "
    "name)"
)


def layout(library: VoiceLibrary) -> dict[str, gr.components.Component]:
    """The tab's controls by the parameter of ``Handlers.script`` each fills, and its button."""
    gr.Markdown(SCRIPT_TIPS)
    text = gr.Textbox(label="Script", lines=8, placeholder=EXAMPLE, elem_id="script-text")
    table = gr.Dataframe(
        headers=list(COLUMNS),
        datatype="str",
        type="array",
        column_count=len(COLUMNS),
        interactive=True,
        label=TABLE_LABEL,
        elem_id="script-table",
    )
    # what /script takes (gradio_client, MCP): the table as NAME=VOICE lines
    speakers = gr.Textbox(visible="hidden", elem_id="script-speakers")
    with gr.Row():
        voice = voice_choice(library, "Voice of the lines no name claims", None, "script-voice")
        language = language_choice()
        turn_pause = gr.Slider(
            0.0,
            MAX_TURN_PAUSE_S,
            value=TURN_PAUSE_S,
            step=0.05,
            label="Pause between turns (s)",
            elem_id="script-turn-pause",
        )
    button = gr.Button("Speak the script", variant="primary", elem_id="script-generate")
    text.change(named_rows, [text, table], table, api_visibility="private", queue=False)
    table.change(table_lines, table, speakers, api_visibility="private", queue=False)
    return {
        "text": text,
        "speaker_voices": speakers,
        "voice": voice,
        "language": language,
        "turn_pause": turn_pause,
        "button": button,
    }


def named_rows(text: str, rows) -> list[list[str]]:
    """The speakers' table (rows of name and voice) as the visitor left it, with a row for every
    name the script uses that it lacks (its voice left for the visitor, or the library's voice
    of that name)."""
    kept = [_row(row) for row in rows or []]
    try:
        names = script.speakers_of(script.parse(text or "", named_lines=True, limit=MAX_TEXT_CHARS))
    except ValueError:
        return kept  # the script is being written: its error comes when it is spoken
    listed = {name for name, _ in kept}  # a name with no voice too: it is listed
    return [*kept, *([name, ""] for name in names if name not in listed)]


def table_lines(rows) -> str:
    """The speakers' table as ``/script`` takes it: NAME=VOICE a line, an empty row an empty
    line (so that an error's line number is its row's)."""
    lines = []
    for row in rows or []:
        name, voice = _row(row)
        lines.append(f"{name}={voice}" if name or voice else "")
    return "\n".join(lines).rstrip("\n")


def _row(row) -> list[str]:
    """A row's name and voice, each on one line (a line break pasted into a cell would split its
    row); a missing cell empty."""
    return [" ".join(("" if cell is None else str(cell)).split()) for cell in [*row, "", ""][:2]]


class ScriptHandlers:
    """The tab's endpoint, ``/script``, a part of ``handlers.Handlers``."""

    def script(self, fields: dict, progress):
        """``/script``: a dialogue spoken turn by turn, each name in its voice (``SUMMARIES``)."""
        text, table = fields.pop("text") or "", fields.pop("speaker_voices")
        precision, pause = fields.pop("precision") or self.default, fields.pop("turn_pause")
        with as_messages():
            words = asked_words(fields)
            lines = (table or "").splitlines()
            if sum(bool(line.strip()) for line in lines) > MAX_SPEAKERS:
                raise script.ScriptError(
                    f"speakers: at most {MAX_SPEAKERS}, one NAME=VOICE a line; remove the "
                    "names the script does not use"
                )
            speakers = dialogue.library_speakers(
                self.library, dialogue.given_voices(lines, "speakers, line")
            )
            turns = script.parse(text, named_lines=True, limit=MAX_TEXT_CHARS)
        # the voice below and the settings, checked as a request of the first turn
        fields.update(text=turns[0].text, duration=None)  # each turn's length is its own
        request = page_request(fields, self.service, self.library)
        options = {k: v for k, v in request.options().items() if k != "text"}
        options["voice_prompt"] = request.voice_prompt
        gone = abandoned()
        request_of = functools.partial(door_request, normalizer=self.service.normalizer(gone))
        with as_messages():
            made = dialogue.prepare(
                text, options, speakers, True, pause, request_of, limit=MAX_TEXT_CHARS
            )
        started = time.perf_counter()
        with as_messages():
            speech = self.service.synthesized(
                precision, made, progress=progress, should_stop=gone, client=page_client()
            )
            if words:
                speech.align_words(request.language)
        line = (
            f"{len(made.turns)} turns of {len(script.speakers_of(made.turns))} speakers, "
            f"{speech.seconds:.2f} s of audio in {time.perf_counter() - started:.1f} s, "
            f"{precision}, seed {request.seed}"
        )
        return (
            (speech.sample_rate, pcm16(speech.waveform)),
            line,
            captions_file(speech.captions, speech.words),
            caption_lines(speech.captions, speech.words),
        )


def wire(handlers, top, shared, result, tab) -> None:
    """The script: the settings, its speakers' table, the pause between turns."""
    made = [result["output"], result["info"], result["subtitles"], result["lines"]]
    wire_whole(
        tab["button"],
        handlers.script,
        inputs(handlers.script, shared, tab),
        made,
        "script",
        top,
        result,
    )
