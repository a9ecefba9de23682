#!/usr/bin/env python3
"""OmniVoice ONNX: the Gradio Space over ``omnivoice_rt``.

    python app.py [--artifacts FOLDER_OR_HUB_REPO] [--precision int4] [--host 127.0.0.1] [--port 7860]

Tabs for text-to-speech (auto voice and voice design) and voice cloning, a precision selector,
settings, progress over download and unmasking, audio played as it is made, and stable API
endpoints for ``gradio_client``: ``/synthesize``, ``/clone`` and ``/save_voice_prompt``.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import hashlib
import logging
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import gradio as gr
import numpy as np

from omnivoice_rt.asr import Transcriber
from omnivoice_rt.errors import REPORTED, Cancelled
from omnivoice_rt.hub import DEFAULT_REPO, available_precisions
from omnivoice_rt.limits import MAX_STEPS, MAX_UPLOAD
from omnivoice_rt.manifest import PROFILE_DIRS, ArtifactError, load_manifest
from omnivoice_rt.model import PRESETS, OmniVoiceONNX, Speech
from omnivoice_rt.sessions import cuda_available
from omnivoice_rt.text import (
    INSTRUCT_EXCLUSIVE,
    LANG_NAME_TO_ID,
    NONVERBAL_TAGS,
    language_display_name,
)
from omnivoice_rt.voice_prompt import VoicePrompt

logger = logging.getLogger(__name__)

PRECISIONS = {
    "int4": "int4 (CPU, fastest): int4 encoder and LLM, fp32 heads",
    "int8": "int8 (CPU, closest to fp32 of the fast ones): int8 encoder and LLM, fp32 heads",
    "fp16": "fp16 (CPU): fp16 encoder and heads, int4 LLM",
    "fp32": "fp32 (CPU, reference): everything fp32",
    "cuda": "cuda (GPU): fp16 everything, CUDA execution provider",
}
APP_PRESET = "balanced"  # the page's default: a CPU Space should answer in seconds, not a minute
PRESET_LABELS = {
    "best": "best: 32 steps, exact (as upstream)",
    "balanced": "balanced: 16 steps, prompt cache, guidance reuse",
    "fast": "fast: 12 steps, prompt cache, guidance reuse",
}
LANGUAGES = ["Auto"] + sorted(language_display_name(name) for name in LANG_NAME_TO_ID)
GENDERS, AGES, PITCHES, STYLES = (sorted({x for x in INSTRUCT_EXCLUSIVE[i] if x.isascii()}) for i in range(4))
ACCENTS, DIALECTS = sorted(INSTRUCT_EXCLUSIVE[4]), sorted(INSTRUCT_EXCLUSIVE[5])
# The page plays a long text's first piece while the rest is made; Gradio encodes streamed audio
# with ffmpeg (packages.txt), and without it the page shows the whole result at the end.
STREAMING = shutil.which("ffmpeg") is not None
SENTENCES_LABEL = "Sentence by sentence: the first audio sooner (prosody can break where sentences join)"
REFERENCE_TIPS = (
    "A good reference: 3-10 s of one person speaking clearly, little background noise, in the language "
    "you will synthesize. Its transcript is filled in when you record or upload it: check it, or type "
    "it; left empty, it is transcribed when you generate. Or load a voice prompt saved earlier."
)
# The page's and the API's defaults, one table (the CLI's: the same preset, a random seed).
DEFAULTS = {"num_step": PRESETS[APP_PRESET]["num_step"], "guidance": 2.0, "speed": 1.0, "duration": 0.0, "seed": 0,
            "randomize_seed": True, "denoise": True, "postprocess": True, "preset": APP_PRESET}  # fmt: skip
DEFAULT_TEXT = "Hello! This is OmniVoice, speaking from ONNX Runtime on a CPU."
PROMPT_CACHE_SIZE = 16  # voice prompts kept, keyed by the reference's bytes, its transcript and the precision
EXAMPLES = [
    ["Hello! This is OmniVoice, running on ONNX Runtime without PyTorch.", "English", ""],
    ["The weather is lovely today [laughter], let's go for a walk.", "Auto", "female, young adult"],
    ["今天天气很好，我们一起去公园散步吧。", "Chinese", "男，中年"],
]


@dataclass
class Config:
    source: str | None = None  # artifact folder or Hub repo; None: $OMNIVOICE_REPO or the default repo
    precision: str = "int4"
    threads: int | None = None
    preload: bool = False  # load the default precision in the background as the server starts
    concurrency: int = 1  # syntheses at once; loads and downloads do not take a slot
    asr_model: str | None = None  # speech recogniser: folder or Hub repo; None: $OMNIVOICE_ASR_MODEL or whisper-base


def offered_precisions(source: str | None) -> list[str]:
    """What the selector offers: the precisions the source has (its manifest, or the repo's file
    list, asked once), cuda only with CUDA; every CPU precision when the Hub cannot be asked."""
    try:
        found = available_precisions(source)
    except ArtifactError as exc:
        logger.warning("%s", exc)
        found = None
    return [p for p in PRECISIONS if (p in found if found else p != "cuda" or cuda_available())]


class Voices:
    """Each precision's ``OmniVoiceONNX``, loaded once and kept. Each precision has its own lock,
    so a request for a loaded precision never waits behind another one's download. ``activity``
    says what a load under way is doing, ``failures`` why the last one failed, for the page."""

    def __init__(self, config: Config, offered: list[str] | None = None):
        self.config = config
        self.offered = offered or list(PRECISIONS)
        self.loaded: dict[str, OmniVoiceONNX] = {}
        self.activity: dict[str, str] = {}
        self.failures: dict[str, str] = {}
        self._locks = {precision: threading.Lock() for precision in PRECISIONS}
        self._slots = threading.BoundedSemaphore(config.concurrency)
        self.asr: Transcriber | None = None  # one speech recogniser for every precision
        self._asr_lock = threading.Lock()
        self.prompts: OrderedDict[tuple, VoicePrompt] = OrderedDict()  # the last PROMPT_CACHE_SIZE references
        self._prompts_lock = threading.Lock()

    @contextlib.contextmanager
    def slot(self, progress=None):
        """One of the ``concurrency`` synthesis slots: the model work of a request runs inside one,
        its download and load outside, so a load never holds up requests for a loaded precision."""
        if not self._slots.acquire(blocking=False):
            if progress is not None:
                progress(0.0, desc="Waiting for the synthesis before this one")
            self._slots.acquire()
        try:
            yield
        finally:
            self._slots.release()

    def get(self, precision: str, progress=None) -> OmniVoiceONNX:
        if precision not in self.offered:
            raise refused(f"Precision {precision!r} is not offered here; choose one of {', '.join(self.offered)}.")
        voice = self.loaded.get(precision)
        if voice is not None:
            return voice
        lock = self._locks[precision]
        if lock.locked() and progress is not None:
            progress(0.0, desc=f"Waiting for the {precision} model to load")
        with lock:
            if precision not in self.loaded:
                self._load(precision, progress)
            return self.loaded[precision]

    def _load(self, precision: str, progress) -> None:
        def report(fraction: float, message: str) -> None:
            self.activity[precision] = f"{message}: {fraction:.0%}"
            if progress is not None:
                progress(fraction, desc=message)

        self.activity[precision] = "Loading"
        started = time.perf_counter()
        try:
            self.loaded[precision] = OmniVoiceONNX.load(self.config.source, precision, threads=self.config.threads,
                                                        download_progress=report)  # fmt: skip
            self.failures.pop(precision, None)
        except Exception as exc:
            self.failures[precision] = str(exc)
            raise
        finally:
            self.activity.pop(precision, None)
        logger.info("loaded %s in %.1f s", precision, time.perf_counter() - started)

    def transcriber(self, progress=None) -> Transcriber:
        """The speech recogniser, loaded (and downloaded) once on first need, outside the synthesis slots."""
        with self._asr_lock:
            if self.asr is None:
                if progress is not None:
                    progress(0.0, desc="Loading the speech recogniser")
                report = (lambda f, m: progress(f, desc=m)) if progress is not None else None
                try:
                    self.asr = Transcriber.load(self.config.asr_model or None, progress=report)
                except ArtifactError as exc:  # it could not be fetched or loaded
                    raise refused(f"{exc}. Type what the reference says instead.") from exc
                except REPORTED as exc:  # transcription is off; the message says what to do
                    raise refused(str(exc)) from exc
            return self.asr

    def voice_prompt(self, voice: OmniVoiceONNX, ref_audio, ref_text, language) -> tuple[VoicePrompt, bool]:
        """The reference encoded (and transcribed) once: kept by its bytes, its transcript (or the
        language it is transcribed in) and the precision. Says whether it was already there."""
        transcript = (ref_text or "").strip()
        digest = hashlib.sha256(Path(ref_audio).read_bytes()).hexdigest() if Path(ref_audio).is_file() else None
        key = (voice.precision, digest, transcript, None if transcript else language)
        with self._prompts_lock:
            prompt = self.prompts.get(key) if digest else None
            if prompt is not None:
                self.prompts.move_to_end(key)
                return prompt, True
        prompt = voice.create_voice_prompt(ref_audio, transcript or None, language=language)
        with self._prompts_lock:
            self.prompts[key] = prompt
            while len(self.prompts) > PROMPT_CACHE_SIZE:
                self.prompts.popitem(last=False)
        return prompt, False

    def preload(self, precision: str) -> threading.Thread:
        """Load ``precision``, then the speech recogniser, in the background; requests wait for these loads."""

        def run() -> None:
            try:
                self.get(precision)
            except Exception as exc:  # noqa: BLE001 - kept in activity; a request will try again
                logger.warning("preloading %s failed: %s", precision, exc)
            try:
                self.transcriber()
            except Exception as exc:  # noqa: BLE001 - a request that needs it says why
                logger.warning("the speech recogniser is not available: %s", exc)

        thread = threading.Thread(target=run, name=f"preload-{precision}", daemon=True)
        thread.start()
        return thread

    def describe(self, precision: str) -> str:
        """What the precision is made of, and whether it is loaded, loading, on disk, or still to download."""
        title = f"**{PRECISIONS.get(precision, precision)}**."
        voice = self.loaded.get(precision)
        if voice is not None:
            size = graphs_size(voice.root, voice.manifest["profiles"][precision]["graphs"])
            repaired = " The LLM was repaired to attend bidirectionally." if voice.repaired_llm else ""
            return f"{title} Loaded from `{voice.root}`, {size / 1e6:.0f} MB on disk: ready.{repaired}"
        if precision in self.activity:
            return f"{title} {self.activity[precision]}…"
        if precision in self.failures:
            return f"{title} It could not be loaded ({self.failures[precision]}); the next synthesis tries again."
        return f"{title} {availability(self.config.source, precision)} The first synthesis with it loads it."


def graphs_size(root: Path, graphs: dict) -> int:
    """Bytes of the given graphs and their external weights."""
    paths = [root / spec["file"] for spec in graphs.values()]
    return sum(p.stat().st_size for path in paths for p in (path, path.with_name(path.name + ".data")) if p.exists())


def availability(source: str | None, precision: str) -> str:
    """Whether a not-yet-loaded precision is on disk, or must be downloaded first."""
    if source and Path(source).is_dir():
        try:
            profile = load_manifest(source)["profiles"].get(precision)
        except ArtifactError:
            profile = None
        if profile is None:
            return f"This artifact folder has no {precision} profile."
        return f"On disk: {graphs_size(Path(source), profile['graphs']) / 1e6:.0f} MB."
    from huggingface_hub import try_to_load_from_cache

    repo = source or os.environ.get("OMNIVOICE_REPO") or DEFAULT_REPO
    folder = PROFILE_DIRS.get(precision, precision)
    name = "llm_decoder.onnx.data" if folder == "." else f"{folder}/llm_decoder.onnx.data"
    cached = try_to_load_from_cache(repo, name)
    return "Downloaded." if isinstance(cached, str) else f"Not downloaded yet from {repo}."


# ----------------------------------------------------------------------------- helpers


def design_instruct(gender, age, pitch, style, accent, dialect, free_text) -> str | None:
    """The voice-design controls as one instruct string (free text wins when given)."""
    if free_text and free_text.strip():
        return free_text.strip()
    items = [x for x in (gender, age, pitch, style, accent, dialect) if x and x != "Any"]
    return ", ".join(items) or None


def language_arg(language) -> str | None:
    """The page's language choice for the runtime: "Auto" (or nothing) lets it detect the language."""
    return None if language in (None, "", "Auto") else language


