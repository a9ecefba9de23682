"""One synthesis request, checked once: what to say, in which voice, with which settings.

    request = Request.from_options({"text": "Hello.", "language": "en", "preset": "balanced"})
    speech = voice.generate(request)          # or voice.generate("Hello.", language="en", ...)

Every door builds its request here from the options it was given: the CLI from its flags, batch
from a JSONL item, the page, gradio_client and MCP from their fields, the OpenAI door from its
body. ``OPTIONS`` is the one list of what a request may carry, each option declared once (its
kind, meaning and bounds: ``Option``); a value it refuses raises ``OptionError`` naming the
option, which each door reports as its own field (docs/design.md section 8).

Presets (``PRESETS``) bundle the settings that trade exactness for speed; ``best`` is upstream's
generation, code for code (tests/runtime/test_runtime.py). The others follow ports that measured quality
on the real weights (none exist here, so none of this is measured here): 16 steps match 32 on WER
and 12 matched it in a 48-sentence test (8 did not); a prompt K/V cache refreshed every 8 steps
kept the character error rate and cost 0.01-0.02 speaker similarity; reusing the unconditional
log-probabilities for 3 steps changed no metric (omnivoice-mlx, omnivoice-fastpath).

Defaults, one rule: the library does what upstream's ``generate`` does, ``best`` and the text
as written (``LIBRARY_PRESET``, ``normalize_text=False``); every tool and door built on it (the
CLI, batch, the page, gradio_client, MCP, the OpenAI door) makes ``balanced``, twice as fast on a
CPU, and reads numbers, dates and money as words (``DOOR_PRESET``, ``DOOR_NORMALIZE_TEXT``), as
OpenAI's speech API does and upstream's README recommends for digits.
"""

from __future__ import annotations

import copy
import inspect
import math
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import InitVar, dataclass, field, fields
from functools import lru_cache

import numpy as np

from omnivoice_rt.engine.unmask import UnmaskSettings
from omnivoice_rt.limits import (
    MAX_DURATION_S,
    MAX_SAMPLE_RATE,
    MAX_SPEED,
    MAX_STEPS,
    MAX_TEXT_CHARS,
    MIN_SAMPLE_RATE,
    MIN_SPEED,
)
from omnivoice_rt.text import markup, normalize, script
from omnivoice_rt.text.instructs import ZH_RE, resolve_instruct
from omnivoice_rt.text.languages import check_string, resolve_language

PRESETS = {
    "best": {"num_step": 32, "prompt_cache_refresh": 0, "guidance_every": 1},
    "balanced": {"num_step": 16, "prompt_cache_refresh": 8, "guidance_every": 3},
    "fast": {"num_step": 12, "prompt_cache_refresh": 6, "guidance_every": 3},
    # Experimental: the frame cache is untested on OmniVoice's real weights (by anyone).
    "turbo": {
        "num_step": 12,
        "frame_cache_refresh": 12,  # in full at the first step...
        "cache_refresh_share": 0.4,  # ...and once 40% of the codes changed since,
        "frame_refresh_prompt": False,  # the target alone, after the prompt's first keys and values
        "guidance_every": 3,
    },
}
EXPERIMENTAL = ("turbo",)  # presets every door labels experimental
LIBRARY_PRESET = "best"  # OmniVoiceONNX.generate and stream
DOOR_PRESET = "balanced"  # the CLI, batch, the page, gradio_client, MCP, the OpenAI door
DOOR_NORMALIZE_TEXT = True  # the same doors; the library: False, as upstream
# how a request's numbers are read as words: (text, language) -> the text as read
Normalizer = Callable[[str, "str | None"], str]


