"""Subtitle files read for dubbing: SRT and WebVTT, to cues (a number, a window, a text).

    cues = subtitles.parse(Path("film.srt").read_text(encoding="utf-8"), "srt")
    [(cue.number, cue.start, cue.end, cue.text) for cue in cues]

A small parser, bounded (``MAX_SUBTITLE_BYTES``, ``MAX_CUES``, times within ``MAX_TRACK_S``), of
the forms both formats take in the wild: SRT's numbered blocks (``,`` or ``.`` before the
milliseconds), WebVTT's header, its NOTE, STYLE and REGION blocks, cue identifiers and settings,
hours left out. A cue's lines are joined with a space; markup (``<i>``, ``<c.x>``, ``<00:01.000>``
timestamps, ``{\\an8}``) is dropped and WebVTT's character references read. Anything else is a
:class:`SubtitleError` naming the first bad cue by its number and line.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from pathlib import Path

from omnivoice_rt.limits import MAX_CUES, MAX_SUBTITLE_BYTES, MAX_TRACK_S

FORMATS = ("srt", "vtt")
_TIME = r"(?:(\d+):)?([0-5]?\d):([0-5]\d)[,.](\d{1,3})"
_TIMING = re.compile(rf"\s*{_TIME}\s*-->\s*{_TIME}(?:\s+.*)?\s*$")
_TAG = re.compile(r"<[^>]{0,200}>|\{\\[^}]{0,200}\}")


class SubtitleError(ValueError):
    """A subtitle file that cannot be read: which cue, which line, and what is wrong."""


@dataclass(frozen=True)
class Cue:
    """One subtitle: its number in the file (1, 2, ...), its window in seconds, its text."""

    number: int
    start: float
    end: float
    text: str

    @property
    def seconds(self) -> float:
        return self.end - self.start


def format_of(path: str | Path) -> str:
    """The format a file's name says (``.srt``, ``.vtt``)."""
    kind = Path(path).suffix.lower().lstrip(".")
    if kind not in FORMATS:
        raise SubtitleError(
            f"subtitles are read from .srt or .vtt files; {Path(path).name!r} is neither"
        )
    return kind


def sniffed(path: str | Path) -> str:
    """The format of a file that may come without its name (an MCP client's ``data:`` URI, saved
    under a name of Gradio's): its name's where that says one, else WebVTT where its first line
    says WEBVTT, else SRT (whose parser then names what is wrong)."""
    if Path(path).suffix.lower().lstrip(".") in FORMATS:
        return format_of(path)
    with open(path, "rb") as file:
        head = file.read(16).decode("utf-8-sig", errors="replace")
    return "vtt" if head.startswith("WEBVTT") else "srt"


def read(path: str | Path, kind: str | None = None) -> list[Cue]:
    """The cues of a subtitle file (of ``kind``; None: the format its name says), bounded before
    it is read."""
    path = Path(path)
    kind = kind or format_of(path)
    size = path.stat().st_size
    if size > MAX_SUBTITLE_BYTES:
        raise SubtitleError(
            f"{path.name} is {size >> 10} kB; a subtitle file to dub is at most "
            f"{MAX_SUBTITLE_BYTES >> 20} MB (split it)"
        )
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SubtitleError(
            f"{path.name} is not UTF-8 text (byte {exc.start}); save it as UTF-8"
        ) from None
    return parse(text, kind)


def parse(text: str, kind: str) -> list[Cue]:
    """The cues of a subtitle document of ``kind`` (``FORMATS``), in the file's order."""
    if kind not in FORMATS:
        raise SubtitleError(f"unknown subtitle format {kind!r}; use one of {', '.join(FORMATS)}")
    if len(text) > MAX_SUBTITLE_BYTES:
        raise SubtitleError(f"the subtitles are over {MAX_SUBTITLE_BYTES >> 20} MB (split them)")
    lines = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    blocks = _blocks(lines)
    if kind == "vtt":
        if not blocks or not re.fullmatch(r"WEBVTT(?:[ \t].*)?", lines[blocks[0][0]]):
            raise SubtitleError("a WebVTT file starts with the line WEBVTT")
        blocks = blocks[1:]
    cues = []
    for first, block in blocks:
        if kind == "vtt" and re.match(r"(NOTE|STYLE|REGION)(?:\s|$)", block[0]):
            continue
        number = len(cues) + 1
        if len(cues) >= MAX_CUES:
            raise SubtitleError(f"more than {MAX_CUES} cues (split the file)")
        cues.append(_cue(block, number, first + 1, kind))
    if not cues:
        raise SubtitleError("the file holds no cues")
    return cues


def _blocks(lines: list[str]) -> list[tuple[int, list[str]]]:
    """The runs of non-empty lines, each with the index of its first line."""
    blocks, current, start = [], [], 0
    for index, line in enumerate([*lines, ""]):
        if line.strip():
            if not current:
                start = index
            current.append(line.strip())
        elif current:
            blocks.append((start, current))
            current = []
    return blocks


def _cue(block: list[str], number: int, line: int, kind: str) -> Cue:
    timing = 1 if len(block) > 1 and "-->" not in block[0] else 0  # an index or identifier first
    if kind == "srt" and timing and not block[0].isdigit():
        raise SubtitleError(
            f"cue {number} (line {line}): {block[0][:60]!r} is neither its number nor its times"
        )
    matched = _TIMING.match(block[timing])
    if matched is None:
        raise SubtitleError(
            f"cue {number} (line {line + timing}): {block[timing][:60]!r} is not a timing line "
            "such as 00:00:01,000 --> 00:00:02,500"
        )
    groups = matched.groups()
    start, end = _seconds(groups[:4]), _seconds(groups[4:])
    if end <= start:
        raise SubtitleError(
            f"cue {number} (line {line + timing}): it ends ({end:.3f} s) before it starts "
            f"({start:.3f} s)"
        )
    if end > MAX_TRACK_S:
        raise SubtitleError(
            f"cue {number} (line {line + timing}): it ends at {end:.0f} s; a dub is at most "
            f"{MAX_TRACK_S / 3600:g} hours long"
        )
    words = " ".join(_TAG.sub("", text) for text in block[timing + 1 :])
    if kind == "vtt":
        words = html.unescape(words)
    return Cue(number, start, end, " ".join(words.split()))


def _seconds(groups) -> float:
    hours, minutes, seconds, fraction = groups
    return (
        int(hours or 0) * 3600
        + int(minutes) * 60
        + int(seconds)
        + int(fraction.ljust(3, "0")) / 1000
    )
