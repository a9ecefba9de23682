"""Dialogue scripts: a text spoken turn by turn, each turn in its speaker's voice.

One grammar, in the text of any door:

- ``[voice:NAME]`` anywhere: what follows it, up to the next such tag, is NAME's turn. A text
  with such a tag is always a script; what comes before the first tag is the default voice's.
- Where a script is asked for (``script=True``; ``"script": true`` on the OpenAI door, a flag on
  the command line), a line starting ``Name:`` (or the full-width ``Name：``) starts Name's turn,
  and the lines after it without a name continue it. Only then, so that "Note: the gate closes
  at six" stays ordinary text in an ordinary request. Text before the first name is the default
  voice's. Blank lines between turns are fine; a line's later colons are its text's.

A name is 1 to ``MAX_SPEAKER_CHARS`` characters of any script: a letter first, then letters,
their marks, digits, spaces, ``.``, ``_``, ``'`` or ``-`` ("María", "小明", "Speaker 2",
"Dr. Watson"), never a path or markup. A turn's text keeps its own markup (``[pause:1s]``, the
model's non-verbal tags); each turn is a request of its own (:mod:`omnivoice_rt.dialogue`).

- An SSML document (:mod:`omnivoice_rt.text.markup`) with ``<voice name="NAME">`` elements:
  each is NAME's turn, an SSML document of its own (the elements around it reopened, so a
  ``<prosody>`` or ``<p>`` around several voices holds in each); the document's text outside
  every ``<voice>`` is the default voice's. Such a document is always a script; its lines are
  not read for ``Name:``, nor its text for ``[voice:NAME]`` tags (refused: use ``<voice>``).

Refused before anything runs, as a :class:`ScriptError` naming the line and what to write: a
named turn with no text, a ``[voice:...]`` tag whose name is not a name, a line whose "Name:"
is a path or markup ("../notes:", "<b>Ann</b>:"; a script's lines only), more than
``MAX_SPEAKERS`` speakers, a script with nothing to say or longer than ``MAX_SCRIPT_CHARS``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from xml.parsers import expat
from xml.sax.saxutils import escape, quoteattr

from omnivoice_rt.limits import MAX_SCRIPT_CHARS, MAX_SPEAKER_CHARS, MAX_SPEAKERS
from omnivoice_rt.text.markup import MAX_DEPTH, MAX_ELEMENTS, is_ssml

VOICE_TAG = re.compile(r"\[voice:([^\]\n]*)\]", re.IGNORECASE)
TAG_START = re.compile(r"\[voice:", re.IGNORECASE)
# "Name:" or "Name：" at a line's start: the name's candidate, checked by ``is_name``
NAMED_LINE = re.compile(rf"[ \t]*([^:：\n]{{1,{MAX_SPEAKER_CHARS}}})[:：][ \t]*(.*)")
# every line break ``str.splitlines`` knows (``parse`` splits lines so; a stream's reader alike)
LINE_BREAK = re.compile("\r\n|[\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
# what a held "[voice:" waits for, and a blank line after a named line with no text: until it
# comes, a stream's chunks are only added to what is held (each chunk read once)
TAG_END, LINE_SAID = re.compile(r"[\]\n]"), re.compile(r"\S|\n")
NOT_INDENT = re.compile(r"[^ \t]")  # what a line's start held for its name waits for
SSML_VOICE = re.compile(r"<voice[\s/>]", re.IGNORECASE)  # an SSML document's <voice> element
SSML_ASIDE = re.compile(r"<!--.*?-->|<!\[CDATA\[.*?\]\]>", re.DOTALL)  # no element inside
SSML_GROWTH = 4  # a document's turns, their elements reopened, at most this times its length
# a line's "Name:" that is a path ("../notes:", "/etc/x:", "~/a:") or holds a markup tag
# ("<b>Ann</b>:"): refused, not read as text ("and/or:", "24/7:", "<3 you:" stay text)
NOT_A_NAME = re.compile(r"(\.{1,2}|~)?[/\\].*|.*<[^<>\s][^<>]*>.*")
NAME_PUNCTUATION = " ._'-"
NAME_RULE = (
    f"a name is 1 to {MAX_SPEAKER_CHARS} letters, digits, spaces, '.', '_', \"'\" or '-', a "
    "letter first"
)


class ScriptError(ValueError):
    """A script this runtime cannot speak: the message names the line and what to write."""


@dataclass(frozen=True)
class Turn:
    """One speaker's turn: who (None: the default voice), what, and the line it starts on."""

    speaker: str | None
    text: str
    line: int


