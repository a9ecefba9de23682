"""Speaking a dialogue script (:mod:`omnivoice_rt.text.script`): turn by turn, each in its
speaker's voice, as one track with a pause between turns.

    made = prepare("Ann: Hello.\nBob: Hi, Ann.", {"seed": 0},
                   {"Ann": {"instruct": "female"}, "Bob": library.options("bob")}, named_lines=True)
    speech = speak(voice, made)   # or stream(voice, made): one result a turn
    # speech.captions: one per piece, each with its speaker ("Ann", "Bob")

``options`` are every turn's (the default voice, the language, the settings), ``speakers`` each
name's voice (a library's options, a design's ``instruct``, a reference); a speaker without a
reference keeps its first turn's voice (:mod:`omnivoice_rt.speakers`). ``prepare`` checks every
turn, and finds every speaker's voice, before any model runs; each turn is then one
``generate`` (its own pieces, pauses and post-processing), the turns joined with ``turn_pause``
seconds of silence, and ``sample_rate`` resamples them through one resampler (the joined turns
are the whole track resampled at once).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import numpy as np

from omnivoice_rt.audio.formats import Resampler
from omnivoice_rt.limits import (
    MAX_SCRIPT_CHARS,
    MAX_SPEAKERS,
    MAX_TURN_PAUSE_S,
)
from omnivoice_rt.request import OPTIONS, OptionError, Request
from omnivoice_rt.speakers import encode_voices, merged_voices, without_reference
from omnivoice_rt.speech import Speech
from omnivoice_rt.text import script
from omnivoice_rt.text.instructs import resolve_instruct
from omnivoice_rt.text.script import NAME_RULE, ScriptError, Turn

TURN_PAUSE_S = 0.4  # silence between two turns, by default


@dataclass(frozen=True)
class Script:
    """A checked script (``prepare``): its turns, each turn's request (its speaker's options
    and text, the reference not yet encoded), each speaker's options, the silence between turns
    and the rate asked (None: the model's)."""

    text: str
    turns: list[Turn]
    requests: list[Request]
    voices: dict  # speaker (None: the default voice) -> its options
    turn_pause: float = TURN_PAUSE_S
    sample_rate: int | None = None

    @property
    def first(self) -> Request:
        return self.requests[0]

    @property
    def seed(self) -> int | None:
        return self.first.seed

    @property
    def normalized(self) -> bool:
        """Whether normalization changed a turn's text."""
        return any(request.normalized for request in self.requests)


def prepare(
    text: str,
    options: dict | None = None,
    speakers: dict[str, dict] | None = None,
    named_lines: bool = False,
    turn_pause: float = TURN_PAUSE_S,
    request_of: Callable[[dict], Request] = Request.from_options,
    limit: int = MAX_SCRIPT_CHARS,
) -> Script:
    """``text`` as a script, every turn checked as a request of its speaker's options (by
    ``request_of``, a door's way of making one: its preset, its normalizer) and every speaker
    found, before any model runs; at most ``limit`` characters (a server's doors hold a whole
    answer's audio: they pass a text's limit, ``MAX_TEXT_CHARS``); ``ScriptError`` naming the line where one is not (an
    ``OptionError`` naming the option, where it is one)."""
    turn_pause = checked_turn_pause(turn_pause)
    options = dict(options or {})
    rate = options.pop("sample_rate", None)  # the whole track is resampled, once
    OPTIONS["sample_rate"].check("sample_rate", rate)
    if options.get("duration") is not None:
        raise OptionError(
            "duration", "a script's turns each take their own length: leave duration out"
        )
    turns = script.parse(text, named_lines, limit)
    check_speakers(turns, speakers or {})
    # the others unread
    used = {name: speakers[speaker_key(speakers, name)] for name in script.speakers_of(turns)}
    voices = merged_voices(options, used)
    requests = [_request(turn, voices, request_of) for turn in turns]
    return Script(text, turns, requests, voices, turn_pause, rate)


def checked_turn_pause(turn_pause) -> float:
    """``turn_pause`` in seconds, 0 to ``MAX_TURN_PAUSE_S``; an ``OptionError`` naming it."""
    is_number = isinstance(turn_pause, (int, float)) and not isinstance(turn_pause, bool)
    if not (is_number and 0 <= turn_pause <= MAX_TURN_PAUSE_S):  # NaN fails too
        raise OptionError(
            "turn_pause",
            f"turn_pause must be 0 to {MAX_TURN_PAUSE_S:g} seconds, got {str(turn_pause)[:20]}",
        )
    return float(turn_pause)


def stream(voice, made: Script, should_stop=None, progress=None) -> Iterator[Speech]:
    """The turns of a checked script spoken by ``voice`` (an ``OmniVoiceONNX``), one result a
    turn (the turn's silence before it, but the first's), the references encoded once, at the
    rate asked through one resampler: joined (``Speech.join``), the whole track.
    ``progress(done, total)`` is told each turn; ``should_stop`` as ``generate``'s."""
    voices = encode_voices(voice, made.voices)
    rate = made.sample_rate or voice.sample_rate
    resampler = Resampler(voice.sample_rate, rate) if rate != voice.sample_rate else None
    gap = np.zeros(round(made.turn_pause * voice.sample_rate), np.float32)
    for index, (turn, request) in enumerate(zip(made.turns, made.requests, strict=True)):
        prompt = voices[turn.speaker]["prompt"]
        speech = voice.generate(request.with_prompt(prompt), should_stop=should_stop)
        if prompt is None:  # the auto voice or a design: its first turn's voice from now on
            try:
                voices[turn.speaker]["prompt"] = speech.voice_prompt()
            except ValueError:
                pass  # a first turn too long to keep: the next is made anew, as dubbing does
        before = gap.size if index else 0
        waveform = np.concatenate([gap[:before], speech.waveform])
        said = [replace(c.moved(before), speaker=turn.speaker) for c in speech.captions]
        if resampler is not None:
            waveform, said = resampler.placed(waveform, said, index == len(made.turns) - 1)
        speech.waveform, speech.sample_rate, speech.captions = waveform, rate, said
        speech.metadata.update(turn=index, speaker=turn.speaker, pieces_in_request=len(made.turns))
        if progress is not None:
            progress(index + 1, len(made.turns))
        yield speech


def speak(voice, made: Script, progress=None, should_stop=None) -> Speech:
    """A checked script spoken by ``voice`` as one result (``stream`` joined); its metadata
    says the turns and the speakers."""
    started = time.perf_counter()
    result = Speech.join(list(stream(voice, made, should_stop, progress)))
    total = time.perf_counter() - started
    for name in ("turn", "speaker", "piece", "pieces", "text"):
        result.metadata.pop(name, None)
    result.metadata.update(
        turns=len(made.turns),
        speakers=script.speakers_of(made.turns),
        timings={"total": total},
        rtf=total / max(result.seconds, 1e-9),
    )
    return result


def library_speakers(library, given: dict[str, str] | None = None) -> dict[str, dict]:
    """A ``speakers`` table: every voice of ``library`` (a ``VoiceLibrary``) by its name, and
    each ``given`` name's voice on top (:func:`given_voice`)."""
    table = {entry.name: library.options(entry.name) for entry in library.entries()}
    for name, voice in (given or {}).items():
        for known in [k for k in table if k.casefold() == name.casefold()]:
            del table[known]  # a name given a voice is that voice in any case ("Echo", "echo")
        table[name] = given_voice(library, name, voice)
    return table


def given_voice(library, name: str, voice: str) -> dict:
    """The options of the voice given to speaker ``name``: a voice of the library, else a voice
    design's items ("female, low pitch"); a ``ScriptError`` naming the speaker otherwise."""
    if not script.is_name(name):
        raise ScriptError(f"{name[:40]!r} is no speaker's name; {NAME_RULE}")
    try:
        return library.options(voice)
    except ValueError:
        try:
            return {"instruct": resolve_instruct(voice)}
        except ValueError as exc:
            raise ScriptError(
                f"speaker {name!r}: {voice[:60]!r} is neither a voice of the library "
                f"({', '.join(library.names())}) nor a voice design ({exc})"
            ) from exc


def checked_speakers(given) -> dict[str, str]:
    """A door's speakers (a JSON object: each speaker's name -> its voice, a voice of the
    library or a design), checked as strings, at most ``MAX_SPEAKERS``; None: none. A
    ``ScriptError`` saying what to send (the voices themselves: :func:`given_voice`)."""
    if given is None:
        return {}
    if not isinstance(given, dict) or not all(
        isinstance(name, str) and isinstance(voice, str) for name, voice in given.items()
    ):
        raise ScriptError(
            "'speakers' must map each speaker's name to a voice (of the library, or a design): "
            '{"María": "female, low pitch", "Bob": "echo"}'
        )
    if len(given) > MAX_SPEAKERS:
        raise ScriptError(
            f"'speakers' names {len(given)} speakers; a script has at most {MAX_SPEAKERS}"
        )
    for name in given:
        if not script.is_name(name.strip()):
            raise ScriptError(f"{name[:40]!r} in 'speakers' is no speaker's name; {NAME_RULE}")
    lines = [f"{name.strip()}={voice}" for name, voice in given.items()]
    return given_voices(lines, "'speakers', entry")  # "Ann": "" is the library's Ann


def given_voices(lines, where: str, strict: bool = True) -> dict[str, str]:
    """``NAME=VOICE`` lines as ``library_speakers``' ``given`` table: the command line's
    ``--speaker`` flags and the page's speakers table alike (``where`` names them in an error,
    with the line's number). A blank line is skipped; ``NAME=`` leaves NAME the library's voice
    of that name; with ``strict``, a line that is not ``NAME=VOICE`` is a ``ScriptError``."""
    given = {}
    for number, line in enumerate(lines, 1):
        name, equals, voice = line.partition("=")
        if not line.strip():
            continue
        if not equals or not name.strip():
            if strict:
                raise ScriptError(
                    f"{where} {number} ({line.strip()[:40]!r}): write NAME=VOICE, such as "
                    "Ann=female or Ann=ann (a voice of the library)"
                )
            continue
        name, voice = name.strip(), voice.strip()
        if voice and given.get(name, voice) != voice:
            raise ScriptError(
                f"{where} {number}: {name[:40]!r} is given two voices ({given[name][:40]!r} "
                f"and {voice[:40]!r}); keep one"
            )
        if voice:
            given[name] = voice
    return given


def speaker_key(speakers: dict, name: str) -> str | None:
    """The name ``speakers`` knows ``name`` by: itself, else the one name that differs from it
    only in case (a script's "Alloy:" speaks in the voice alloy); None where none does, or
    several do ("Ann" and "ann" both saved: only the exact one)."""
    if name in speakers:
        return name
    folded = [k for k in speakers if isinstance(k, str) and k.casefold() == name.casefold()]
    return folded[0] if len(folded) == 1 else None


def check_speakers(turns: list[Turn], speakers: dict) -> None:
    """Every named speaker has a voice (:func:`speaker_key`), before anything runs."""
    for turn in turns:
        if turn.speaker is not None and speaker_key(speakers, turn.speaker) is None:
            known = ", ".join(sorted(speakers)) or "none"
            raise ScriptError(
                f"line {turn.line}: no voice for speaker {turn.speaker!r}; the voices are "
                f"{known}: give {turn.speaker!r} one (--speaker {turn.speaker}=VOICE, the "
                "page's speakers table, 'speakers' in an OpenAI body) or save a voice of that "
                "name in the library"
            )


def library_voice(library, name: str) -> dict:
    """The options of ``library``'s voice for a script's speaker ``name``, found as
    :func:`speaker_key` finds it; ``ValueError`` naming the voices there are."""
    try:
        return library.options(name)
    except ValueError:
        known = speaker_key(dict.fromkeys(library.names()), name)
        if known is None:
            raise
        return library.options(known)


def _request(turn: Turn, voices: dict, request_of) -> Request:
    try:
        return request_of({**without_reference(voices[turn.speaker]), "text": turn.text})
    except OptionError as exc:  # still naming its option, for the doors that point at it
        raise OptionError(exc.option, f"line {turn.line}: {exc}") from exc
    except ValueError as exc:
        raise ScriptError(f"line {turn.line}: {exc}") from exc
