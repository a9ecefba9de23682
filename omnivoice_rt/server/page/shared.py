"""What the page's tabs and handlers share: the languages, the presets' labels, the request a
handler's fields make, the runtime's errors as the page's messages, and the files a result is
handed out as."""

from __future__ import annotations

import atexit
import contextlib
import html
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import gradio as gr
import numpy as np

from omnivoice_rt import captions
from omnivoice_rt.align import load_aligner
from omnivoice_rt.artifacts.profiles import PROFILES
from omnivoice_rt.audio.formats import pcm16
from omnivoice_rt.engine.kernels import KERNELS
from omnivoice_rt.errors import REPORTED, Cancelled
from omnivoice_rt.limits import (
    MAX_DURATION_S,
    MAX_SEGMENTS,
    MAX_TEXT_CHARS,
)
from omnivoice_rt.model import Speech
from omnivoice_rt.request import DOOR_PRESET, OPTIONS, Request
from omnivoice_rt.server.clients import from_headers
from omnivoice_rt.server.models import graphs_size
from omnivoice_rt.server.page.options import ALIASES
from omnivoice_rt.server.serving import Service, resolve_seed
from omnivoice_rt.text import subtitles
from omnivoice_rt.text.languages import LANG_NAME_TO_ID, language_display_name
from omnivoice_rt.voices import VoiceLibrary

logger = logging.getLogger(__name__)

PRESET_LABELS = {
    "best": "best: 32 steps, exact (as upstream)",
    "balanced": "balanced: 16 steps, prompt cache, guidance reuse",
    "fast": "fast: 12 steps, prompt cache, guidance reuse",
    "turbo": "turbo (experimental): 12 steps, frame cache, guidance reuse",
}
LANGUAGES = ["Auto"] + sorted(language_display_name(name) for name in LANG_NAME_TO_ID)
# The page plays a long text's first piece while the rest is made; Gradio encodes streamed audio
# with ffmpeg (packages.txt), and without it the page shows the whole result at the end.
STREAMING = shutil.which("ffmpeg") is not None
SENTENCES_LABEL = (
    "Sentence by sentence: the first audio sooner (prosody can break where sentences join)"
)


def language_choice() -> gr.Dropdown:
    """A tab's language: a name from the list, or typed (a code such as 'en'); "Auto" detects it."""
    return gr.Dropdown(
        LANGUAGES, value="Auto", label="Language", filterable=True, allow_custom_value=True
    )


def voice_choice(library: VoiceLibrary, label: str, info: str | None, elem_id: str) -> gr.Dropdown:
    """A tab's voice of the library by name, or none (empty)."""
    return gr.Dropdown(
        [""] + library.names(),
        value="",
        label=label,
        info=info,
        allow_custom_value=True,
        elem_id=elem_id,
    )


def wire_whole(button, handler, inputs: list, outputs: list, api_name: str, top, result) -> None:
    """A button whose endpoint makes the whole result at the end (a dub, a script): the player and
    "keep this voice" then forget an earlier result's, and the header says what is loaded."""
    button.click(handler, inputs, outputs, api_name=api_name).then(
        lambda: (gr.skip() if STREAMING else None, ""),  # nothing of an earlier result's
        None,
        [result["player"], result["kept"]],
        api_visibility="private",
    ).then(top["describe"], top["precision"], top["info"], api_visibility="private")


def language_arg(language) -> str | None:
    """The page's language choice for the runtime: "Auto" (or nothing) lets it detect the language."""
    if language is not None and not isinstance(language, str):
        raise ValueError(
            f"language must be a string, a name or a code such as 'en'; got {type(language).__name__}"
        )
    return None if language in (None, "", "Auto") else language


