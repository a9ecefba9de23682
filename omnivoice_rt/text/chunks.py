"""Prompt text: non-verbal tags, punctuation, and long texts cut into chunks and sentences.

This follows upstream ``omnivoice`` 0.2.1 (``utils/text.py`` and ``models/omnivoice.py``, Apache-2.0, Xiaomi Corp.) line for line,
so that our prompts and lengths equal upstream's; copied rather than imported because
``omnivoice`` needs torch.
"""

from __future__ import annotations

import re

NONVERBAL_PATTERN = re.compile(
    r"\[(laughter|sigh|confirmation-en|question-en|question-ah|question-oh|"
    r"question-ei|question-yi|surprise-ah|surprise-oh|surprise-wa|"
    r"surprise-yo|dissatisfaction-hnn)\]"
)
NONVERBAL_TAGS = [
    "laughter",
    "sigh",
    "confirmation-en",
    "question-en",
    "question-ah",
    "question-oh",
    "question-ei",
    "question-yi",
    "surprise-ah",
    "surprise-oh",
    "surprise-wa",
    "surprise-yo",
    "dissatisfaction-hnn",
]


def combine_text(text: str, ref_text: str | None = None) -> str:
    """Upstream's ``_combine_text``: reference text first, then whitespace and bracket clean-up."""
    full_text = ref_text.strip() + " " + text.strip() if ref_text else text.strip()
    full_text = re.sub(r"[\r\n]+", "", full_text)
    full_text = full_text.replace("\uff08", "(").replace("\uff09", ")")
    full_text = re.sub(r"[ \t]+", " ", full_text)
    return re.sub(r"(?<=[\u4e00-\u9fff])\s+|\s+(?=[\u4e00-\u9fff])", "", full_text)


END_PUNCTUATION = set(";:,.!?…)]}\"'“”‘’；：，。！？、）】") | {"……"}


def add_punctuation(text: str) -> str:
    """Append a full stop (Chinese or Latin) unless the text already ends in punctuation."""
    text = text.strip()
    if text and text[-1] not in END_PUNCTUATION:
        text += "。" if any("\u4e00" <= c <= "\u9fff" for c in text) else "."
    return text


SPLIT_PUNCTUATION = set(".,;:!?。，；：！？")
CLOSING_MARKS = set("\"'“”‘’）]》>」】")
ABBREVIATIONS = {
    "Mr.",
    "Mrs.",
    "Ms.",
    "Dr.",
    "Prof.",
    "Sr.",
    "Jr.",
    "Rev.",
    "Fr.",
    "Hon.",
    "Pres.",
    "Gov.",
    "Capt.",
    "Gen.",
    "Sen.",
    "Rep.",
    "Col.",
    "Maj.",
    "Lt.",
    "Cmdr.",
    "Sgt.",
    "Cpl.",
    "Co.",
    "Corp.",
    "Inc.",
    "Ltd.",
    "Est.",
    "Dept.",
    "St.",
    "Ave.",
    "Blvd.",
    "Rd.",
    "Mt.",
    "Ft.",
    "No.",
    "Jan.",
    "Feb.",
    "Mar.",
    "Apr.",
    "Aug.",
    "Sep.",
    "Sept.",
    "Oct.",
    "Nov.",
    "Dec.",
    "i.e.",
    "e.g.",
    "vs.",
    "Vs.",
    "Etc.",
    "approx.",
    "fig.",
    "def.",
}


def chunk_text_punctuation(
    text: str, chunk_len: int, min_chunk_len: int | None = None
) -> list[str]:
    """Split ``text`` at sentence punctuation (not after abbreviations) into chunks of about
    ``chunk_len`` characters; chunks under ``min_chunk_len`` join a neighbour. Upstream's algorithm."""
    sentences: list[list[str]] = []
    current: list[str] = []
    for char in text:
        if not current and sentences and (char in SPLIT_PUNCTUATION or char in CLOSING_MARKS):
            sentences[-1].append(char)
            continue
        current.append(char)
        if char in SPLIT_PUNCTUATION:
            if char == ".":
                words = "".join(current).strip().split()
                if words and words[-1] in ABBREVIATIONS:
                    continue
            sentences.append(current)
            current = []
    if current:
        sentences.append(current)

    merged: list[list[str]] = []
    chunk: list[str] = []
    for sentence in sentences:
        if len(chunk) + len(sentence) <= chunk_len:
            chunk.extend(sentence)
        else:
            if chunk:
                merged.append(chunk)
            chunk = sentence
    if chunk:
        merged.append(chunk)

    final = merged
    if min_chunk_len is not None:
        first_short = bool(merged) and len(merged[0]) < min_chunk_len
        final = []
        for i, piece in enumerate(merged):
            if (i == 1 and first_short) or (len(piece) < min_chunk_len and final):
                final[-1].extend(piece)
            else:
                final.append(piece)
    return [s for s in ("".join(c).strip() for c in final) if s]


SENTENCE_END = set(".!?…")  # ends a sentence when a space follows
SENTENCE_END_CJK = set("。！？")  # ends a sentence whatever follows it


_ENDS = re.compile("[" + re.escape("".join(SENTENCE_END | SENTENCE_END_CJK)) + "]")
_RUN = re.compile("[" + re.escape("".join(CLOSING_MARKS | SENTENCE_END)) + "]*")


def complete_sentences(text: str) -> tuple[list[str], str]:
    """The complete sentences at the start of ``text`` (a text still arriving, as a language
    model writes it), and the rest, still incomplete. A sentence ends at '.', '!', '?' or '…'
    followed by a space (not after an abbreviation such as 'Dr.'), or at '。', '！', '？'
    followed by anything; closing quotes and brackets after the mark belong to it, so a mark at
    the end of ``text`` is judged once more has come."""
    arriving = ArrivingSentences()
    return arriving.feed(text), arriving.rest


class ArrivingSentences:
    """A text arriving in parts (a Wyoming stream's chunks), cut into complete sentences as
    they come, as ``complete_sentences`` cuts the whole: ``feed(part)`` gives the sentences the
    part completes, ``rest`` holds the rest. Each mark is judged once, when what follows it has
    come, so a text sent a character at a time costs about what it costs sent whole."""

    def __init__(self):
        self.rest = ""
        self.judged = 0  # the rest's characters before this hold no mark still to judge
        self.run = 0  # where the marks and closing quotes after that mark reach, so far

    def feed(self, part: str) -> list[str]:
        text = self.rest + part
        sentences, start = [], 0
        found = _ENDS.search(text, self.judged)
        while found is not None:
            at, char = found.start(), found.group()
            end = _RUN.match(text, max(at + 1, self.run if at == self.judged else 0)).end()
            if end == len(text):
                break  # what follows the mark (a closing quote?) has not come: judged when it has
            complete = char in SENTENCE_END_CJK or text[end].isspace()
            if complete and char == "." and _last_word(text, start, end) in ABBREVIATIONS:
                complete = False
            if complete:
                if sentence := text[start:end].strip():
                    sentences.append(sentence)
                start = end
            found = _ENDS.search(text, end)
        judged = found.start() if found is not None else len(text)
        self.rest = text[start:].lstrip()
        cut = len(text) - len(self.rest)
        self.judged, self.run = max(0, judged - cut), max(0, len(text) - cut)
        return sentences


def _last_word(text: str, start: int, end: int) -> str:
    """The last word of ``text[start:end]``, its closing marks taken off."""
    at = end
    while at > start and not text[at - 1].isspace():
        at -= 1
    return text[at:end].rstrip("".join(CLOSING_MARKS))