def is_name(name: str) -> bool:
    """Whether ``name`` is a speaker's name: a letter first, then letters, marks, digits and
    ``NAME_PUNCTUATION``, at most ``MAX_SPEAKER_CHARS``, no space at either end."""
    if not 0 < len(name) <= MAX_SPEAKER_CHARS or name != name.strip():
        return False
    first = unicodedata.category(name[0])
    return first.startswith("L") and all(
        unicodedata.category(c)[0] in "LMN" or c in NAME_PUNCTUATION for c in name
    )


def named(line: str) -> tuple[str, str] | None:
    """``(name, text)`` of a line that starts ``Name:`` (or ``Name：``), else None."""
    matched = NAMED_LINE.fullmatch(line)
    if matched is None or not is_name(matched.group(1).strip()):
        return None
    return matched.group(1).strip(), matched.group(2)


def _named_line(line: str, number: int) -> tuple[str, str] | None:
    """:func:`named` of line ``number`` of a script; a ``ScriptError`` naming it where its
    "Name:" is a path or markup (``NOT_A_NAME``)."""
    found = named(line)
    matched = NAMED_LINE.fullmatch(line) if found is None else None
    if matched is not None and NOT_A_NAME.fullmatch(matched.group(1).strip()):
        raise ScriptError(
            f"line {number}: {matched.group(1).strip()[:40]!r} is no speaker's name; "
            f"{NAME_RULE}, such as 'Ann: what Ann says'"
        )
    return found


def has_tags(text: str) -> bool:
    """Whether ``text`` is a script whatever the request says: it has a ``[voice:...]`` tag,
    or it is an SSML document with a ``<voice>`` element."""
    if is_ssml(text):
        return SSML_VOICE.search(SSML_ASIDE.sub("", text)) is not None
    return VOICE_TAG.search(text) is not None


def parse(text: str, named_lines: bool = False, limit: int = MAX_SCRIPT_CHARS) -> list[Turn]:
    """The turns of ``text``: split at ``[voice:NAME]`` tags, and with ``named_lines`` at lines
    starting ``Name:``; ``ScriptError`` where it cannot be spoken or is over ``limit``
    characters (a server's doors: a text's, ``MAX_TEXT_CHARS``)."""
    if len(text) > limit:
        raise ScriptError(
            f"the script has {len(text):,} characters; the limit is {limit:,} here: split it "
            "into parts"
        )
    if is_ssml(text):
        return _checked(_Voices().parse(text))
    turns: list[Turn] = []
    speaker, lines, start, tagged = None, [], 1, False
    every = text.splitlines()
    for number, line in enumerate(every, 1):
        turn = _named_line(line, number) if named_lines else None
        if turn is not None:
            _close(turns, speaker, lines, start, tagged)
            (speaker, line), lines, start, tagged = turn, [], number, False
            if not line.strip() and not _continues(every, number):
                raise _no_text(speaker, number)
        for part in _tagged(line, number):
            if isinstance(part, str):
                lines.append(part)
                continue
            _close(turns, speaker, lines, start, tagged)
            speaker, lines, start, tagged = part.speaker, [], number, True
        lines.append("\n")
    _close(turns, speaker, lines, start, tagged)
    return _checked(turns)


def _no_text(speaker: str, number: int) -> ScriptError:
    return ScriptError(
        f"line {number}: {speaker!r} has no text; write '{speaker}: what {speaker} says', or "
        "remove the line"
    )


def _continues(lines: list[str], number: int) -> bool:
    """Whether the line after line ``number`` carries on its turn (not blank, no name)."""
    after = lines[number] if number < len(lines) else ""
    return bool(after.strip()) and named(after) is None


