"""The Gradio page over ``omnivoice_rt``: its tabs, its handlers and its API.

Tabs for text-to-speech (auto voice and voice design) and voice cloning, a precision selector,
settings, progress over download and unmasking, audio played as it is made, and stable API
endpoints for ``gradio_client``: ``/synthesize``, ``/clone``, ``/save_voice_prompt`` and
``/transcribe`` (also MCP tools with ``--mcp``). ``main.py`` serves the page with the other doors
from one process; every door shares ``serving.py``'s line.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import inspect
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

from omnivoice_rt import captions, dubbing
from omnivoice_rt.artifacts.profiles import PROFILES
from omnivoice_rt.audio.formats import pcm16
from omnivoice_rt.engine.kernels import KERNELS
from omnivoice_rt.errors import REPORTED, Cancelled
from omnivoice_rt.limits import (
    DUB_MAX_SPEED,
    MAX_DURATION_S,
    MAX_SEGMENTS,
    MAX_SPEED,
    MAX_STEPS,
    MAX_TEXT_CHARS,
)
from omnivoice_rt.model import Speech
from omnivoice_rt.request import DOOR_PRESET, PRESETS, Request, door_request
from omnivoice_rt.server.models import graphs_size, offered_precisions
from omnivoice_rt.server.serving import DEFAULTS, Config, Service, resolve_seed
from omnivoice_rt.text import subtitles
from omnivoice_rt.text.chunks import NONVERBAL_TAGS
from omnivoice_rt.text.instructs import INSTRUCT_EXCLUSIVE
from omnivoice_rt.text.languages import LANG_NAME_TO_ID, check_string, language_display_name
from omnivoice_rt.voices import VoiceLibrary

logger = logging.getLogger(__name__)

PRESET_LABELS = {
    "best": "best: 32 steps, exact (as upstream)",
    "balanced": "balanced: 16 steps, prompt cache, guidance reuse",
    "fast": "fast: 12 steps, prompt cache, guidance reuse",
    "turbo": "turbo (experimental): 12 steps, frame cache, guidance reuse",
}
LANGUAGES = ["Auto"] + sorted(language_display_name(name) for name in LANG_NAME_TO_ID)
GENDERS, AGES, PITCHES, STYLES = (
    sorted({x for x in INSTRUCT_EXCLUSIVE[i] if x.isascii()}) for i in range(4)
)
ACCENTS, DIALECTS = sorted(INSTRUCT_EXCLUSIVE[4]), sorted(INSTRUCT_EXCLUSIVE[5])
# The page plays a long text's first piece while the rest is made; Gradio encodes streamed audio
# with ffmpeg (packages.txt), and without it the page shows the whole result at the end.
STREAMING = shutil.which("ffmpeg") is not None
SENTENCES_LABEL = (
    "Sentence by sentence: the first audio sooner (prosody can break where sentences join)"
)
REFERENCE_TIPS = (
    "A good reference: 3-10 s of one person speaking clearly, little background noise, in the language "
    "you will synthesize. Its transcript is filled in when you record or upload it: check it, or type "
    "it; left empty, it is transcribed when you generate. Or load a voice prompt saved earlier."
)
DUB_TIPS = (
    "Each cue of a subtitle file is spoken in its window and placed at its start time, in one "
    "track as long as the last cue: at its natural pace where it fits, else faster, up to the "
    "fastest speech below. A cue that cannot fit is named, with the time it needs, and nothing "
    "is made. The Settings apply, but the duration: each cue's is its window's. Up to 200 cues "
    "and 600 s here; `omnivoice-onnx dub` takes longer files."
)
DEFAULT_TEXT = "Hello! This is OmniVoice, speaking from ONNX Runtime on a CPU."
# The API's older parameter names (gradio_client, MCP), still taken: the request's names are OPTIONS'
ALIASES = {"guidance": "guidance_scale", "postprocess": "postprocess_output"}
LICENCE_LINE = (  # the page's footer; README "Licences" says more
    "Code: Apache-2.0. The OmniVoice weights (k2-fsa/OmniVoice): CC-BY-NC, non-commercial use "
    "only, as their authors state. The Higgs Audio V2 tokenizer: Boson AI's licence."
)
EXAMPLES = [
    ["Hello! This is OmniVoice, running on ONNX Runtime without PyTorch.", "English", ""],
    ["The weather is lovely today [laughter], let's go for a walk.", "Auto", "female, young adult"],
    ["今天天气很好，我们一起去公园散步吧。", "Chinese", "男，中年"],
]


# ----------------------------------------------------------------------------- helpers


def design_instruct(gender, age, pitch, style, accent, dialect) -> str:
    """The voice-design choices as one instruct string, for the box that is sent (and editable)."""
    items = [x for x in (gender, age, pitch, style, accent, dialect) if x and x != "Any"]
    return ", ".join(items)


# The non-verbal tag buttons keep their labels on one line; they wrap as a row instead.
PAGE_CSS = ".tag-button { white-space: nowrap; flex: 0 0 auto !important; }"


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
    with (
        as_messages(),
        service.prepared(precision, request, progress, should_stop=should_stop) as ready,
    ):
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
        return Request.from_options(
            options, DOOR_PRESET, normalizer=service.normalizer(abandoned())
        )


def run_synthesis(
    service: Service, precision: str, progress, request: Request
) -> tuple[tuple[int, np.ndarray], str, str]:
    """Load the precision, synthesize with a step-by-step progress bar, turn errors into gr.Error.
    The API's outputs: the audio, the result's line, its captions (an SRT file)."""
    gone = abandoned()
    with prepared(service, precision, progress, request, gone) as (voice, ready, reused):
        speech = voice.generate(ready, progress=step_progress(progress), should_stop=gone)
    audio = (speech.sample_rate, pcm16(speech.waveform))
    return audio, result_line(speech, request.seed, reused), captions_file(speech.captions)


def stream_synthesis(
    service: Service, precision: str, progress, request: Request, sentences: bool = False
) -> Iterator[tuple]:
    """``run_synthesis`` for the page: each piece goes to the player as soon as it is made (when
    ``STREAMING``), then the pieces joined (what was played) become the result to download.
    Yields (piece, whole, info, captions file, caption lines, the id of its voice: "Keep this
    voice")."""
    parts: list[Speech] = []
    gone = abandoned()
    with prepared(service, precision, progress, request, gone) as (voice, ready, reused):
        stream = voice.stream(
            ready, progress=step_progress(progress), should_stop=gone, sentences=sentences
        )
        for part in stream:
            parts.append(part)
            done, count = part.metadata["piece"] + 1, part.metadata["pieces"]
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
    yield (
        gr.skip(),
        (speech.sample_rate, pcm16(speech.waveform)),
        result_line(speech, request.seed, reused) + read_as(speech),
        captions_file(speech.captions),
        caption_lines(speech.captions),
        service.results.add(speech),
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


def step_progress(progress) -> Callable[[int, int], None]:
    return lambda done, total: progress(done / total, desc=f"Step {done}/{total}")


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


def captions_file(placed: list[captions.Caption]) -> str:
    """A result's captions as an SRT file (``omnivoice_rt.captions``), for the page's download
    and the API's third output."""
    path = result_file("captions", ".srt")
    path.write_text(captions.write(placed, "srt"), encoding="utf-8")
    return str(path)


def caption_lines(placed: list[captions.Caption]) -> str:
    """The captions as the page shows them under the player: one line per piece, its start and
    end and its text (Markdown's characters escaped)."""
    return "\n".join(
        f"`{clock(c.start)}-{clock(c.end)}` " + escaped(c.shown) + "  " for c in placed
    )


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


# ----------------------------------------------------------------------------- event handlers


def with_defaults(handler: Callable, **defaults) -> Callable:
    """``handler`` with the defaults of some parameters replaced: Gradio reads a handler's
    signature for its API's parameters and their defaults (the server's default precision)."""
    signature = inspect.signature(handler)
    parameters = [
        p.replace(default=defaults.get(p.name, p.default)) for p in signature.parameters.values()
    ]

    @functools.wraps(handler)
    def defaulted(*args, **kwargs):
        return handler(*args, **kwargs)

    defaulted.__signature__ = signature.replace(parameters=parameters)
    return defaulted


def counted(handler: Callable, metrics) -> Callable:
    """``handler`` (a function, or a generator function: the page's pieces) with each call's end
    counted as a request of the page's door (``Metrics.ended``); its signature kept for Gradio."""

    def end(exc: BaseException) -> BaseException:  # a message the page wrote itself: bad input
        plain = isinstance(exc, gr.Error) and exc.__cause__ is None
        return ValueError(str(exc)) if plain else exc

    if inspect.isgeneratorfunction(handler):

        @functools.wraps(handler)
        def pieces(*args, **kwargs):
            try:
                yield from handler(*args, **kwargs)
            except BaseException as exc:
                metrics.ended("page", end(exc))
                raise
            metrics.ended("page")

        return pieces

    @functools.wraps(handler)
    def whole(*args, **kwargs):
        try:
            result = handler(*args, **kwargs)
        except BaseException as exc:
            metrics.ended("page", end(exc))
            raise
        metrics.ended("page")
        return result

    return whole


class Handlers:
    """What the page's buttons and its API call. The API's handlers (``synthesize``, ``clone``...:
    the whole result at the end; their docstrings describe the MCP tools) and the page's
    (``synthesize_page``, ``clone_page``: pieces as they are made, when ``STREAMING``) share the
    service, its line and its messages. Each handler's signature is its endpoint's, read by
    Gradio. ``keyed``: the server has an API key, which the library's writes need
    (``LIBRARY_KEYED``): the page and MCP, which carry none, do not write."""

    def __init__(self, service: Service, default: str, library: VoiceLibrary, keyed: bool = False):
        self.service, self.default, self.library, self.keyed = service, default, library, keyed
        for name in ("synthesize", "clone", "save_voice_prompt", "save_to_library", "dub"):
            setattr(self, name, with_defaults(getattr(self, name), precision=default))
        self.synthesize_page = self.page_twin(self.synthesize)
        self.clone_page = self.page_twin(self.clone)
        for name in ("synthesize", "clone", "dub", "synthesize_page", "clone_page"):
            setattr(self, name, counted(getattr(self, name), service.metrics))

    def synthesize(
        self,
        text,
        language="Auto",
        instruct=None,
        precision=None,
        num_step=DEFAULTS["num_step"],
        guidance_scale=DEFAULTS["guidance_scale"],
        speed=1.0,
        duration=0.0,
        seed=0,
        randomize_seed=DEFAULTS["randomize_seed"],
        denoise=True,
        postprocess_output=DEFAULTS["postprocess_output"],
        preset=DOOR_PRESET,
        normalize_text=DEFAULTS["normalize_text"],
        guidance=None,
        postprocess=None,
        progress=gr.Progress(),
    ):
        """Speak a text in a new voice: chosen by the model, or designed from a short description.
        Takes about 3 s of work per second of speech on a 2-core CPU (balanced preset).

        Args:
            text: What to say, up to 10,000 characters, in any of 600+ languages. Non-verbal tags such as [laughter] or [sigh] may appear in it, and pauses: [pause:1.5s] or [pause:300ms]; a text starting with <speak> is SSML (break, p, s, prosody rate, sub, lang).
            language: The text's language by name ("English") or code ("en"); "Auto" detects it.
            instruct: The voice, as comma-separated items (at most one per kind): gender (male, female), age (child, teenager, young adult, middle-aged, elderly), pitch (very low pitch ... very high pitch), whisper, an English accent ("british accent"). Empty: the model chooses.
            precision: Model precision, one this server offers (the page's selector lists them; int4 is the fastest on most CPUs); left out: the server's default.
            num_step: Unmasking steps, 1 to 64 (the preset's: 16 balanced, 32 best, 12 fast).
            guidance_scale: Classifier-free guidance scale, 0 to 5 (2 by default).
            speed: Speaking rate, 1.0 normal; above 1 is faster.
            duration: Length of the speech in seconds, up to 600; 0 estimates it from the text.
            seed: Random seed; the same seed and settings give the same audio.
            randomize_seed: True draws a new seed each call (the seed argument is then ignored).
            denoise: Denoise a reference (cloning only).
            postprocess_output: Trim long silences and normalise the loudness.
            preset: "balanced" (default), "best" (32 steps, as upstream), "fast" (12 steps) or
                "turbo" (experimental: 12 steps, only changed frames run between refreshes).
            normalize_text: True (default) reads numbers, dates, times, money and percentages as words ("$12.50" as "twelve point five dollars"), as upstream's normalize_text does; False reads the text as written (spell numbers out yourself then).
            guidance: The older name of guidance_scale, still taken (it wins where given).
            postprocess: The older name of postprocess_output, still taken (it wins where given).
        Returns:
            The speech as a 24 kHz wav file, one line saying its length, time taken and seed, and its captions: an SRT file, one cue per spoken piece (its start, end and text, exact to the sample).
        """
        fields = dict(
            text=text,
            language=language,
            instruct=instruct,
            num_step=num_step,
            guidance_scale=guidance_scale,
            speed=speed,
            duration=duration,
            seed=seed,
            randomize_seed=randomize_seed,
            denoise=denoise,
            postprocess_output=postprocess_output,
            preset=preset,
            normalize_text=normalize_text,
            guidance=guidance,
            postprocess=postprocess,
        )
        return self.speak(fields, precision, progress)

    def clone(
        self,
        text,
        ref_audio=None,
        ref_text=None,
        voice_prompt=None,
        language="Auto",
        precision=None,
        num_step=DEFAULTS["num_step"],
        guidance_scale=DEFAULTS["guidance_scale"],
        speed=1.0,
        duration=0.0,
        seed=0,
        randomize_seed=DEFAULTS["randomize_seed"],
        denoise=True,
        postprocess_output=DEFAULTS["postprocess_output"],
        preset=DOOR_PRESET,
        normalize_text=DEFAULTS["normalize_text"],
        instruct=None,
        voice=None,
        guidance=None,
        postprocess=None,
        progress=gr.Progress(),
    ):
        """Speak a text in the voice of a reference recording, of a voice prompt saved earlier, or of a voice of the server's library (list_voices).

        Args:
            text: What to say, up to 10,000 characters; pauses as [pause:1.5s], or SSML (<speak>...</speak>).
            ref_audio: A recording of the voice to clone: 3-10 s of one person speaking clearly (0.5-30 s accepted; wav, flac, mp3, ogg; up to 20 MB): an http(s) URL, a data: URI, or the path POST /gradio_api/upload returned. Leave it out (or empty) when voice_prompt is given.
            ref_text: What the recording says, up to 2,000 characters; empty: it is transcribed with Whisper.
            voice_prompt: A voice prompt file (.npz) from save_voice_prompt (the URL it returned), used instead of ref_audio and ref_text; leave it out (or empty) otherwise.
            language: The text's language by name or code; "Auto" detects it.
            precision: Model precision, one this server offers; left out: the server's default.
            num_step: Unmasking steps, 1 to 64.
            guidance_scale: Classifier-free guidance scale, 0 to 5.
            speed: Speaking rate, 1.0 normal.
            duration: Length of the speech in seconds; 0 estimates it.
            seed: Random seed; the same seed and settings give the same audio.
            randomize_seed: True draws a new seed each call.
            denoise: Denoise the reference first.
            postprocess_output: Trim long silences and match the reference's loudness.
            preset: "balanced" (default), "best", "fast" or "turbo" (experimental).
            normalize_text: True (default) reads numbers, dates, times, money and percentages as words; False reads the text as written.
            instruct: A style over the cloned voice, as voice-design items ("whisper", "high pitch"); empty: the reference's own.
            voice: The name of a voice of the server's library (list_voices lists them), used instead of ref_audio and voice_prompt; empty otherwise.
            guidance: The older name of guidance_scale, still taken (it wins where given).
            postprocess: The older name of postprocess_output, still taken (it wins where given).
        Returns:
            The speech as a 24 kHz wav file, one line saying its length, time taken and seed, and its captions: an SRT file, one cue per spoken piece (its start, end and text, exact to the sample).
        """
        fields = dict(
            text=text,
            ref_audio=ref_audio,
            ref_text=ref_text,
            voice_prompt=voice_prompt,
            language=language,
            num_step=num_step,
            guidance_scale=guidance_scale,
            speed=speed,
            duration=duration,
            seed=seed,
            randomize_seed=randomize_seed,
            denoise=denoise,
            postprocess_output=postprocess_output,
            preset=preset,
            normalize_text=normalize_text,
            instruct=instruct,
            voice=voice,
            guidance=guidance,
            postprocess=postprocess,
        )
        return self.speak(fields, precision, progress)

    def speak(self, fields: dict, precision: str | None, progress):
        """An API handler's fields (by the page's names: ``page_request``) spoken, whole."""
        request = page_request(fields, self.service, self.library)
        return run_synthesis(self.service, precision or self.default, progress, request)

    def page_twin(self, api_handler):
        """The page's button for an API handler: the same fields (this signature, which Gradio
        reads, is the handler's), then the "sentence by sentence" box; the pieces go to the
        player as they are made."""
        signature = inspect.signature(api_handler)
        *fields, progress = signature.parameters.values()
        sentences = inspect.Parameter(
            "sentences", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=False
        )
        twin_signature = signature.replace(parameters=[*fields, sentences, progress])

        def twin(*args, **kwargs):
            bound = twin_signature.bind(*args, **kwargs)
            bound.apply_defaults()
            values = bound.arguments
            for old in ALIASES:  # the page's own controls carry the values
                values.pop(old, None)
            tracker = values.pop("progress", progress.default)
            with as_messages():
                pieces = page_flag(values.pop("sentences", False), "sentences")
            request = page_request(values, self.service, self.library)
            precision = values["precision"] or self.default
            yield from stream_synthesis(self.service, precision, tracker, request, pieces)

        twin.__signature__ = twin_signature
        twin.__name__ = f"{api_handler.__name__}_page"
        return twin

    def save_voice_prompt(self, ref_audio, ref_text=None, precision=None, progress=gr.Progress()):
        """Encode a reference recording once as a voice prompt file, to clone that voice again without the recording.

        Args:
            ref_audio: A recording of the voice: 3-10 s of one person speaking clearly (0.5-30 s accepted; up to 20 MB): an http(s) URL, a data: URI, or the path POST /gradio_api/upload returned.
            ref_text: What the recording says; empty: it is transcribed with Whisper.
            precision: The model precision that encodes the prompt (prompts work across precisions); left out: the server's default.
        Returns:
            A voice prompt file (.npz, kept for an hour on this server) to pass to clone as voice_prompt.
        """
        if not ref_audio:
            raise refused("Record or upload a reference voice first.")
        with as_messages():
            if ref_text is not None:
                check_string(ref_text, "ref_text (the reference's transcript)")
            reference = self.service.reference(
                precision, ref_audio, ref_text, None, progress, None, abandoned()
            )
            with reference as (_, prompt, _):
                pass
        path = prompt_file()
        prompt.save(path)
        return str(path)

    def transcribe(self, ref_audio, language="Auto", progress=gr.Progress()):
        """Transcribe a reference recording with Whisper: what the recording says, to check before cloning.

        Args:
            ref_audio: A recording of up to 30 s (longer ones are cut at a silence near 20 s): an http(s) URL, a data: URI, or the path POST /gradio_api/upload returned.
            language: The recording's language by name or code; "Auto" detects it.
        Returns:
            The transcript, one line of text.
        """
        if not ref_audio:
            return ""
        with as_messages(), self.service.in_use():
            recogniser = self.service.recogniser.get(progress)
            with self.service.slot(progress, should_stop=abandoned()):
                progress(0.5, desc="Transcribing the reference")
                return recogniser.transcribe(ref_audio, language_arg(language))

    def list_voices(self):
        """The voices of the server's library, to clone by name (clone's voice argument): saved references and named voice designs.

        Returns:
            A list of voices: name, kind ("clone": a saved reference, "design": an instruct), language, instruct, duration of the reference in seconds, created.
        """
        return [entry.as_dict() for entry in self.library.saved()]

    def save_to_library(
        self,
        name,
        ref_audio=None,
        ref_text=None,
        language="Auto",
        precision=None,
        progress=gr.Progress(),
    ):
        """Save a reference recording in the server's voice library under a name, for every door (the page, clone's voice argument, the OpenAI and Wyoming doors). Only where the server allows it (--voices-writable) and has no API key (with a key: POST /v1/audio/voices).

        Args:
            name: The voice's name: 1 to 64 letters, digits, '_', '.' or '-'.
            ref_audio: A recording of the voice: 3-10 s of one person speaking clearly: an http(s) URL, a data: URI, or the path POST /gradio_api/upload returned.
            ref_text: What the recording says; empty: it is transcribed with Whisper.
            language: The recording's language by name or code; "Auto": none.
            precision: The model precision that encodes it; left out: the server's default.
        Returns:
            One line saying what was saved.
        """
        if self.keyed and self.library.writable:
            raise refused(LIBRARY_KEYED)
        if not ref_audio:
            raise refused("Record or upload a reference voice first.")
        with as_messages():
            language = language_arg(language)

        def encode():
            reference = self.service.reference(
                precision, ref_audio, ref_text or None, language, progress, None, abandoned()
            )
            with reference as (_, prompt, _):
                return prompt

        with as_messages():
            try:
                named = name.strip() if isinstance(name, str) else name
                entry = self.library.add_recording(named, encode, language)
            except (FileExistsError, PermissionError) as exc:  # not REPORTED: said here
                raise ValueError(str(exc)) from None
        return f"Saved {entry.name!r} in the library ({entry.duration:g} s of speech)."

    def keep_voice(self, result, name=None):
        """The page's "Keep this voice": the last result's voice (its first piece's codes and
        text: ``Speech.voice_prompt``) as a voice prompt file, and, given a name where the page
        may write to the library, as a voice of the library too."""
        if not result:
            raise refused("Generate something first: the voice of the result is what is kept.")
        with as_messages():
            prompt = self.service.results.get(result)
        path = prompt_file()
        prompt.save(path)
        named = name.strip() if isinstance(name, str) else ""
        if not named or not self.library.writable or self.keyed:
            return str(path), (
                "This voice is in the prompt file: load it under Voice cloning to speak in it "
                "again."
            )
        with as_messages():
            try:
                entry = self.library.add_prompt(named, prompt)
            except (FileExistsError, PermissionError) as exc:  # not REPORTED: said here
                raise ValueError(str(exc)) from None
        return str(path), (
            f"Kept {entry.name!r} in the library ({entry.duration:g} s of its speech): choose it "
            "under Voice cloning, or as the voice of any door."
        )

    def dub(
        self,
        subtitles_file,
        language="Auto",
        instruct=None,
        voice=None,
        precision=None,
        num_step=DEFAULTS["num_step"],
        guidance_scale=DEFAULTS["guidance_scale"],
        speed=1.0,
        seed=0,
        randomize_seed=DEFAULTS["randomize_seed"],
        denoise=True,
        postprocess_output=DEFAULTS["postprocess_output"],
        preset=DOOR_PRESET,
        normalize_text=DEFAULTS["normalize_text"],
        max_speed=DUB_MAX_SPEED,
        speakers=False,
        progress=gr.Progress(),
    ):
        """Dub a subtitle file: each cue spoken in its window and placed at its start time, in one track as long as the last cue.

        Args:
            subtitles_file: An .srt or .vtt file (UTF-8; its format by its name, else by its first line), at most 200 cues, 10,000 characters and 600 s here: an http(s) URL, a data: URI, or the path POST /gradio_api/upload returned.
            language: The cues' language by name ("English") or code ("en"); "Auto" detects it.
            instruct: The voice as voice-design items ("female, low pitch"); empty: the model chooses, and keeps its first cue's voice for the rest.
            voice: A voice of the server's library by name (instead of the instruct), or empty.
            precision: Model precision, one this server offers; left out: the server's default.
            num_step: Unmasking steps, 1 to 64.
            guidance_scale: Classifier-free guidance scale, 0 to 5.
            speed: Speaking rate for cues with room to spare, 1.0 normal; a cue is sped up only as much as its window needs.
            seed: Random seed; the same seed and settings give the same track.
            randomize_seed: True draws a new seed each call.
            denoise: Denoise a reference (a cloned voice of the library).
            postprocess_output: Trim long silences and normalise the loudness of each cue.
            preset: "balanced" (default), "best", "fast" or "turbo".
            normalize_text: True (default) reads numbers and dates as words.
            max_speed: The fastest a cue may be spoken to fit its window, 1 to 10 (1.5 by default); a cue that needs more is reported and nothing is made.
            speakers: True: cues written "Name: text" speak in the library's voice Name (the prefix is not said).
        Returns:
            The track as a 24 kHz wav file, one line saying what was made (and any warnings), its captions where each cue was placed (an SRT file), the dub's report (a JSON file: each cue's window, duration, speed and placing), and the captions as lines of text.
        """
        cues = page_cues(subtitles_file)
        fields = dict(
            text=next(cue.text for cue in cues if cue.text.strip()),  # the options checked with it
            language=language,
            instruct=instruct,
            voice=voice,
            num_step=num_step,
            guidance_scale=guidance_scale,
            speed=speed,
            duration=None,  # each cue's is its window's
            seed=seed,
            randomize_seed=randomize_seed,
            denoise=denoise,
            postprocess_output=postprocess_output,
            preset=preset,
            normalize_text=normalize_text,
        )
        request = page_request(fields, self.service, self.library)
        options = {k: v for k, v in request.options().items() if k not in ("text", "duration")}
        options["voice_prompt"] = request.voice_prompt
        with as_messages():
            flag = page_flag(speakers, "speakers")
            names = {e.name: self.library.options(e.name) for e in self.library.entries()}
        gone = abandoned()
        request_of = functools.partial(door_request, normalizer=self.service.normalizer(gone))

        def told(done: int, total: int) -> None:
            progress(done / total, desc=f"Cue {done} of {total}")

        precision = precision or self.default
        started = time.perf_counter()
        with prepared(self.service, precision, progress, request, gone) as (model, _, _):
            dubbed = dubbing.dub(
                model, cues, options, names if flag else None, max_speed, request_of, told, gone
            )
        line = (
            f"{len(dubbed.captions)} cues in {dubbed.seconds:.2f} s of track, made in "
            f"{time.perf_counter() - started:.1f} s, {precision}, seed {request.seed}"
        ) + "".join(f"\n- {escaped(warning)}" for warning in dubbed.report["warnings"])
        return (
            (dubbed.sample_rate, pcm16(dubbed.waveform)),
            line,
            captions_file(dubbed.captions),
            report_file(dubbed.report),
            caption_lines(dubbed.captions),
        )

    def example(self, text, language, instruct, progress=gr.Progress()):
        """An example of the page, as the page's defaults make it (seed 0, so a cached result is its result)."""
        fields = {**DEFAULTS, "randomize_seed": False, "text": text, "language": language}
        return run_synthesis(
            self.service,
            self.default,
            progress,
            page_request({**fields, "instruct": instruct or None}, self.service),
        )


# ----------------------------------------------------------------------------- layout


def settings_panel() -> list:
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
    return [
        steps,
        guidance,
        speed,
        duration,
        seed,
        randomize,
        denoise,
        postprocess,
        preset,
        normalize,
    ], sentences


def tag_buttons(textbox: gr.Textbox) -> None:
    with gr.Row():
        for tag in NONVERBAL_TAGS:
            gr.Button(f"[{tag}]", size="sm", min_width=0, elem_classes=["tag-button"]).click(
                lambda text, t=tag: (text or "") + f"[{t}]",
                textbox,
                textbox,
                api_visibility="private",
            )


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
    config, default, offered = service.config, service.models.default, service.models.offered
    if config.preload:
        service.preload(default)
    handlers = Handlers(service, default, library, keyed)
    examples_cache()

    def describe(precision: str) -> str:
        return precision_line(service, precision)

    # Uploads and results in Gradio's cache are deleted after an hour, checked every ten minutes.
    with gr.Blocks(title="OmniVoice ONNX", delete_cache=(600, 3600)) as demo:
        gr.Markdown(
            "# OmniVoice ONNX\nOmnilingual text-to-speech on ONNX Runtime: no PyTorch, fast on a CPU."
        )
        with gr.Row():
            precision = gr.Radio(
                offered, value=default, label="Precision", scale=1, elem_id="precision"
            )
            precision_info = gr.Markdown(describe(default), elem_id="precision-info")
        precision.change(describe, precision, precision_info, api_visibility="private")
        # While a load is under way, the precision line follows it (outside the synthesis queue).
        watch = gr.Timer(1.0, active=config.preload)
        watch.tick(
            lambda p: (describe(p), gr.Timer(active=bool(service.models.activity))),
            precision,
            [precision_info, watch],
            queue=False,
            show_progress="hidden",
            api_visibility="private",
        )
        # made here, shown under the tabs (the first tab's examples fill them)
        player = gr.Audio(
            label="Result, played as it is made",
            type="numpy",
            streaming=True,
            autoplay=True,
            interactive=False,
            visible=STREAMING,
            elem_id="result-stream",
            render=False,
        )
        output = gr.Audio(
            label="Whole result (wav)" if STREAMING else "Result",
            type="numpy",
            interactive=False,
            elem_id="result-audio",
            render=False,
        )
        info = gr.Markdown(elem_id="result-info", render=False)
        # the result's captions: a file to download (the API's third output), and its lines
        subtitles = gr.File(
            label="Captions (.srt)", interactive=False, elem_id="result-captions", render=False
        )
        lines = gr.Markdown(elem_id="result-lines", render=False)
        # the id of the last result's voice (Service.results), in a hidden box rather than a
        # gr.State, whose clean-up keeps an event stream open from every page (a heartbeat)
        kept = gr.Textbox(visible=False, render=False, elem_id="kept-result")
        with gr.Tabs():
            with gr.Tab("Text to speech", id="tts"):
                text = gr.Textbox(
                    DEFAULT_TEXT,
                    label="Text",
                    lines=4,
                    placeholder="What should be said?",
                    elem_id="tts-text",
                )
                tag_buttons(text)
                language = gr.Dropdown(
                    LANGUAGES,
                    value="Auto",
                    label="Language",
                    filterable=True,
                    allow_custom_value=True,
                )
                # One control for the voice: the choices compose the instruct, which is sent as
                # it stands in its box (and may be typed or edited there).
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
                tts_button = gr.Button("Generate", variant="primary", elem_id="tts-generate")
                # A click fills the text, the language and the voice design, and plays the example (made once, then kept).
                gr.Examples(
                    EXAMPLES,
                    [text, language, instruct],
                    [output, info, subtitles],
                    fn=handlers.example,
                    run_on_click=True,
                    cache_examples=True,
                    cache_mode="lazy",
                    api_visibility="private",
                    elem_id="examples",
                )
            with gr.Tab("Voice cloning", id="clone"):
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
                    library_voice_choice = gr.Dropdown(
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
                clone_instruct = gr.Textbox(
                    label="Style over the cloned voice (optional voice-design items)",
                    placeholder="e.g. whisper, or high pitch",
                    elem_id="clone-instruct",
                )
                clone_text = gr.Textbox(
                    label="Text to say in this voice", lines=3, elem_id="clone-text"
                )
                clone_language = gr.Dropdown(
                    LANGUAGES,
                    value="Auto",
                    label="Language",
                    filterable=True,
                    allow_custom_value=True,
                )
                clone_button = gr.Button("Generate", variant="primary", elem_id="clone-generate")
            with gr.Tab("Dubbing", id="dub"):
                gr.Markdown(DUB_TIPS)
                dub_file = gr.File(  # any file type: an MCP client's data: URI has no name
                    label="Subtitles (.srt or .vtt)",
                    type="filepath",
                    elem_id="dub-subtitles",
                )
                with gr.Row():
                    dub_voice = gr.Dropdown(
                        [""] + library.names(),
                        value="",
                        label="Voice of the library",
                        info="empty: the voice design below, or the model's choice",
                        allow_custom_value=True,
                        elem_id="dub-voice",
                    )
                    dub_instruct = gr.Textbox(
                        label="Voice design (instead)",
                        placeholder="e.g. female, low pitch",
                        elem_id="dub-instruct",
                    )
                    dub_language = gr.Dropdown(
                        LANGUAGES,
                        value="Auto",
                        label="Language",
                        filterable=True,
                        allow_custom_value=True,
                    )
                with gr.Row():
                    dub_speed = gr.Slider(
                        1.0,
                        MAX_SPEED,
                        value=DUB_MAX_SPEED,
                        step=0.05,
                        label="Fastest speech, to fit a cue's window",
                        elem_id="dub-max-speed",
                    )
                    dub_speakers = gr.Checkbox(
                        value=False,
                        label='Cues "Name: text" speak in the library\'s voice Name',
                        elem_id="dub-speakers",
                    )
                dub_button = gr.Button("Dub", variant="primary", elem_id="dub-generate")
                dub_report = gr.File(
                    label="The dub's report (.json)", interactive=False, elem_id="dub-report"
                )
        settings, sentences = settings_panel()
        player.render()
        output.render()
        info.render()
        lines.render()
        subtitles.render()
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
        kept.render()

        # The page's buttons: pieces to the player as they are made, then the whole result.
        # the API's older names (ALIASES), of their options' kinds: inputs the page never sets,
        # empty unless a client gives them (a Checkbox makes its None False: put back after)
        aliases = [gr.Number(value=None, visible=False), gr.Checkbox(visible=False)]
        aliases[1].value = None
        tts_inputs = [text, language, instruct, precision, *settings, *aliases]
        clone_inputs = [
            clone_text,
            ref_audio,
            ref_text,
            prompt_file,
            clone_language,
            precision,
            *settings,
            clone_instruct,
            library_voice_choice,
            *aliases,
        ]
        for button, handler, inputs in (
            (tts_button, handlers.synthesize_page, tts_inputs),
            (clone_button, handlers.clone_page, clone_inputs),
        ):
            button.click(
                handler,
                [*inputs, sentences],
                [player, output, info, subtitles, lines, kept],
                api_visibility="private",
            ).then(describe, precision, precision_info, api_visibility="private")
        # A dub: the settings but the duration (each cue's window is its own)
        dub_settings = [control for control in settings if control is not settings[3]]
        dub_inputs = [dub_file, dub_language, dub_instruct, dub_voice, precision, *dub_settings]
        dub_button.click(
            handlers.dub,
            [*dub_inputs, dub_speed, dub_speakers],
            [output, info, subtitles, dub_report, lines],
            api_name="dub",
        ).then(
            lambda: (gr.skip() if STREAMING else None, ""),  # nothing of an earlier result's
            None,
            [player, kept],
            api_visibility="private",
        ).then(describe, precision, precision_info, api_visibility="private")
        # The API's stable endpoints (gradio_client): the whole result at the end, from buttons the page does not show.
        for api_name, handler, inputs in (
            ("synthesize", handlers.synthesize, tts_inputs),
            ("clone", handlers.clone, clone_inputs),
        ):
            gr.Button(visible=False).click(
                handler, inputs, [output, info, subtitles], api_name=api_name
            )
        save_button.click(
            handlers.save_voice_prompt,
            [ref_audio, ref_text, precision],
            saved_prompt,
            api_name="save_voice_prompt",
        )
        library_button.click(
            handlers.save_to_library,
            [library_name, ref_audio, ref_text, clone_language, precision],
            library_line,
            api_name="save_to_library",
        ).then(
            lambda: gr.Dropdown(choices=[""] + [entry.name for entry in library.saved()]),
            None,
            library_voice_choice,
            api_visibility="private",
        )
        gr.Button(visible=False).click(
            handlers.list_voices, None, gr.JSON(visible=False), api_name="list_voices"
        )
        keep_button.click(
            handlers.keep_voice,
            [kept, keep_name],
            [kept_file, keep_line],
            api_visibility="private",  # the result's id lives in the page's state
        ).then(
            lambda: gr.Dropdown(choices=[""] + [entry.name for entry in library.saved()]),
            None,
            library_voice_choice,
            api_visibility="private",
        )
        # A recorded or uploaded reference fills the transcript box, which stays editable.
        ref_audio.upload(
            handlers.transcribe, [ref_audio, clone_language], ref_text, api_name="transcribe"
        )
        ref_audio.stop_recording(
            handlers.transcribe, [ref_audio, clone_language], ref_text, api_visibility="private"
        )
        gr.Markdown(LICENCE_LINE, elem_id="licence")
    return demo