def resolve_seed(seed, randomize: bool) -> int:
    return random.randrange(2**31) if randomize or seed is None else int(seed)


def settings_kwargs(num_step, guidance, speed, duration, denoise, postprocess, preset=APP_PRESET) -> dict:
    """The page's settings as ``generate`` arguments; the preset brings its cache and guidance reuse."""
    if preset not in PRESETS:
        raise refused(f"Unknown preset {preset!r}; choose one of {', '.join(PRESETS)}.")
    bundle = {k: v for k, v in PRESETS[preset].items() if k != "num_step"}
    return {
        **bundle, "num_step": int(num_step), "guidance_scale": float(guidance),
        "speed": float(speed) if speed and float(speed) != 1.0 else None,
        "duration": float(duration) if duration and float(duration) > 0 else None,
        "denoise": bool(denoise), "postprocess_output": bool(postprocess),
    }  # fmt: skip


def result_line(speech: Speech, seed: int, reused: bool = False) -> str:
    meta = speech.metadata
    reference = "; the reference's encoding was reused" if reused else ""
    return (f"{meta['seconds']:.2f} s of audio in {meta['timings']['total']:.2f} s "
            f"(real-time factor {meta['rtf']:.2f}), {meta['precision']}, {meta['steps']} steps, seed {seed}"
            f"{reference}")  # fmt: skip