def _tagged(line: str, number: int) -> Iterator[str | Turn]:
    """The line's text and its ``[voice:NAME]`` tags in order: strings, and a ``Turn`` with no
    text for each tag, each tag checked as it comes (a ``ScriptError`` where it names no
    speaker), as a stream reads them."""
    at = 0
    for tag in VOICE_TAG.finditer(line):
        name = tag.group(1).strip()
        if not is_name(name):
            raise ScriptError(
                f"line {number}: [voice:{tag.group(1)[:40]}] names no speaker; {NAME_RULE}, "
                "such as [voice:Ann]"
            )
        yield line[at : tag.start()]
        yield Turn(name, "", number)
        at = tag.end()
    yield line[at:]


def _close(turns: list[Turn], speaker, lines: list[str], start: int, tagged: bool) -> None:
    """The turn made of ``lines``, where it says something; a ``ScriptError`` where a
    ``[voice:NAME]`` tag (``tagged``) began it and it says nothing."""
    text = " ".join("".join(lines).split())
    if text:
        turns.append(Turn(speaker, text, start))
    elif tagged:
        raise _tag_unsaid(speaker, start)


def _tag_unsaid(speaker: str, number: int) -> ScriptError:
    return ScriptError(
        f"line {number}: [voice:{speaker}] has no text before the next speaker or the end; "
        f"write what {speaker} says after the tag, or remove it"
    )


def _checked(turns: list[Turn]) -> list[Turn]:
    if not turns:
        raise ScriptError(
            "the script has nothing to say: write what each speaker says after its name, "
            "'Ann: what Ann says' or '[voice:Ann] what Ann says'"
        )
    speakers = speakers_of(turns)
    if len(speakers) > MAX_SPEAKERS:
        late = next(t for t in turns if t.speaker == speakers[MAX_SPEAKERS])
        raise ScriptError(
            f"line {late.line}: {late.speaker!r} is speaker {MAX_SPEAKERS + 1}; a script has at "
            f"most {MAX_SPEAKERS} speakers"
        )
    return turns


def speakers_of(turns: list[Turn]) -> list[str]:
    """The named speakers of ``turns``, in the order they first speak."""
    return list(dict.fromkeys(turn.speaker for turn in turns if turn.speaker))


class TurnReader:
    """A script arriving in pieces, as a Wyoming stream's chunks bring it: ``feed(text)``
    returns what is sure so far, in order, as ``Turn`` parts: the text said by the speaker
    whose turn it is, and a part with no text where a turn begins (the last one has ended).
    ``feed("", end=True)`` gives the rest. Read as ``parse`` reads a whole text (``named_lines``
    for "Name:" lines, ``[voice:NAME]`` tags always), holding back only what may yet become a
    name or a tag; a tag naming no speaker, or a named line with no text and no line carrying
    its turn on, is a ``ScriptError`` naming its line, as ``parse`` refuses them."""

    def __init__(self, named_lines: bool = False):
        self.named_lines, self.pending, self.line = named_lines, "", 1
        self.speaker, self.line_start = None, True
        self.carriage = ""  # a chunk's last "\r", held: the next chunk's "\n" may be its pair
        self.unsaid: tuple[str, int] | None = None  # a named line with no text: name, line
        self.tag_unsaid: tuple[str, int] | None = None  # a tag with no text after it yet
        self.waits_for: re.Pattern | None = None  # what the text held waits for (TAG_END...)

    def feed(self, text: str, end: bool = False) -> list[Turn]:
        text, self.carriage = self.carriage + text, ""
        if text.endswith("\r") and not end:
            text, self.carriage = text[:-1], "\r"
        text = LINE_BREAK.sub("\n", text)  # lines as parse's splitlines splits them
        self.pending += text
        if self.waits_for is not None and not end and not self.waits_for.search(text):
            return []  # what is held still waits
        self.waits_for, parts = None, []
        while self.pending and (part := self._next(end)) is not None:
            parts.append(part)
        if end and self.unsaid is not None:  # a named line with no text was the last
            raise _no_text(*self.unsaid)
        if end and self.tag_unsaid is not None:  # a tag with no text was the last
            raise _tag_unsaid(*self.tag_unsaid)
        return parts

    def _next(self, end: bool) -> Turn | None:
        text = self.pending
        if self.unsaid is not None and not self.line_start and text.partition("\n")[0].strip():
            self.unsaid = None  # the named line's text came after its name, in a later chunk
        if self.line_start and self.named_lines:
            line = text.partition("\n")[0]
            if not (end or "\n" in text or ":" in line or "：" in line):
                if len(line.lstrip(" \t")) <= MAX_SPEAKER_CHARS:
                    self.waits_for = None if line.strip(" \t") else NOT_INDENT
                    return None  # it may yet be "Name:"
                if self.unsaid is not None and not line.strip():
                    self.waits_for = LINE_SAID
                    return None  # it may yet be a blank line
            self.line_start = False
            found = _named_line(line, self.line)
            if self.unsaid is not None and (found is not None or not line.strip()):
                raise _no_text(*self.unsaid)  # the line after it does not carry its turn on
            self.unsaid = None
            if found is not None:
                if not found[1].strip():
                    self.unsaid = (found[0], self.line)
                return self._begins(found[0], len(line) - len(found[1]))
        stop = min((at for at in (text.find("\n"), text.find("[")) if at >= 0), default=len(text))
        if stop == 0 and text[0] == "\n":
            self.line, self.line_start, stop = self.line + 1, True, 1
        elif stop == 0:
            tag = VOICE_TAG.match(text)
            if tag is not None:
                list(_tagged(tag.group(0), self.line))  # a ScriptError: it names no speaker
                began = self._begins(tag.group(1).strip(), tag.end())
                self.tag_unsaid = (began.speaker, self.line)
                return began
            if not end and _may_be_tag(text):
                self.waits_for = TAG_END if len(text) >= len("[voice:") else None
                return None
            stop = 1  # a "[" of the text ("[laughter]", "[pause:1s]")
        said, self.pending = text[:stop], text[stop:]
        if said.strip():
            self.tag_unsaid = None
        return Turn(self.speaker, said, self.line)

    def _begins(self, speaker: str, length: int) -> Turn:
        if self.tag_unsaid is not None:  # the turn a tag began ends with nothing said
            raise _tag_unsaid(*self.tag_unsaid)
        self.speaker, self.pending = speaker, self.pending[length:]
        return Turn(speaker, "", self.line)


