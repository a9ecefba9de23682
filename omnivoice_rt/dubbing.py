"""Dubbing: a subtitle file spoken cue by cue, each in its window, as one track.

    cues = subtitles.read("film.srt")
    dubbed = dub(voice, cues, {"language": "en", "instruct": "female", "seed": 0})
    soundfile.write("film.wav", dubbed.waveform, dubbed.sample_rate)
    Path("film.json").write_text(json.dumps(dubbed.report))

Each cue is spoken at its natural length where that fits before the next cue (its own end, or
the next cue's start where they overlap), else faster, as fast as ``max_speed``: its speech then
lasts that long (the request's ``duration``). A cue that would need more is not cut: the dub is
refused before anything runs (:class:`DubError`, its report listing every such cue with what it
would need). The speech of each cue (its silences trimmed, as ``postprocess_output`` says) is
placed so that it starts at the cue's start, in a track as long as the last cue's end.

Voices: ``options`` (a request's ``OPTIONS``: the voice, the language, the settings) are every
cue's; a reference is encoded once. With ``speakers`` (a name -> options table, e.g. a voice
library's), a cue "Name: text" (or "Name：text", a name in any script: ``text.script.named``)
is spoken in that voice. A voice without a reference (the auto
voice, a design) keeps its first cue's voice for its later cues, as a long text keeps its first
piece's (``Speech.voice_prompt``), so one speaker is one voice throughout.

The report (JSON values): per cue its number, window, speaker, text, the duration and speed it
was spoken at and where it was placed; the warnings (cues out of order, overlapping, empty).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from omnivoice_rt.captions import Caption
from omnivoice_rt.limits import DUB_MAX_SPEED, MAX_DURATION_S, MAX_SPEED
from omnivoice_rt.request import Request
from omnivoice_rt.speakers import encode_voices, merged_voices
from omnivoice_rt.text import script
from omnivoice_rt.text.durations import estimate_frames
from omnivoice_rt.text.markup import pause_seconds
from omnivoice_rt.text.subtitles import Cue
from omnivoice_rt.voice_prompt import VoicePrompt

logger = logging.getLogger(__name__)


class DubError(ValueError):
    """Subtitles that cannot be dubbed as asked; ``report`` says, cue by cue, why."""

    def __init__(self, message: str, report: dict | None = None):
        super().__init__(message)
        self.report = report or {}


@dataclass
class Dub:
    """A dubbed track: float32 mono samples, each cue's caption where it was placed, the report."""

    waveform: np.ndarray
    sample_rate: int
    captions: list[Caption]
    report: dict = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return self.waveform.shape[-1] / self.sample_rate


@dataclass
class _Line:
    """A cue as it will be spoken: by whom, its request, and the time it has."""

    cue: Cue
    speaker: str | None
    request: Request | None  # None: an empty cue, skipped
    room: float = 0.0  # seconds from its start to its end or the next cue's start
    duration: float = 0.0  # seconds its speech is asked to last
    speed: float = 1.0  # what that is against its natural length at speed 1

    def entry(self) -> dict:
        return {
            "number": self.cue.number,
            "start": self.cue.start,
            "end": self.cue.end,
            "speaker": self.speaker,
            "text": self.cue.text,
            "room": round(self.room, 3),
            "duration": round(self.duration, 3),
            "speed": round(self.speed, 3),
        }