@dataclass(frozen=True)
class GenerationSettings(UnmaskSettings):
    """Per-call settings: the unmasking loop's, and the rest of upstream's
    ``OmniVoiceGenerationConfig``, with its defaults."""

    denoise: bool = True
    preprocess_prompt: bool = True
    postprocess_output: bool = True
    audio_chunk_duration: float = 15.0
    audio_chunk_threshold: float = 30.0
    pad_duration: float = 0.1
    fade_duration: float = 0.1
    # 0: every step runs the whole conditional row (exact). r > 0: it runs in full every r-th step
    # and keeps the prompt's keys and values; the steps between run the target alone against them.
    prompt_cache_refresh: int = 0
    # The unconditional row runs every k-th step; its log-probabilities are reused between.
    guidance_every: int = 1
    # Experimental. 0: off. r > 0: every r-th run of a row is in full and keeps every position's
    # keys and values; the runs between forward only the frames whose codes changed (forward.py).
    frame_cache_refresh: int = 0
    # With either cache: a row also runs in full once this share of all codes changed since its
    # last full run (0: off).
    cache_refresh_share: float = 0.0
    # Experimental, with the frame cache. True: a row's refresh runs its prompt too (the whole
    # row). False: its first run does; later refreshes run the target alone after the prompt's
    # keys and values from the first run (as the prompt cache keeps them).
    frame_refresh_prompt: bool = True

    @classmethod
    def preset(cls, name: str, **overrides) -> GenerationSettings:
        """The settings of preset ``name`` (see ``PRESETS``), with ``overrides`` on top."""
        if name not in PRESETS:
            raise ValueError(f"unknown preset {_shown(name)}; use one of {', '.join(PRESETS)}")
        return cls(**{**PRESETS[name], **overrides})

    def validate(self) -> None:
        """Each setting within its option's bounds (``OPTIONS``); ``OptionError`` naming it."""
        for name in OPTIONS.keys() & SETTINGS:  # the rest are upstream's, not a request's
            OPTIONS[name].check(name, getattr(self, name))


SETTINGS = {f.name for f in fields(GenerationSettings)}


class OptionError(ValueError):
    """Bad input for one option of a request: ``option`` names it (as in ``OPTIONS``), so that
    every door can point at its own field without checking it again."""

    def __init__(self, option: str, message: str):
        super().__init__(message)
        self.option = option


KINDS = {  # an option's kind: (the values it takes, as a message names them)
    "text": "a string",
    "number": "a number",
    "whole": "a whole number",
    "bool": "true or false",
    "file": "a file",
}


@dataclass(frozen=True)
class Option:
    """One option a request takes: its kind (``KINDS``; JSON's, so a bool is no number), what it
    means, and its bounds (``low`` and ``high`` inclusive, ``above`` exclusive; ``typical``: what
    an error suggests). The CLI's flags, batch's item keys, the library's keyword arguments and
    every door's checks come from these declarations; an option's default is its field's in
    :class:`Request` or :class:`GenerationSettings` (a preset's where it sets one).

    ``control``: the range a slider of the page shows, (low, high, step), where it is narrower
    than the bound (the range people use; a value past it is still accepted from a client or by
    typing it); ``tests/server/test_page_options.py`` keeps it within the bound."""

    kind: str
    help: str
    low: float | None = None
    high: float | None = None
    above: float | None = None
    typical: str = ""
    control: tuple[float, float, float] | None = None

    def check(self, name: str, value) -> None:
        """``OptionError`` unless ``value`` (not None) is of this kind and within the bounds."""
        if value is None or self.kind == "file" and not isinstance(value, str):
            return  # the library's bytes, arrays, paths and VoicePrompt objects
        within = _is_kind(value, self.kind) and (
            self.kind in ("bool", "text", "file")
            or _finite(value)
            and (self.low is None or value >= self.low)
            and (self.high is None or value <= self.high)
            and (self.above is None or value > self.above)
        )
        if not within:
            raise OptionError(name, f"{name} must be {self.wanted()}, got {_shown(value)}")

    def wanted(self) -> str:
        """What this option takes, in words: "a number from 0.1 to 10 (1.0 is normal)"."""
        high = self.high if self.high is not None and self.high < 2**53 else None  # not seed's
        if self.low is not None and high is not None:
            bounds = [f"from {self.low:g} to {high:g}"]
        else:
            bounds = [f">= {self.low:g}"] if self.low is not None else []
            bounds += [f"> {self.above:g}"] if self.above is not None else []
            bounds += [f"at most {high:g}"] if high is not None else []
        kind = KINDS[self.kind]
        if self.kind == "number" and bounds and high is None:
            kind = "a finite number"  # infinity is >= 0
        typical = f" ({self.typical})" if self.typical else ""
        return " ".join([kind, " and ".join(bounds)]).strip() + typical