def with_cached_prompt(voices: Voices, voice: OmniVoiceONNX, request: dict) -> tuple[dict, bool]:
    """The request with its reference as a voice prompt from the cache (encoded now if new)."""
    if not request.get("ref_audio"):
        return request, False
    prompt, reused = voices.voice_prompt(voice, request["ref_audio"], request.get("ref_text"), request.get("language"))
    return {**request, "ref_audio": None, "ref_text": None, "voice_prompt": prompt}, reused


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
        for job in blocks._queue.active_jobs:
            for event in job or ():
                if event._id == event_id:
                    return not event.alive
        return True

    return gone


def pcm16(waveform: np.ndarray) -> np.ndarray:
    """16-bit samples as the runtime made them: Gradio rescales float audio to full scale, which
    would undo the loudness the runtime set (matched to the reference, or peak 0.5)."""
    return np.round(np.clip(waveform, -1.0, 1.0) * 32767).astype(np.int16)


@contextlib.contextmanager
def prepared(voices: Voices, precision: str, progress, request: dict):
    """What every synthesis door does first: load the precision (outside the slots), take a
    synthesis slot, turn the reference into a voice prompt (from the cache, or transcribed and
    encoded now); yields (voice, request, reused). Errors become one-line messages."""
    try:
        voice = voices.get(precision, progress)
        if request.get("ref_audio") and not (request.get("ref_text") or "").strip():
            voice.asr = voices.transcriber(progress)  # the server's one recogniser
        with voices.slot(progress):
            request, reused = with_cached_prompt(voices, voice, request)
            yield voice, request, reused
    except REPORTED as exc:
        raise refused(str(exc)) from exc
    except Cancelled as exc:
        raise refused(str(exc), visible=False) from exc


