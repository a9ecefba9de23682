"""Pauses and SSML: a text as the segments it is spoken in and the silences between them.

Two forms, in the text of any door:

- an inline tag, ``[pause:1.5s]`` or ``[pause:300ms]``, anywhere in a text;
- SSML, a text that starts with ``<speak`` (or ``<?xml``, ``<!``): ``<break time="..."/>`` or
  ``<break strength="..."/>``, ``<p>`` and ``<s>`` (segments with ``BOUNDARIES``' silences after
  them), ``<prosody rate="...">`` (the speed, ``RATES`` or a percentage), ``<sub alias="...">``
  (the alias is said), ``<lang xml:lang="...">`` (a segment in another language). Any other
  element is refused by its name, never read aloud; inline pause tags work inside SSML too.

A text without either is one segment, exactly as written: the model reads it as before. The
non-verbal tags the model knows (``[laughter]``...) are text, untouched. The parser is bounded:
no DOCTYPE, so no entity of the document's own and no external one (a "billion laughs" document
is refused at its first line), at most ``MAX_DEPTH`` levels and ``MAX_ELEMENTS`` elements, and
the text itself is at most ``limits.MAX_TEXT_CHARS``. Every refusal is a :class:`MarkupError`
that says where and what to write instead.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from xml.parsers import expat

from omnivoice_rt.limits import MAX_PAUSE_S, MAX_SEGMENTS

# SSML's break strengths, in seconds of silence (SSML leaves them to the engine; these are
# Azure's steps, halved above "medium"). A <break/> without attributes is "medium".
STRENGTHS = {
    "none": 0.0,
    "x-weak": 0.1,
    "weak": 0.25,
    "medium": 0.5,
    "strong": 0.75,
    "x-strong": 1.0,
}
BOUNDARIES = {"s": "medium", "p": "strong"}  # the silence after a sentence, a paragraph
# <prosody rate>: SSML's words, as a factor of the request's speed ("80%" and "1.2" too)
RATES = {"x-slow": 0.5, "slow": 0.75, "medium": 1.0, "default": 1.0, "fast": 1.25, "x-fast": 1.5}
MAX_DEPTH = 32  # nested elements
MAX_ELEMENTS = 2_000  # elements in one document
# each element's attributes beyond the namespaces (xmlns...)
ELEMENTS = {
    "speak": {"version", "xml:lang", "xml:base", "xsi:schemaLocation"},
    "break": {"time", "strength"},
    "p": {"xml:lang"},
    "s": {"xml:lang"},
    "prosody": {"rate"},
    "sub": {"alias"},
    "lang": {"xml:lang"},
}
PAUSE_TAG = re.compile(r"\[pause:([^\]]*)\]", re.IGNORECASE)
TIME = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s)\s*", re.IGNORECASE)


class MarkupError(ValueError):
    """A pause tag or an SSML document this runtime cannot read; the message says where and what
    to write instead."""


@dataclass(frozen=True)
class Segment:
    """A stretch of text spoken in one go: as written (markup removed) and, once the request has
    read it (numbers as words), as spoken; its language where SSML sets one (None: the request's)
    and its speed as a factor of the request's (``<prosody rate>``)."""

    text: str
    language: str | None = None
    rate: float = 1.0
    spoken: str = ""


@dataclass(frozen=True)
class Silence:
    """Silence between segments, exact to the sample: an asked pause (``boundary`` False: pauses
    in a row add up) or a sentence's or paragraph's own (the longest of a row is kept)."""

    seconds: float
    boundary: bool = False


Part = Segment | Silence


def pause_seconds(parts: list[Part] | tuple) -> float:
    """The silences of ``parts`` added up, in seconds."""
    return sum(part.seconds for part in parts if isinstance(part, Silence))


def is_ssml(text: str) -> bool:
    """Whether ``text`` is an SSML document: it starts with ``<speak``, an XML declaration, a
    DOCTYPE or a comment (any case; the parser then says what it refuses)."""
    return text.lstrip()[:6].lower().startswith(("<speak", "<?xml", "<!"))


def parse(text: str) -> list[Part]:
    """The text's parts in order: segments with something to say, and the silences between (one
    at most between two segments, none at the ends unless asked). A text without markup is
    ``[Segment(text)]``, as written."""
    if is_ssml(text):
        parts = _Ssml().parse(text)
    elif not PAUSE_TAG.search(text):
        return [Segment(text)]
    else:
        parts = inline(text, None, 1.0)
    parts = _merged(parts)
    segments = sum(isinstance(part, Segment) for part in parts)
    if not segments:
        raise MarkupError("text has nothing to say besides its pauses")
    if segments > MAX_SEGMENTS:
        raise MarkupError(
            f"text has {segments} segments between its pauses and tags; the limit is "
            f"{MAX_SEGMENTS}. Use fewer pauses, or split the text into several requests"
        )
    return parts


def inline(text: str, language: str | None, rate: float) -> list[Part]:
    """``text`` split at its ``[pause:...]`` tags."""
    parts: list[Part] = []
    at = 0
    for tag in PAUSE_TAG.finditer(text):
        parts.append(Segment(text[at : tag.start()], language, rate))
        parts.append(Silence(seconds(tag.group(1), tag.group(0))))
        at = tag.end()
    parts.append(Segment(text[at:], language, rate))
    return parts


def seconds(value: str, shown: str) -> float:
    """A pause's length, "1.5s" or "300ms", within ``MAX_PAUSE_S``."""
    match = TIME.fullmatch(value)
    if not match:
        raise MarkupError(f"{shown} is not a pause: write [pause:1.5s] or [pause:300ms]")
    number = float(match.group(1)) / (1000.0 if match.group(2).lower() == "ms" else 1.0)
    if not math.isfinite(number) or number > MAX_PAUSE_S:
        raise MarkupError(f"{shown} is too long: a pause is at most {MAX_PAUSE_S:g} s")
    return number


def _merged(parts: list[Part]) -> list[Part]:
    """Segments stripped, those with nothing to say (no letter or digit) dropped; the silences of
    a row as one (asked pauses added, boundaries' longest); none before the first segment or
    after the last unless asked."""
    merged: list[Part] = []
    run: list[Silence] = []

    def close_run(last: bool = False) -> None:
        if run:
            asked = sum(s.seconds for s in run if not s.boundary)
            boundary = max((s.seconds for s in run if s.boundary), default=0.0)
            edge = last or not merged  # before the first segment, after the last: what was asked
            merged.append(Silence(asked + (0.0 if edge else boundary), not asked))
            run.clear()

    for part in parts:
        if isinstance(part, Silence):
            run.append(part)
            continue
        text = part.text.strip()
        if not any(c.isalnum() for c in text):
            continue
        close_run()
        merged.append(Segment(text, part.language, part.rate))
    close_run(last=True)
    return [p for p in merged if not (isinstance(p, Silence) and p.boundary and not p.seconds)]


class _Ssml:
    """One SSML document's parts, read by expat with the handlers below."""

    def __init__(self):
        self.parts: list[Part] = []
        self.text: list[str] = []  # character data since the last change of state
        self.stack: list[tuple[str, str | None, float, bool]] = []  # name, language, rate, said
        self.elements = 0
        self.parser = parser = expat.ParserCreate()
        parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
        parser.StartDoctypeDeclHandler = self.doctype
        parser.EntityDeclHandler = self.doctype
        parser.ExternalEntityRefHandler = self.doctype
        parser.StartElementHandler = self.start
        parser.EndElementHandler = self.end
        parser.CharacterDataHandler = self.characters

    def parse(self, text: str) -> list[Part]:
        try:
            self.parser.Parse(text, True)
        except expat.ExpatError as exc:
            where = f"line {exc.lineno}, column {exc.offset + 1}"
            message = expat.ErrorString(exc.code)
            raise MarkupError(
                f"the SSML is not well formed at {where}: {message}. Close every tag, and write "
                "&amp; for &, &lt; for <"
            ) from None
        return self.parts

    def refuse(self, message: str) -> MarkupError:
        line, column = self.parser.CurrentLineNumber, self.parser.CurrentColumnNumber + 1
        return MarkupError(f"SSML at line {line}, column {column}: {message}")

    def doctype(self, *_args):
        raise self.refuse("a document may not declare a DOCTYPE or entities; leave them out")

    @property
    def state(self) -> tuple[str | None, float, bool]:
        """The language, rate, and whether character data is said (not inside a <sub>)."""
        if not self.stack:
            return None, 1.0, True
        _name, language, rate, said = self.stack[-1]
        return language, rate, said

    def flush(self) -> None:
        language, rate, _said = self.state
        if self.text:
            self.parts += inline("".join(self.text), language, rate)
            self.text.clear()

    def start(self, name: str, attributes: dict) -> None:
        self.elements += 1
        if self.elements > MAX_ELEMENTS or len(self.stack) >= MAX_DEPTH:
            raise self.refuse(
                f"the document is too large (at most {MAX_ELEMENTS} elements, {MAX_DEPTH} deep)"
            )
        if name == "voice":  # text/script.py reads it, where a door speaks scripts
            raise self.refuse(
                '<voice name="..."> makes a dialogue script: speak the text as one (the doors '
                "that take scripts, or the library's generate(text, speakers=...))"
            )
        if name not in ELEMENTS:
            raise self.refuse(
                f"<{name}> is not supported; use {', '.join(f'<{e}>' for e in ELEMENTS)}, or "
                "leave it out"
            )
        if not self.stack and name != "speak":
            raise self.refuse(f"the document must start with <speak>, not <{name}>")
        if self.stack and name == "speak":
            raise self.refuse("<speak> may not be inside another element")
        unknown = [a for a in attributes if a not in ELEMENTS[name] and not a.startswith("xmlns")]
        if unknown:
            takes = ", ".join(sorted(ELEMENTS[name])) or "no attributes"
            raise self.refuse(f"<{name}> takes {takes}, not {unknown[0]}")
        self.flush()
        language, rate, said = self.state
        if "xml:lang" in attributes:
            language = attributes["xml:lang"]
        if name == "break":
            self.parts.append(Silence(self.break_seconds(attributes)))
        elif name in BOUNDARIES:  # a sentence or paragraph after the text before it
            self.parts.append(Silence(STRENGTHS[BOUNDARIES[name]], boundary=True))
        elif name == "prosody" and "rate" in attributes:
            rate *= self.rate(attributes["rate"])
        elif name == "sub":
            if "alias" not in attributes:
                raise self.refuse('<sub> needs alias="what to say"')
            if said:
                self.parts.append(Segment(attributes["alias"], language, rate))
            said = False
        self.stack.append((name, language, rate, said))

    def end(self, name: str) -> None:
        self.flush()
        self.stack.pop()
        if name in BOUNDARIES:
            self.parts.append(Silence(STRENGTHS[BOUNDARIES[name]], boundary=True))

    def characters(self, data: str) -> None:
        if not self.stack:
            return  # nothing lies outside <speak> but whitespace (expat refuses the rest)
        if self.stack[-1][0] == "break" and data.strip():
            raise self.refuse('<break> is empty: write <break time="1s"/>')
        if self.state[2]:
            self.text.append(data)

    def break_seconds(self, attributes: dict) -> float:
        if "time" in attributes:
            return seconds(attributes["time"], f'<break time="{attributes["time"]}"/>')
        strength = attributes.get("strength", "medium")
        if strength not in STRENGTHS:
            raise self.refuse(
                f'<break strength="{strength}"/>: use one of {", ".join(STRENGTHS)}, or time="1s"'
            )
        return STRENGTHS[strength]

    def rate(self, value: str) -> float:
        """A ``<prosody rate>`` as a factor: a word of ``RATES``, "80%" or "+20%", or a number."""
        text = value.strip().lower()
        if text in RATES:
            return RATES[text]
        try:
            if text.endswith("%"):
                number = float(text[:-1])
                factor = 1.0 + number / 100 if text[0] in "+-" else number / 100
            else:
                factor = float(text)
        except ValueError:
            factor = math.nan
        if not math.isfinite(factor) or factor <= 0:
            raise self.refuse(
                f'<prosody rate="{value}">: use {", ".join(RATES)}, a percentage such as '
                '"80%" or "+20%", or a factor such as "1.2"'
            )
        return factor