# Every option a request takes, in the order the CLI and the docs list them.
OPTIONS: dict[str, Option] = {
    "text": Option(
        "text",
        f"what to say, up to {MAX_TEXT_CHARS:,} characters; [pause:1.5s] tags or SSML (<speak>) "
        "put silences in it",
    ),
    "language": Option(
        "text",
        "the text's language, a name or a code ('English', 'en'); none: detected",
        typical="a language name or code, such as 'en'",
    ),
    "instruct": Option("text", "a voice design: comma-separated items ('female, low pitch')"),
    "ref_audio": Option("file", "a recording of the voice to clone (a file)"),
    "ref_text": Option("text", "what the recording says; left out: transcribed"),
    "voice_prompt": Option(
        "file", "a voice prompt file (.npz) saved earlier, instead of ref_audio"
    ),
    "duration": Option(
        "number",
        "the speech's length in seconds; none: estimated from the text",
        above=0,
        high=MAX_DURATION_S,
        typical="seconds",
    ),
    "speed": Option(
        "number",
        f"speaking rate, 1.0 normal ({MIN_SPEED:g} to {MAX_SPEED:g})",
        low=MIN_SPEED,
        high=MAX_SPEED,
        typical="1.0 is normal",
        control=(0.5, 2.0, 0.05),  # beyond it speech is rarely useful
    ),
    "seed": Option(
        "whole",
        "random seed: the same seed and settings give the same audio",
        low=0,
        high=2**63 - 1,
    ),
    "sample_rate": Option(
        "whole",
        f"the audio's samples a second, {MIN_SAMPLE_RATE} to {MAX_SAMPLE_RATE} (none: the "
        "model's 24000); resampled after synthesis, captions unchanged in seconds",
        low=MIN_SAMPLE_RATE,
        high=MAX_SAMPLE_RATE,
        typical="8000 or 16000 for telephony, 48000 for video",
    ),
    "normalize_text": Option(
        "bool",
        "read numbers, dates, times and money as words, as upstream's normalize_text (the "
        "library: false; the doors: true)",
    ),
    "preset": Option(
        "text",
        "a bundle of settings: "
        + ", ".join(f"{p} (experimental)" if p in EXPERIMENTAL else p for p in PRESETS),
    ),
    "num_step": Option(
        "whole",
        f"unmasking steps, 1 to {MAX_STEPS} (the preset's by default)",
        low=1,
        high=MAX_STEPS,
        typical="12, 16 or 32 are typical",
        control=(1, MAX_STEPS, 1),
    ),
    "guidance_scale": Option(
        "number",
        "classifier-free guidance scale (2.0)",
        low=0,
        control=(0.0, 5.0, 0.1),  # upstream's range of use; higher distorts
    ),
    "t_shift": Option(
        "number", "time-step shift of the schedule (0.1)", above=0, typical="upstream's is 0.1"
    ),
    "layer_penalty_factor": Option("number", "how much later codebooks wait (5.0)", low=0),
    "position_temperature": Option(
        "number", "randomness of which positions unmask first (5.0)", low=0
    ),
    "class_temperature": Option(
        "number", "randomness of the codes chosen (0.0: the most likely)", low=0
    ),
    "denoise": Option("bool", "ask for clean speech from a noisy reference (true)"),
    "preprocess_prompt": Option("bool", "trim and clean the reference first (true)"),
    "postprocess_output": Option("bool", "trim long silences and set the loudness (true)"),
    "prompt_cache_refresh": Option(
        "whole",
        "run the whole prompt every N steps (0: every step, exact)",
        low=0,
        typical="0: exact",
    ),
    "guidance_every": Option(
        "whole",
        "run the unconditional row every N steps (1: every step, exact)",
        low=1,
        typical="1: exact",
    ),
    "frame_cache_refresh": Option(
        "whole",
        "experimental: run each row in full every N steps and only its changed frames between "
        "(0: off, exact)",
        low=0,
        typical="0: off, exact",
    ),
    "cache_refresh_share": Option(
        "number",
        "with a cache: also run a row in full once this share of the codes changed (0: off)",
        low=0,
        high=1,
        typical="0: off",
    ),
    "frame_refresh_prompt": Option(
        "bool",
        "experimental, with the frame cache: a refresh runs the prompt too (true, the default) or "
        "the target alone after the prompt's keys and values from the first step (false)",
    ),
}
FILE_OPTIONS = ("ref_audio", "voice_prompt")
# The options a door takes by their own names, beyond the fields it names its own way (the text,
# the voice design, the voice and its reference): the OpenAI body's further fields and Wyoming's
# event data. A new option of OPTIONS reaches them with no edit of the door.
DOOR_FIELDS = tuple(
    name
    for name in OPTIONS
    if name not in ("text", "instruct", "ref_audio", "ref_text", "voice_prompt")
)