def run_synthesis(voices: Voices, precision: str, progress, **kwargs) -> tuple[tuple[int, np.ndarray], str]:
    """Load the precision, synthesize with a step-by-step progress bar, turn errors into gr.Error."""
    with prepared(voices, precision, progress, kwargs) as (voice, request, reused):
        speech = voice.generate(progress=step_progress(progress), should_stop=abandoned(), **request)
    return (speech.sample_rate, pcm16(speech.waveform)), result_line(speech, kwargs.get("seed", 0), reused)


def stream_synthesis(voices: Voices, precision: str, progress, sentences: bool = False, **kwargs) -> Iterator[tuple]:
    """``run_synthesis`` for the page: each piece goes to the player as soon as it is made (when
    ``STREAMING``), then the pieces joined (what was played) become the result to download.
    Yields (piece, whole, info)."""
    parts: list[Speech] = []
    with prepared(voices, precision, progress, kwargs) as (voice, request, reused):
        stream = voice.stream(progress=step_progress(progress), should_stop=abandoned(), sentences=sentences, **request)
        for part in stream:
            parts.append(part)
            done, count = part.metadata["piece"] + 1, part.metadata["pieces"]
            note = f"Playing piece {done} of {count} while the rest is made…" if done < count else "Finishing…"
            yield (part.sample_rate, pcm16(part.waveform)) if STREAMING else gr.skip(), gr.skip(), note
    speech = Speech.join(parts)
    yield gr.skip(), (speech.sample_rate, pcm16(speech.waveform)), result_line(speech, kwargs.get("seed", 0), reused)