def _may_be_tag(text: str) -> bool:
    """Whether ``text``, which starts "[", may yet become a ``[voice:NAME]`` tag: it starts as
    one and neither its "]" nor the line's end has come (held until then, however padded, so
    that a stream reads a tag as ``parse`` does; a stream's text is bounded)."""
    head = text[: len("[voice:")].lower()
    return "[voice:".startswith(head) and "\n" not in text and "]" not in text


class _Voices:
    """An SSML document's turns: split at its ``<voice name>`` elements, each turn an SSML
    document of its own (the elements open around it reopened before it and closed after it).
    Read by expat as ``markup`` reads SSML: no DOCTYPE, no entities, bounded in size; the
    turns' own elements are checked when each turn is read as a request."""

    def __init__(self):
        self.turns: list[Turn] = []
        self.open: list[tuple[str, dict]] = []  # the elements open: (name, attributes)
        self.body: list[str] = []  # the current turn's document since its start
        self.head, self.line, self.said, self.elements = "", 1, False, 0
        self.run = ""  # the text since the last element that may yet become a tag (_open_tag)
        self.room = 0  # characters the turns' documents may still take
        self.parser = parser = expat.ParserCreate()
        parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
        parser.StartDoctypeDeclHandler = parser.EntityDeclHandler = self.doctype
        parser.ExternalEntityRefHandler = self.doctype
        parser.StartElementHandler, parser.EndElementHandler = self.start, self.end
        parser.CharacterDataHandler = self.characters

    def parse(self, text: str) -> list[Turn]:
        self.room = SSML_GROWTH * len(text) + 1_000
        try:
            self.parser.Parse(text, True)
        except expat.ExpatError as exc:
            raise ScriptError(
                f"the SSML is not well formed at line {exc.lineno}, column {exc.offset + 1}: "
                f"{expat.ErrorString(exc.code)}. Close every tag, and write &amp; for &"
            ) from None
        self.turn_ends()
        return self.turns

    def refuse(self, message: str) -> ScriptError:
        return ScriptError(f"SSML at line {self.parser.CurrentLineNumber}: {message}")

    def doctype(self, *_args):
        raise self.refuse("a document may not declare a DOCTYPE or entities; leave them out")

    @property
    def speaker(self) -> str | None:
        """The innermost ``<voice>``'s name, None outside every ``<voice>``."""
        return next((a["name"] for n, a in reversed(self.open) if n == "voice"), None)

    @property
    def inside_sub(self) -> bool:
        """Whether a ``<sub>`` is open: its text is not said (its alias is)."""
        return any(name == "sub" for name, _ in self.open)

    def turn_ends(self) -> None:
        """The current turn, where it says something, closed; the next begins here."""
        if self.said:
            tail = "".join(f"</{n}>" for n, _ in reversed(self.open) if n != "voice")
            document = " ".join(f"{self.head}{''.join(self.body)}{tail}".split())
            self.room -= len(document)
            if self.room < 0:
                raise self.refuse(
                    "the turns repeat the elements around their <voice> too often: put the "
                    "<voice> elements outside long elements, or split the script"
                )
            self.turns.append(Turn(self.speaker, document, self.line))
        self.head = "".join(_tag(n, a) for n, a in self.open if n != "voice")
        self.body, self.said, self.line = [], False, self.parser.CurrentLineNumber

    def start(self, name: str, attributes: dict) -> None:
        self.elements, self.run = self.elements + 1, ""
        if self.elements > MAX_ELEMENTS or len(self.open) >= MAX_DEPTH:
            raise self.refuse(
                f"the document is too large (at most {MAX_ELEMENTS} elements, {MAX_DEPTH} deep)"
            )
        if not self.open and name != "speak":
            raise self.refuse(f"the document must start with <speak>, not <{name}>")
        if name != "voice":
            self.open.append((name, attributes))
            self.body.append(_tag(name, attributes))
            if name == "sub" and any(c.isalnum() for c in attributes.get("alias", "")):
                self.said, self.line = (
                    True,
                    self.line if self.said else self.parser.CurrentLineNumber,
                )
            return
        if self.inside_sub:
            raise self.refuse("<voice> inside <sub>: put the <sub> inside the <voice>")
        speaker = attributes.get("name", "").strip()
        if set(attributes) - {"name"} or not is_name(speaker):
            raise self.refuse(
                f'<voice> takes a speaker\'s name alone, such as <voice name="Ann">; {NAME_RULE}'
                " (each name's voice comes from the speakers' table or the library)"
            )
        self.turn_ends()
        self.open.append((name, {"name": speaker}))
        self.turn_ends()  # the turn's head: the elements open around this <voice>

    def end(self, name: str) -> None:
        self.run = ""
        if name == "voice":
            self.turn_ends()
            self.open.pop()
            self.turn_ends()
            return
        self.open.pop()
        self.body.append(f"</{name}>")

    def characters(self, data: str) -> None:
        # expat gives a text in parts (at each entity: "[voice&#58;B]" is three), so a tag is
        # looked for in the text so far since the last element, read once: a part that cannot
        # end the open tag held is only added to it
        run = self.run + data
        if TAG_START.match(self.run) and not TAG_END.search(data):
            self.run = run
            return self._said(data)
        if (tag := VOICE_TAG.search(run)) is not None:
            raise self.refuse(
                f"{tag.group(0)[:40]} inside SSML: write "
                '<voice name="NAME">...</voice> around the turn instead'
            )
        self.run = _open_tag(run)
        self._said(data)

    def _said(self, data: str) -> None:
        """The turn's text gains ``data``; the turn says something from its first letter."""
        self.body.append(escape(data))
        first = next((at for at, c in enumerate(data) if c.isalnum()), None)
        if first is not None and not self.said and not self.inside_sub:
            self.said, self.line = True, self.parser.CurrentLineNumber + data.count("\n", 0, first)


def _open_tag(text: str) -> str:
    """What of ``text`` may yet become a ``[voice:...]`` tag: from its first ``[voice:`` after
    its last ``]`` or line end, else its last characters (a ``[voice:`` still cut short)."""
    after = max(text.rfind("]"), text.rfind("\n")) + 1
    start = TAG_START.search(text, after)
    return text[start.start() :] if start else text[max(after, len(text) - 6) :]


def _tag(name: str, attributes: dict) -> str:
    return f"<{name}{''.join(f' {k}={quoteattr(v)}' for k, v in attributes.items())}>"