def door_fields(fields: Mapping) -> dict:
    """The entries of ``fields`` (a request body, an event's data) that name an option of
    ``DOOR_FIELDS`` and are given (not None), as they came: :meth:`Request.from_options` checks
    them."""
    return {name: fields[name] for name in DOOR_FIELDS if fields.get(name) is not None}


@dataclass(frozen=True)
class Request:
    """Everything one synthesis needs, checked when made: the text (control characters removed)
    and what the model reads (``spoken_text``: with ``normalize_text``, numbers and dates in
    words), the language as a code, the instruct normalised, the voice (auto, designed, a
    reference and its transcript, or a saved voice prompt) and the settings, a preset expanded.

    ``ref_audio`` may be a path, bytes or (samples, sample_rate); ``voice_prompt`` a path or a
    :class:`~omnivoice_rt.voice_prompt.VoicePrompt`. ``normalizer(text, language)`` reads the
    numbers as words when ``normalize_text`` (None: ``normalize.normalize_text`` in this thread,
    bounded by ``MAX_TEXT_CHARS``; a server passes its worker's, ``omnivoice_rt/server/normalizing.py``)."""

    text: str
    language: str | None = None
    instruct: str | None = None
    ref_audio: object = None
    ref_text: str | None = None
    voice_prompt: object = None
    duration: float | None = None
    speed: float | None = None
    seed: int | None = None
    sample_rate: int | None = None
    normalize_text: bool = False
    settings: GenerationSettings = field(default_factory=GenerationSettings)
    spoken_text: str = field(init=False, default="")
    # the text's segments (each as written and as spoken, its language a code) and the silences
    # between them (omnivoice_rt/text/markup.py): one segment, the text, where it has no markup
    parts: tuple = field(init=False, default=())
    normalizer: InitVar[Normalizer | None] = None

    def __post_init__(self, normalizer: Normalizer | None) -> None:
        # the other options' own checks, below, say more than their declarations
        for name in ("duration", "speed", "seed", "sample_rate", "normalize_text"):
            OPTIONS[name].check(name, getattr(self, name))
        if self.normalize_text is None:  # the only one that may not be left out
            raise OptionError("normalize_text", "normalize_text must be true or false, got None")
        text = _as_option("text", check_text, self.text)
        if script.has_tags(text):
            raise OptionError(
                "text",
                "the text has [voice:NAME] tags (or SSML <voice name> elements), which make it "
                "a dialogue script: speak it as one (the library's generate(text, "
                "speakers=...), synthesize --text or --script, the page's Script tab and its "
                "/script API, MCP's script tool; the OpenAI door and Wyoming take it as it is)",
            )
        if self.ref_text is not None:
            _as_option(
                "ref_text", check_string, self.ref_text, "ref_text (the reference's transcript)"
            )
        if self.ref_text and self.ref_audio is None and self.voice_prompt is None:
            raise OptionError("ref_text", "ref_text was given without ref_audio or a voice prompt")
        self.settings.validate()
        language = _as_option("language", resolve_language, self.language)
        parts = tuple(
            self._read(part, language, normalizer)
            for part in _as_option("text", markup.parse, text)
        )
        self._check_silences(parts)
        spoken = " ".join(p.spoken for p in parts if isinstance(p, markup.Segment))
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "spoken_text", spoken)
        object.__setattr__(self, "parts", parts)
        object.__setattr__(self, "language", language)
        use_zh = bool(ZH_RE.search(spoken))
        instruct = _as_option("instruct", resolve_instruct, self.instruct, use_zh=use_zh)
        object.__setattr__(self, "instruct", instruct)

    def _read(self, part, language: str | None, normalizer: Normalizer | None):
        """A segment with its language as a code and its text as the model reads it (as
        upstream: the target text alone normalized, before the instruct's language and the
        durations); its speed within the bounds. A silence as it is."""
        if isinstance(part, markup.Silence):
            return part
        if part.language is not None:
            language = _as_option("text", resolve_language, part.language)
        speed = (self.speed or 1.0) * part.rate
        if part.rate != 1.0 and not MIN_SPEED <= speed <= MAX_SPEED:
            raise OptionError(
                "text",
                f"<prosody rate> makes a speed of {speed:g} for {part.text[:30]!r}; speed is "
                f"{MIN_SPEED:g} to {MAX_SPEED:g}",
            )
        spoken = part.text
        if self.normalize_text:
            spoken = _as_option("text", _normalized, part.text, language, normalizer)
        return markup.Segment(part.text, language, part.rate, spoken)

    def _check_silences(self, parts: tuple) -> None:
        silence = markup.pause_seconds(parts)
        if silence > MAX_DURATION_S:
            raise OptionError(
                "text",
                f"the text's pauses add up to {silence:g} s; the limit is {MAX_DURATION_S:g} s",
            )
        if self.duration is not None and silence >= self.duration:
            raise OptionError(
                "duration",
                f"the text's pauses take {silence:g} s of the {self.duration:g} s duration, "
                "leaving none for the speech: ask for a longer duration or shorter pauses",
            )

    @property
    def segments(self) -> list[markup.Segment]:
        return [p for p in self.parts if isinstance(p, markup.Segment)]

    @property
    def normalized(self) -> bool:
        """Whether normalization changed the text (``spoken_text`` is then what the model read)."""
        return any(segment.spoken != segment.text for segment in self.segments)

    @classmethod
    def from_options(
        cls,
        options: Mapping,
        preset: str = LIBRARY_PRESET,
        normalize_text: bool = False,
        normalizer: Normalizer | None = None,
    ) -> Request:
        """A request from ``OPTIONS``' names and JSON values (None: not given). ``preset`` and
        ``normalize_text`` are the door's defaults; an option ``preset`` replaces it, and options
        of the settings override it (``num_step`` may name a preset too, the older spelling of
        ``preset``). ``normalizer``: see :class:`Request`."""
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise OptionError(
                unknown[0],
                f"unknown option(s) {', '.join(unknown)}; a request takes {', '.join(OPTIONS)}",
            )
        given = {name: value for name, value in options.items() if value is not None}
        if isinstance(given.get("num_step"), str):
            given["preset"] = given.pop("num_step")
        for name, value in given.items():
            OPTIONS[name].check(name, value)
        if "text" not in given:
            raise OptionError("text", "text is required: what to say")
        name = given.pop("preset", preset)
        settings = _as_option(
            "preset",
            GenerationSettings.preset,
            name,
            **{k: given.pop(k) for k in list(given) if k in SETTINGS},
        )
        given.setdefault("normalize_text", normalize_text)
        return cls(**given, settings=settings, normalizer=normalizer)

    def with_prompt(self, voice_prompt, duration: float | None = None) -> Request:
        """This request with its reference replaced by ``voice_prompt`` (already encoded) and,
        given, its ``duration`` (seconds): the rest as checked and read already (its text is not
        read again)."""
        request = copy.copy(self)
        changes = [("ref_audio", None), ("ref_text", None), ("voice_prompt", voice_prompt)]
        if duration is not None:
            changes.append(("duration", min(duration, MAX_DURATION_S)))
        for name, value in changes:
            object.__setattr__(request, name, value)
        return request

    def options(self) -> dict:
        """The request as ``OPTIONS`` (files and the voice prompt left out): for a record of what
        made a result."""
        plain = {
            "text": self.text,
            "language": self.language,
            "instruct": self.instruct,
            "duration": self.duration,
            "speed": self.speed,
            "seed": self.seed,
            "sample_rate": self.sample_rate,
            "normalize_text": self.normalize_text,
        }
        settings = {k: getattr(self.settings, k) for k in OPTIONS if k in SETTINGS}
        return {k: v for k, v in {**plain, **settings}.items() if v is not None}