def step_progress(progress) -> Callable[[int, int], None]:
    return lambda done, total: progress(done / total, desc=f"Step {done}/{total}")


def examples_cache() -> None:
    """The examples' results depend on the artifacts this server loaded, so they are kept for this
    process only (a folder removed at exit), never served to a later server with other models."""
    if "GRADIO_EXAMPLES_CACHE" not in os.environ:
        folder = tempfile.mkdtemp(prefix="omnivoice-examples-")
        os.environ["GRADIO_EXAMPLES_CACHE"] = folder
        atexit.register(shutil.rmtree, folder, ignore_errors=True)


def prompt_file() -> Path:
    """A fresh path for a saved voice prompt, in one folder whose files older than an hour go."""
    folder = Path(tempfile.gettempdir()) / "omnivoice-prompts"
    folder.mkdir(exist_ok=True)
    for old in folder.glob("*.npz"):
        if time.time() - old.stat().st_mtime > 3600:
            old.unlink(missing_ok=True)
    return Path(tempfile.mkstemp(prefix=f"voice-{time.strftime('%Y%m%d-%H%M%S')}-", suffix=".npz", dir=folder)[1])


# ----------------------------------------------------------------------------- event handlers


def make_handlers(voices: Voices, default: str):
    """The API's handlers (the whole result at the end) and the page's (pieces as they are made,
    when ``STREAMING``); both share the voices, their synthesis slots and their messages."""

    def tts_request(text, language, instruct, num_step, guidance, speed, duration, seed, randomize_seed, denoise,
                    postprocess, preset) -> dict:  # fmt: skip
        return dict(
            text=text, language=language_arg(language), instruct=instruct or None,
            seed=resolve_seed(seed, randomize_seed),
            **settings_kwargs(num_step, guidance, speed, duration, denoise, postprocess, preset),
        )  # fmt: skip

    def clone_request(text, ref_audio, ref_text, voice_prompt, language, num_step, guidance, speed, duration, seed,
                      randomize_seed, denoise, postprocess, preset) -> dict:  # fmt: skip
        if not ref_audio and not voice_prompt:
            raise refused("Record or upload a reference voice (or load a voice prompt file) first.")
        return dict(
            text=text, language=language_arg(language),
            ref_audio=None if voice_prompt else ref_audio, ref_text=None if voice_prompt else ref_text,
            voice_prompt=voice_prompt or None, seed=resolve_seed(seed, randomize_seed),
            **settings_kwargs(num_step, guidance, speed, duration, denoise, postprocess, preset),
        )  # fmt: skip

    def synthesize(text, language, instruct, precision, num_step=DEFAULTS["num_step"], guidance=DEFAULTS["guidance"],
                   speed=1.0, duration=0.0, seed=0, randomize_seed=DEFAULTS["randomize_seed"], denoise=True,
                   postprocess=True, preset=APP_PRESET,
                   progress=gr.Progress()):  # fmt: skip
        request = tts_request(text, language, instruct, num_step, guidance, speed, duration, seed, randomize_seed,
                              denoise, postprocess, preset)  # fmt: skip
        return run_synthesis(voices, precision, progress, **request)

    def clone(text, ref_audio, ref_text, voice_prompt, language, precision, num_step=DEFAULTS["num_step"],
              guidance=DEFAULTS["guidance"], speed=1.0, duration=0.0, seed=0,
              randomize_seed=DEFAULTS["randomize_seed"], denoise=True, postprocess=True, preset=APP_PRESET,
              progress=gr.Progress()):  # fmt: skip
        request = clone_request(text, ref_audio, ref_text, voice_prompt, language, num_step, guidance, speed,
                                duration, seed, randomize_seed, denoise, postprocess, preset)  # fmt: skip
        return run_synthesis(voices, precision, progress, **request)

    def synthesize_page(text, language, instruct, precision, num_step, guidance, speed, duration, seed,
                        randomize_seed, denoise, postprocess, preset, sentences, progress=gr.Progress()):  # fmt: skip
        request = tts_request(text, language, instruct, num_step, guidance, speed, duration, seed, randomize_seed,
                              denoise, postprocess, preset)  # fmt: skip
        yield from stream_synthesis(voices, precision, progress, sentences=bool(sentences), **request)

    def clone_page(text, ref_audio, ref_text, voice_prompt, language, precision, num_step, guidance, speed, duration,
                   seed, randomize_seed, denoise, postprocess, preset, sentences, progress=gr.Progress()):  # fmt: skip
        request = clone_request(text, ref_audio, ref_text, voice_prompt, language, num_step, guidance, speed,
                                duration, seed, randomize_seed, denoise, postprocess, preset)  # fmt: skip
        yield from stream_synthesis(voices, precision, progress, sentences=bool(sentences), **request)

    def save_prompt(ref_audio, ref_text, precision, progress=gr.Progress()):
        if not ref_audio:
            raise refused("Record or upload a reference voice first.")
        with prepared(voices, precision, progress, {"ref_audio": ref_audio, "ref_text": ref_text}) as (_, request, _):
            prompt = request["voice_prompt"]
        path = prompt_file()
        prompt.save(path)
        return str(path)

    def transcribe(ref_audio, language="Auto", progress=gr.Progress()):
        """What the reference says, for the transcript box (editable) and the API."""
        if not ref_audio:
            return ""
        try:
            recogniser = voices.transcriber(progress)
            with voices.slot(progress):
                progress(0.5, desc="Transcribing the reference")
                return recogniser.transcribe(ref_audio, language_arg(language))
        except REPORTED as exc:
            raise refused(str(exc)) from exc

    def example(text, language, free, progress=gr.Progress()):
        """An example of the page, as the page's defaults make it (seed 0, so a cached result is its result)."""
        request = tts_request(text, language, design_instruct(*["Any"] * 6, free), **{**DEFAULTS, "randomize_seed": False})
        return run_synthesis(voices, default, progress, **request)

    return synthesize, clone, synthesize_page, clone_page, save_prompt, transcribe, example