def page_flag(value, name: str) -> bool:
    """A handler's true-or-false field that is no request option (the request checks its own),
    as it came: a string such as "no" is refused, not taken as true."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be true or false, got {type(value).__name__}")
    return bool(value)


def asked_words(fields: dict) -> bool:
    """The ``words`` parameter taken out of a handler's fields, checked (a raw call's None:
    false); asked for, the process's aligner is loaded now, so that a missing eSpeak NG is one
    line naming the extra before anything is made."""
    words = page_flag(fields.pop("words", False) or False, "words")
    if words:
        load_aligner()
    return words


def whole(value):
    """The steps as a slider sends them (16.0): a finite number as an int; anything else as it
    is, for the request to check (a string names a preset)."""
    is_number = isinstance(value, (int, float, np.number)) and not isinstance(value, bool)
    return int(value) if is_number and np.isfinite(value) else value


def result_line(speech: Speech, seed: int, reused: bool = False) -> str:
    meta = speech.metadata
    reference = "; the reference's encoding was reused" if reused else ""
    normalized = "; numbers and dates read as words" if "normalized_text" in meta else ""
    return (
        f"{meta['seconds']:.2f} s of audio in {meta['timings']['total']:.2f} s "
        f"(real-time factor {meta['rtf']:.2f}), {meta['precision']}, {meta['steps']} steps, seed {seed}"
        f"{reference}{normalized}"
    )


def read_as(speech: Speech) -> str:
    """For the page, under the result line: the text as the model read it, when normalization
    changed it (Markdown's characters escaped)."""
    text = speech.metadata.get("normalized_text")
    if text is None:
        return ""
    return "\n\nRead as: " + escaped(text)


def escaped(text: str) -> str:
    """``text`` shown as it is in Markdown."""
    return "".join("\\" + c if c in MARKDOWN_CHARS else c for c in text)


MARKDOWN_CHARS = frozenset("\\`*_{}[]()<>#+-.!|~")


# Writes to the voice library need the API key where one is set, on every door: the page and MCP
# carry none, so there only the key's door writes.
LIBRARY_KEYED = (
    "This server's voice library takes new voices with its API key only: POST /v1/audio/voices "
    "with 'Authorization: Bearer <key>'."
)


def refused(message: str, visible: bool = True) -> gr.Error:
    """The error a request gets back: one line on the page and in the API, one line in the log."""
    logger.info("refused a request: %s", message)
    return gr.Error(message, visible=visible, print_exception=False)


def abandoned() -> Callable[[], bool]:
    """For the request being handled: a function that says whether its client went away (page
    closed, connection lost, request cancelled). Gradio marks such an event as no longer alive, or
    drops it from its workers, but cannot stop the thread that serves it; the runtime asks this
    after every step and stops. Uses Gradio's queue internals (gradio 6), covered by a test."""
    from gradio.context import LocalContext

    blocks, event_id = LocalContext.blocks.get(None), LocalContext.event_id.get(None)
    if blocks is None or event_id is None or getattr(blocks, "_queue", None) is None:
        return lambda: False

    def gone() -> bool:
        try:
            for job in blocks._queue.active_jobs:
                for event in job or ():
                    if event._id == event_id:
                        return not event.alive
        except AttributeError:  # another Gradio: the request is then never taken for abandoned
            return False
        return True

    return gone


def page_client() -> str | None:
    """The client of the request being handled (``clients.py``: its address, or an MCP client's
    through Gradio's loopback call), for its share of the line; None outside a request."""
    from gradio.context import LocalContext

    request = LocalContext.request.get(None)
    return from_headers(getattr(request, "headers", None))


@contextlib.contextmanager
def as_messages():
    """The runtime's errors as the page's and the API's one-line messages."""
    try:
        yield
    except REPORTED as exc:
        raise refused(str(exc)) from exc
    except Cancelled as exc:
        raise refused(str(exc), visible=False) from exc


@contextlib.contextmanager
def prepared(service: Service, precision: str, progress, request: Request, should_stop):
    """``Service.prepared`` (load, wait in line, encode the reference) with the errors as messages;
    a request whose client went away leaves the line."""
    made = service.prepared(
        precision, request, progress, should_stop=should_stop, client=page_client()
    )
    with as_messages(), made as ready:
        yield ready


def library_voice(library: VoiceLibrary | None, name) -> dict:
    """The request options of the library's voice ``name`` ({} for none)."""
    if not name:
        return {}
    with as_messages():
        return (library or VoiceLibrary()).options(name)


def page_request(fields: dict, service: Service, library: VoiceLibrary | None = None) -> Request:
    """A handler's fields (its arguments, by the page's names) as a request: "Auto" is no
    language, a voice prompt (or a voice of the library) replaces the reference, 0 s is no
    duration, the seed is drawn; its numbers read as words by the server's worker."""
    for old, new in ALIASES.items():  # the API's older names, where given, win
        if fields.get(old) is not None:
            fields = {**fields, new: fields[old]}
    saved = library_voice(library, fields.get("voice"))
    prompt = fields.get("voice_prompt") or saved.get("voice_prompt")
    if "ref_audio" in fields and not fields["ref_audio"] and not prompt and not saved:
        raise refused(
            "Record or upload a reference voice (or load a voice prompt file, or choose a voice "
            "of the library) first."
        )
    with as_messages():
        options = {
            "text": fields["text"],
            "language": language_arg(fields["language"]) or saved.get("language"),
            "instruct": fields.get("instruct") or saved.get("instruct"),
            "ref_audio": None if prompt else fields.get("ref_audio") or None,
            "ref_text": None if prompt else fields.get("ref_text") or None,
            "voice_prompt": prompt,
            "seed": resolve_seed(
                fields["seed"], page_flag(fields["randomize_seed"], "randomize_seed")
            ),
            "preset": fields["preset"],
            "num_step": whole(fields["num_step"]),
            "guidance_scale": fields["guidance_scale"],
            "speed": fields["speed"],
            "duration": fields["duration"] or None,  # 0 or empty: estimated
            "denoise": fields["denoise"],
            "postprocess_output": fields["postprocess_output"],
            "normalize_text": fields["normalize_text"],
        }
        # an option an endpoint takes beyond these (options.ENDPOINTS), as it came
        for name in fields.keys() & OPTIONS.keys() - options.keys():
            if fields[name] is not None:
                options[name] = fields[name]
        return Request.from_options(
            options, DOOR_PRESET, normalizer=service.normalizer(abandoned())
        )


def run_synthesis(
    service: Service, precision: str, progress, request: Request, words: bool = False
) -> tuple[tuple[int, np.ndarray], str, str]:
    """The API's whole result (``Service.synthesized``) with a step-by-step progress bar, its
    errors as the page's messages: the audio, the result's line, its captions (an SRT file;
    with ``words``, each word placed: a WebVTT file with their timestamp tags)."""
    with as_messages():
        speech = service.synthesized(
            precision, request, progress=progress, should_stop=abandoned(), client=page_client()
        )
        if words:
            speech.align_words(request.language)
    audio = (speech.sample_rate, pcm16(speech.waveform))
    reused = speech.metadata["reused_reference"]
    line = result_line(speech, request.seed, reused)
    return audio, line, captions_file(speech.captions, speech.words)


def stream_synthesis(
    service: Service,
    precision: str,
    progress,
    request: Request,
    sentences: bool = False,
    words: bool = False,
) -> Iterator[tuple]:
    """``run_synthesis`` for the page: each piece goes to the player as soon as it is made (when
    ``STREAMING``), then the pieces joined (what was played) become the result to download.
    Yields (piece, whole, info, captions file, caption lines, the id of its voice: "Keep this
    voice"). With ``words``, the whole result's words are placed once it is made, and its lines
    show them, highlighted as the player plays them (``HIGHLIGHT``)."""
    parts: list[Speech] = []
    made = service.speak(
        precision,
        request,
        sentences=sentences,
        keep=True,
        progress=progress,
        should_stop=abandoned(),
        client=page_client(),
    )
    with as_messages(), contextlib.closing(made):
        for part in made:
            parts.append(part)
            done, count = part.metadata["piece"] + 1, part.metadata["pieces_in_request"]
            note = (
                f"Playing piece {done} of {count} while the rest is made…"
                if done < count
                else "Finishing…"
            )
            yield (
                (part.sample_rate, pcm16(part.waveform)) if STREAMING else gr.skip(),
                gr.skip(),
                note,
                gr.skip(),
                gr.skip(),
                gr.skip(),
            )
    speech = Speech.join(parts)
    if words:
        with as_messages():
            speech.align_words(request.language)
    yield (
        gr.skip(),
        (speech.sample_rate, pcm16(speech.waveform)),
        result_line(speech, request.seed, parts[0].metadata["reused_reference"]) + read_as(speech),
        captions_file(speech.captions, speech.words),
        caption_lines(speech.captions, speech.words),
        parts[0].metadata["kept"],  # the first piece's voice: the whole's (Speech.voice_prompt)
    )


def precision_line(service: Service, precision: str) -> str:
    """The page's line about a precision: what it is for, what its graphs hold (read from them,
    so the published int4, whose heads are int4, says so), and whether it is loaded, loading, on
    disk, or still to download."""
    profile = PROFILES.get(precision)
    held = service.models.weights(precision)
    title = f"**{precision}** ({profile.summary if profile else 'unknown'})" + (
        f": {held}." if held else "."
    )
    if precision == service.models.default and service.models.default_reason != "asked for":
        title += f" The server's default: {service.models.default_reason}."
    voice = service.models.loaded.get(precision)
    if voice is not None:
        size = graphs_size(voice.root, voice.manifest.profile(precision).graphs)
        repaired = " The LLM was repaired to attend bidirectionally." if voice.repaired_llm else ""
        kernel, why = voice.matmul
        kernels = (
            f" Its LLM multiplies with {kernel}, {KERNELS[kernel].summary} ({why})."
            if precision != "cuda"
            else ""
        )
        return f"{title} Loaded, {size / 1e6:.0f} MB on disk: ready.{repaired}{kernels}"
    if precision in service.models.activity:
        return f"{title} {service.models.activity[precision]}…"
    if precision in service.models.failures:
        failure = service.models.failures[precision]
        return f"{title} It could not be loaded ({failure}); the next synthesis tries again."
    return f"{title} {service.models.availability(precision)} The first synthesis with it loads it."


def examples_cache() -> None:
    """The examples' results depend on the artifacts this server loaded, so they are kept for this
    process only (a folder removed at exit), never served to a later server with other models."""
    if "GRADIO_EXAMPLES_CACHE" not in os.environ:
        folder = tempfile.mkdtemp(prefix="omnivoice-examples-")
        os.environ["GRADIO_EXAMPLES_CACHE"] = folder
        atexit.register(shutil.rmtree, folder, ignore_errors=True)


def result_file(kind: str, suffix: str) -> Path:
    """A fresh path for a file the page hands out (a voice prompt, captions), in one folder per
    kind whose files older than an hour go."""
    folder = Path(tempfile.gettempdir()) / f"omnivoice-{kind}"
    folder.mkdir(exist_ok=True)
    for old in folder.glob(f"*{suffix}"):
        if time.time() - old.stat().st_mtime > 3600:
            old.unlink(missing_ok=True)
    return Path(
        tempfile.mkstemp(
            prefix=f"{kind[:-1]}-{time.strftime('%Y%m%d-%H%M%S')}-", suffix=suffix, dir=folder
        )[1]
    )


def prompt_file() -> Path:
    """A fresh path for a saved voice prompt (.npz)."""
    return result_file("prompts", ".npz")


def captions_file(placed: list[captions.Caption], words: list | None = None) -> str:
    """A result's captions as an SRT file (``omnivoice_rt.captions``), for the page's download
    and the API's third output; with its ``words``, a WebVTT file whose cues carry each word's
    start as a timestamp tag."""
    if words is None:
        path = result_file("captions", ".srt")
        path.write_text(captions.write(placed, "srt"), encoding="utf-8")
    else:
        path = result_file("captions", ".vtt")
        path.write_text(captions.write_words(placed, words, "vtt"), encoding="utf-8")
    return str(path)


def caption_lines(placed: list[captions.Caption], words: list | None = None) -> str:
    """The captions as the page shows them under the player: one line per piece, its start and
    end, who says it (a script's or a dub's speaker) and its text (Markdown's characters
    escaped); with its ``words``, each word a span holding its start and end, which the page
    highlights as the player reaches it (``HIGHLIGHT``)."""
    own = captions.words_by_caption(placed, words) if words is not None else [None] * len(placed)
    lines = []
    for c, mine in zip(placed, own, strict=True):
        if mine is None:
            said = escaped(c.shown)
        else:  # as the caption shows them: "你好" not spaced apart
            shown = captions.as_shown(c, mine)
            spans = zip(mine, shown, strict=True)
            said = "".join(space + word_span(w, text) for w, (space, text) in spans)
        speaker = escaped(f"{c.speaker}: ") if c.speaker else ""
        lines.append(f"`{clock(c.start)}-{clock(c.end)}` {speaker}{said}  ")
    return "\n".join(lines)


def word_span(word, shown: str) -> str:
    """A word of the lines: its text as its caption shows it (``shown``), and where it is
    spoken, "start-end s" in its title (shown on hover, read by the highlighting; the
    Markdown's sanitizer keeps a title, not a data-attribute); no title where it was not
    found."""
    text = html.escape(shown)
    if word.start is None:
        return f'<span class="word">{text}</span>'
    return f'<span class="word" title="{word.start:.3f}-{word.end:.3f} s">{text}</span>'


# The page's script: the word of the result's lines whose time a result's player is at is marked
# ``spoken``, from the moment a seek starts (a streamed player's seek may wait for data). The
# streamed pieces' player (which plays the whole result's timeline too, its pieces
# joined in order) is in the document: its media events reach a capturing listener there. Gradio's
# waveform player of the whole result keeps its media element in a shadow root, which its events
# never leave: that element is found, and followed itself, when the player is pressed or keyed
# (before it plays or seeks)
HIGHLIGHT = """<script>
(() => {
  const mark = (player) => {
    const now = player.currentTime;
    for (const span of document.querySelectorAll('#result-lines span.word[title]')) {
      const [start, end] = span.title.split('-').map(parseFloat);
      span.classList.toggle('spoken', start <= now && now < end);
    }
  };
  const EVENTS = ['timeupdate', 'seeking', 'seeked', 'play'];
  const inDocument = (event) => {
    const player = event.target;
    if (player instanceof HTMLMediaElement && player.closest('#result-audio, #result-stream')) mark(player);
  };
  for (const kind of EVENTS) document.addEventListener(kind, inDocument, true);
  const followed = new WeakSet();
  const inShadow = (event) => {
    const box = event.target instanceof Element && event.target.closest('#result-audio');
    if (!box) return;
    for (const host of box.querySelectorAll('*')) {
      for (const player of host.shadowRoot?.querySelectorAll('audio, video') ?? []) {
        if (followed.has(player)) continue;
        followed.add(player);
        for (const kind of EVENTS) player.addEventListener(kind, () => mark(player));
      }
    }
  };
  for (const kind of ['pointerdown', 'keydown']) document.addEventListener(kind, inShadow, true);
})();
</script>
"""


def page_cues(path) -> list[subtitles.Cue]:
    """An uploaded subtitle file's cues, within what the page dubs in one request (a text's
    bounds: ``MAX_SEGMENTS`` cues, ``MAX_TEXT_CHARS`` characters, ``MAX_DURATION_S`` of track)."""
    if not path:
        raise refused("Upload a subtitle file (.srt or .vtt) to dub first.")
    with as_messages():
        cues = subtitles.read(path, subtitles.sniffed(path))
    spoken = [cue for cue in cues if cue.text.strip()]
    chars, end = sum(len(cue.text) for cue in spoken), max((cue.end for cue in cues), default=0)
    if len(spoken) > MAX_SEGMENTS or chars > MAX_TEXT_CHARS or end > MAX_DURATION_S:
        raise refused(
            f"This page dubs at most {MAX_SEGMENTS} cues, {MAX_TEXT_CHARS:,} characters and "
            f"{MAX_DURATION_S:g} s of track in one go; this file has {len(spoken)} cues, "
            f"{chars:,} characters, {end:g} s. Split it, or dub it with the command line "
            "(omnivoice-onnx dub), which takes 6 hours."
        )
    if not spoken:
        raise refused("No cue of this subtitle file has anything to say.")
    return cues


def report_file(report: dict) -> str:
    path = result_file("dubs", ".json")
    path.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return str(path)


def clock(seconds: float) -> str:
    minutes, seconds = divmod(seconds, 60)
    return f"{int(minutes)}:{seconds:05.2f}"