def door_request(options: Mapping, normalizer: Normalizer | None = None) -> Request:
    """A request of ``options`` as the doors make them: ``DOOR_PRESET``, numbers read as words."""
    return Request.from_options(options, DOOR_PRESET, DOOR_NORMALIZE_TEXT, normalizer)


def _as_option(name: str, check: Callable, *args, **kwargs):
    """``check(*args, **kwargs)``, its ``ValueError`` an ``OptionError`` naming option ``name``
    (one raised for another option passes as it is)."""
    try:
        return check(*args, **kwargs)
    except OptionError:
        raise
    except ValueError as exc:
        raise OptionError(name, str(exc)) from exc


def check_text(text, normalized: bool = False) -> str:
    """The text to speak, control characters removed; ``ValueError`` when nothing is left to say
    (``normalized``: the text as normalization left it)."""
    text = check_string(text, "text")
    read = " with its numbers read as words" if normalized else ""
    text = "".join(c for c in text if unicodedata.category(c) != "Cc" or c in "\n\t")
    if not text.strip() and not normalized:
        raise ValueError("text is empty: type something to say")
    if len(text) > MAX_TEXT_CHARS:
        raise ValueError(
            f"text is {len(text)} characters long{read}; the limit is {MAX_TEXT_CHARS}. Split it into parts."
        )
    if not any(unicodedata.category(c)[0] in "LN" for c in text):
        raise ValueError("text has no letters or digits to speak (only punctuation or symbols)")
    return text