# ----------------------------------------------------------------------------- layout


def settings_panel() -> list:
    with gr.Accordion("Settings", open=False):
        with gr.Row():
            preset = gr.Radio([(PRESET_LABELS[name], name) for name in PRESETS], value=APP_PRESET, label="Speed preset",
                              info="balanced is this page's default on a CPU; best is upstream's generation, exactly",
                              elem_id="preset")  # fmt: skip
            steps = gr.Slider(1, MAX_STEPS, value=DEFAULTS["num_step"], step=1, label="Unmasking steps")
            guidance = gr.Slider(0.0, 5.0, value=DEFAULTS["guidance"], step=0.1, label="Guidance scale")
        with gr.Row():
            speed = gr.Slider(0.5, 2.0, value=1.0, step=0.05, label="Speed")
            duration = gr.Number(value=0, minimum=0, maximum=600, label="Duration in s (0: automatic)")
        with gr.Row():
            seed = gr.Number(value=0, precision=0, label="Seed")
            randomize = gr.Checkbox(value=DEFAULTS["randomize_seed"], label="Randomize seed")
            denoise = gr.Checkbox(value=True, label="Denoise reference")
            postprocess = gr.Checkbox(value=True, label="Trim silences and normalize")
        preset.change(lambda name: PRESETS[name]["num_step"], preset, steps, api_visibility="private")
    sentences = gr.Checkbox(value=False, label=SENTENCES_LABEL, elem_id="sentences")
    return [steps, guidance, speed, duration, seed, randomize, denoise, postprocess, preset], sentences