def dub(
    voice,
    cues: list[Cue],
    options: dict | None = None,
    speakers: dict[str, dict] | None = None,
    max_speed: float = DUB_MAX_SPEED,
    request_of: Callable[[dict], Request] = Request.from_options,
    progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> Dub:
    """``cues`` spoken by ``voice`` (an ``OmniVoiceONNX``) in one track. ``options``: every cue's
    request options; ``speakers``: voices by name, for "Name: text" cues (None: such a prefix is
    read as text); ``max_speed``: the fastest a cue may be spoken to fit; ``request_of``: a door's
    way of making a request of options (its preset, its normalizer). ``progress(done, total)`` is
    told each cue; ``should_stop`` as ``generate``'s."""
    if not 1.0 <= max_speed <= MAX_SPEED:
        raise DubError(f"max_speed must be 1 to {MAX_SPEED:g}, got {max_speed!r}")
    options = dict(options or {})
    for name in ("text", "duration"):
        if options.get(name) is not None:
            raise DubError(f"a dub takes its texts and durations from its cues; leave {name} out")
    warnings: list[str] = []
    ordered = sorted(cues, key=lambda cue: (cue.start, cue.number))
    if ordered != list(cues):
        late = next(b for a, b in zip(cues, cues[1:], strict=False) if b.start < a.start)
        warnings.append(
            f"the cues are not in time order (cue {late.number} starts before the one above it): "
            "each is placed at its own time"
        )
    voices = encode_voices(voice, merged_voices(options, speakers))
    lines = [_line(cue, voices, speakers, request_of) for cue in ordered]
    warnings += [
        f"cue {line.cue.number} has no text: skipped" for line in lines if not line.request
    ]
    lines = [line for line in lines if line.request is not None]
    if not lines:
        raise DubError("no cue has anything to say")
    failures = _fit(voice, lines, voices, max_speed, warnings)
    report = {
        "cues": [line.entry() for line in lines],
        "warnings": warnings,
        "max_speed": max_speed,
        "sample_rate": lines[0].request.sample_rate or voice.sample_rate,  # the options'
    }
    if failures:
        report["too_long"] = failures
        raise DubError(
            f"{len(failures)} cue{'s' * (len(failures) > 1)} cannot be said in time even at "
            f"{max_speed:g}x: "
            + "; ".join(
                f"cue {f['number']} needs {f['needs']:.2f} s of its {f['room']:.2f} s "
                f"({f['speed']:.2f}x)"
                for f in failures[:5]
            )
            + ("; ..." if len(failures) > 5 else "")
            + ". Shorten their texts, widen their windows, or allow a faster max speed",
            report,
        )
    return _speak(voice, lines, voices, report, progress, should_stop)


def _line(cue: Cue, voices: dict, speakers: dict | None, request_of) -> _Line:
    text, speaker = cue.text, None
    matched = script.named(text) if speakers is not None else None
    if matched and (matched[0] in voices or " " not in matched[0]):  # "At six: ..." is text
        speaker, text = matched
        if speaker not in voices:
            known = ", ".join(sorted(name for name in voices if name)) or "none"
            raise DubError(
                f"cue {cue.number}: no voice {speaker!r} for its 'Name:' prefix; the voices "
                f"are {known} (or read such prefixes as text: no voice library)"
            )
    if not text.strip():
        return _Line(cue, speaker, None)
    try:
        request = request_of({**voices[speaker]["options"], "text": text})
    except ValueError as exc:
        raise DubError(f"cue {cue.number}: {exc}") from exc
    return _Line(cue, speaker, request)


def _fit(voice, lines: list[_Line], voices: dict, max_speed: float, warnings: list) -> list[dict]:
    """Each line's room and duration; the lines that cannot fit."""
    failures = []
    for index, line in enumerate(lines):
        cue, after = line.cue, lines[index + 1].cue if index + 1 < len(lines) else None
        end = cue.end
        if after is not None and after.start < cue.end:
            if after.start <= cue.start:
                raise DubError(
                    f"cues {cue.number} and {after.number} start at the same time "
                    f"({cue.start:.3f} s): one of them must move"
                )
            end = after.start
            warnings.append(
                f"cue {cue.number} overlaps cue {after.number} by {cue.end - after.start:.3f} s: "
                f"it is spoken within {end - cue.start:.3f} s, to end as cue {after.number} starts"
            )
        line.room = end - cue.start
        natural = _natural(voice, line.request, voices[line.speaker]["prompt"])
        pauses = pause_seconds(line.request.parts)
        needed = (natural - pauses) / (line.room - pauses) if line.room > pauses else np.inf
        speed = line.request.speed or 1.0
        line.duration = min(line.room, pauses + (natural - pauses) / speed, MAX_DURATION_S)
        line.speed = (natural - pauses) / max(line.duration - pauses, 1e-9)
        if needed > max_speed:
            failures.append(
                {
                    "number": cue.number,
                    "room": round(line.room, 3),
                    "needs": round(pauses + (natural - pauses) / max_speed, 3),
                    "natural": round(natural, 3),
                    "speed": round(float(needed), 3),
                }
            )
    return failures


def _natural(voice, request: Request, prompt: VoicePrompt | None) -> float:
    """Seconds ``request`` takes at speed 1 with its voice (the planner's estimate), pauses too."""
    ref_text = prompt.text if prompt is not None else None
    ref_frames = prompt.codes.shape[1] if prompt is not None else None
    frames = sum(
        estimate_frames(segment.spoken, ref_text, ref_frames) for segment in request.segments
    )
    return frames / voice.frame_rate + pause_seconds(request.parts)


def _speak(voice, lines, voices, report, progress, should_stop) -> Dub:
    rate = report["sample_rate"]  # each cue made at it (its request's sample_rate)
    last = max(round(line.cue.end * rate) for line in lines)
    pieces, captions = [], []
    for index, (line, entry) in enumerate(zip(lines, report["cues"], strict=True)):
        prompt = voices[line.speaker]["prompt"]
        request = line.request.with_prompt(prompt, line.duration)
        speech = voice.generate(request, should_stop=should_stop)
        if prompt is None:  # the auto voice or a design: its first cue's voice from now on
            try:
                voices[line.speaker]["prompt"] = speech.voice_prompt()
            except ValueError as exc:
                logger.info("cue %d's voice is not kept: %s", line.cue.number, exc)
        if not speech.captions:
            report["warnings"].append(f"cue {line.cue.number}: nothing audible was made")
            continue
        first, final = speech.captions[0].start_sample, speech.captions[-1].end_sample
        at = round(line.cue.start * rate)
        pieces.append((at, speech.waveform[first:final]))
        captions.append(
            Caption(at, at + final - first, rate, request.spoken_text, _written(line), line.speaker)
        )
        entry.update(
            placed_start=round(at / rate, 6), placed_end=round((at + final - first) / rate, 6)
        )
        if progress is not None:
            progress(index + 1, len(lines))
    track = np.zeros(max([last] + [at + len(w) for at, w in pieces]), np.float32)
    for at, waveform in pieces:
        track[at : at + len(waveform)] += waveform
    report["seconds"] = round(track.shape[-1] / rate, 6)
    return Dub(track, rate, captions, report)


def _written(line: _Line) -> str:
    return script.named(line.cue.text)[1].strip() if line.speaker else line.cue.text