def _normalized(text: str, language: str | None, normalizer: Normalizer | None) -> str:
    """``text`` normalized (numbers, dates and money in words), checked again as ``check_text``:
    normalization cannot make it too long or unspeakable unseen."""
    if normalizer is None:
        return _normalized_here(text, language)
    return check_text(normalizer(text, language), normalized=True)


@lru_cache(maxsize=32)  # a request remade (dataclasses.replace) is not normalized twice
def _normalized_here(text: str, language: str | None) -> str:
    words = normalize.normalize_text(text, language, max_chars=MAX_TEXT_CHARS)
    return check_text(words, normalized=True)


def options_signature(function):
    """``function(request_or_text, *, progress=..., **options)`` shown by ``help()`` with every
    option of ``OPTIONS`` as a keyword argument (the list is written once, here)."""
    signature = inspect.signature(function)
    parameters = [p for p in signature.parameters.values() if p.kind != p.VAR_KEYWORD]
    defaults = {**{f.name: f.default for f in fields(GenerationSettings)}, "preset": LIBRARY_PRESET}
    parameters += [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=defaults.get(name))
        for name in OPTIONS
        if name != "text"
    ]
    function.__signature__ = signature.replace(parameters=parameters)
    return function


def _is_number(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


def _finite(value) -> bool:
    """Whether a number is finite; a whole number too large for a float is not (10**400)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _is_kind(value, kind: str) -> bool:
    """Whether ``value`` is of the option kind ``kind`` (``KINDS``; numpy's numbers count, a
    bool is no number)."""
    if kind == "bool":
        return isinstance(value, (bool, np.bool_))
    if kind == "whole":
        return _is_int(value)
    if kind in ("text", "file"):
        return isinstance(value, str)
    return _is_number(value)


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{type(value).__name__} {text[:37]}..."