def tag_buttons(textbox: gr.Textbox) -> None:
    with gr.Row():
        for tag in NONVERBAL_TAGS:
            gr.Button(f"[{tag}]", size="sm", min_width=60).click(
                lambda text, t=tag: (text or "") + f"[{t}]", textbox, textbox, api_visibility="private"
            )


def build_demo(config: Config | None = None) -> gr.Blocks:
    config = config or Config()
    offered = offered_precisions(config.source)
    default = config.precision if config.precision in offered else offered[0]
    voices = Voices(config, offered)
    if config.preload:
        voices.preload(default)
    synthesize, clone, synthesize_page, clone_page, save_prompt, transcribe, example = make_handlers(voices, default)
    examples_cache()
    # Uploads and results in Gradio's cache are deleted after an hour, checked every ten minutes.
    with gr.Blocks(title="OmniVoice ONNX", delete_cache=(600, 3600)) as demo:
        gr.Markdown("# OmniVoice ONNX\nOmnilingual text-to-speech on ONNX Runtime: no PyTorch, fast on a CPU.")
        with gr.Row():
            precision = gr.Radio(offered, value=default, label="Precision", scale=1, elem_id="precision")
            precision_info = gr.Markdown(voices.describe(default), elem_id="precision-info")
        precision.change(voices.describe, precision, precision_info, api_visibility="private")
        # While a load is under way, the precision line follows it (outside the synthesis queue).
        watch = gr.Timer(1.0, active=config.preload)
        watch.tick(lambda p: (voices.describe(p), gr.Timer(active=bool(voices.activity))), precision,
                   [precision_info, watch], queue=False, show_progress="hidden", api_visibility="private")  # fmt: skip
        with gr.Tabs():
            with gr.Tab("Text to speech", id="tts"):
                text = gr.Textbox(DEFAULT_TEXT, label="Text", lines=4, placeholder="What should be said?", elem_id="tts-text")
                tag_buttons(text)
                language = gr.Dropdown(LANGUAGES, value="Auto", label="Language", filterable=True, allow_custom_value=True)
                with gr.Accordion("Voice design", open=False):
                    with gr.Row():
                        controls = [gr.Dropdown(["Any"] + options, value="Any", label=label) for label, options in
                                    (("Gender", GENDERS), ("Age", AGES), ("Pitch", PITCHES), ("Style", STYLES),
                                     ("English accent", ACCENTS), ("Chinese dialect", DIALECTS))]  # fmt: skip
                    free = gr.Textbox(label="Or describe it yourself", placeholder="female, low pitch, british accent")
                instruct = gr.Textbox(label="Instruct sent to the model", interactive=False)
                for control in controls + [free]:
                    control.change(design_instruct, controls + [free], instruct, api_visibility="private")
                tts_button = gr.Button("Generate", variant="primary", elem_id="tts-generate")
            with gr.Tab("Voice cloning", id="clone"):
                gr.Markdown(REFERENCE_TIPS)
                ref_audio = gr.Audio(sources=["microphone", "upload"], type="filepath", label="Reference voice", elem_id="ref-audio")
                ref_text = gr.Textbox(label="What the reference says (transcribed for you; editable)", lines=2,
                                      elem_id="ref-text")  # fmt: skip
                with gr.Row():
                    prompt_file = gr.File(label="Voice prompt (.npz), instead of the audio", file_types=[".npz"], type="filepath")
                    saved_prompt = gr.File(label="Saved voice prompt", interactive=False)
                save_button = gr.Button("Save this voice as a prompt file")
                clone_text = gr.Textbox(label="Text to say in this voice", lines=3, elem_id="clone-text")
                clone_language = gr.Dropdown(LANGUAGES, value="Auto", label="Language", filterable=True, allow_custom_value=True)
                clone_button = gr.Button("Generate", variant="primary", elem_id="clone-generate")
        settings, sentences = settings_panel()
        player = gr.Audio(label="Result, played as it is made", type="numpy", streaming=True, autoplay=True,
                          interactive=False, visible=STREAMING, elem_id="result-stream")  # fmt: skip
        output = gr.Audio(label="Whole result (wav)" if STREAMING else "Result", type="numpy", interactive=False,
                          elem_id="result-audio")  # fmt: skip
        info = gr.Markdown(elem_id="result-info")
        # A click fills the text, the language and the voice design, and plays the example (made once, then kept).
        gr.Examples(EXAMPLES, [text, language, free], [output, info], fn=example, run_on_click=True,
                    cache_examples=True, cache_mode="lazy", api_visibility="private", elem_id="examples")  # fmt: skip

        # The page's buttons: pieces to the player as they are made, then the whole result.
        tts_inputs = [text, language, instruct, precision, *settings]
        clone_inputs = [clone_text, ref_audio, ref_text, prompt_file, clone_language, precision, *settings]
        for button, handler, inputs in ((tts_button, synthesize_page, tts_inputs), (clone_button, clone_page, clone_inputs)):
            button.click(handler, [*inputs, sentences], [player, output, info], api_visibility="private").then(
                voices.describe, precision, precision_info, api_visibility="private"
            )
        # The API's stable endpoints (gradio_client): the whole result at the end, from buttons the page does not show.
        for api_name, handler, inputs in (("synthesize", synthesize, tts_inputs), ("clone", clone, clone_inputs)):
            gr.Button(visible=False).click(handler, inputs, [output, info], api_name=api_name)
        save_button.click(save_prompt, [ref_audio, ref_text, precision], saved_prompt, api_name="save_voice_prompt")
        # A recorded or uploaded reference fills the transcript box, which stays editable.
        ref_audio.upload(transcribe, [ref_audio, clone_language], ref_text, api_name="transcribe")
        ref_audio.stop_recording(transcribe, [ref_audio, clone_language], ref_text, api_visibility="private")
    return demo


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="OmniVoice ONNX Space")
    parser.add_argument("--artifacts", default=os.environ.get("OMNIVOICE_ARTIFACTS"),
                        help="artifact folder or Hub repo (env OMNIVOICE_ARTIFACTS; default: $OMNIVOICE_REPO "
                        "or onnx-community/OmniVoice-Onnx)")  # fmt: skip
    parser.add_argument("--precision", choices=list(PRECISIONS), default=os.environ.get("OMNIVOICE_PRECISION", "int4"))
    parser.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("GRADIO_SERVER_PORT", "7860")))
    parser.add_argument("--concurrency", type=int, default=int(os.environ.get("OMNIVOICE_CONCURRENCY", "1")),
                        help="syntheses at once (default 1: one request uses every core)")  # fmt: skip
    parser.add_argument("--threads", type=int, default=None, help="ONNX Runtime threads per session")
    parser.add_argument("--asr-model", default=os.environ.get("OMNIVOICE_ASR_MODEL"),
                        help="speech recogniser for references: a Whisper folder or Hub repo (onnx-community "
                        "format; env OMNIVOICE_ASR_MODEL; default onnx-community/whisper-base; 'none': off)")  # fmt: skip
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    demo = build_demo(Config(args.artifacts, args.precision, args.threads, preload=True, concurrency=args.concurrency,
                             asr_model=args.asr_model))  # fmt: skip
    # Room beside the synthesis slots for requests that are downloading or loading another precision.
    demo.queue(default_concurrency_limit=args.concurrency + len(PRECISIONS), max_size=32)
    demo.launch(server_name=args.host, server_port=args.port, max_file_size=MAX_UPLOAD, show_error=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
