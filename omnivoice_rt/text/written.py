"""A read text's pieces as written: where a long segment was normalized ("$5" read as "five
dollars") and then cut into pieces, each piece's written text is found by matching the written
and the read text word by word, so that its captions and word timings show what the user wrote.

    written_pieces("It costs $5. Pay now.", "It costs five dollars. Pay now.",
                   ["It costs five dollars.", "Pay now."])
    # ["It costs $5.", "Pay now."]

A word is a run of characters between spaces, or one character of a script written without
spaces (Chinese, Japanese kana, Thai: ``UNSPACED``), as the word aligner splits them."""

from __future__ import annotations

import re
import unicodedata
from difflib import SequenceMatcher

# scripts written without spaces between words: a word is a character
UNSPACED = ("CJK", "HIRAGANA", "KATAKANA", "THAI", "LAO", "KHMER", "MYANMAR", "TIBETAN")


def script(char: str) -> str:
    """The Unicode script a character's name starts with ("CJK", "LATIN", ...)."""
    return unicodedata.name(char, "").split(" ")[0]


def unspaced(char: str) -> bool:
    return script(char) in UNSPACED


def tokens(text: str) -> list[tuple[str, int]]:
    """``text``'s words and where each starts."""
    found = []
    for match in re.finditer(r"\S+", text):
        run = match.start()
        for at in range(match.start(), match.end() + 1):
            alone = at < match.end() and unspaced(text[at])
            if at == match.end() or alone:
                if at > run:
                    found.append((text[run:at], run))
                if alone:
                    found.append((text[at], at))
                run = at + 1
    return found


def written_pieces(written: str, spoken: str, pieces: list[str]) -> list[str | None] | None:
    """Each of ``pieces`` (``spoken`` cut in order) as ``written``: the written words that were
    read as its words (a written word read as several goes to the piece of the first); None for
    a piece given no written word, and None for all where the pieces are not ``spoken`` cut."""
    said, wrote = tokens(spoken), tokens(written)
    firsts, at = [], 0  # each piece's first word among the spoken words
    for piece in pieces:
        found = spoken.find(piece.strip(), at)
        if found < 0:
            return None
        firsts.append(sum(1 for _, start in said if start < found))
        at = found + len(piece.strip())
    # each spoken word's first written word (None: it is read from the word before it)
    origin: list[int | None] = [None] * len(said)
    matcher = SequenceMatcher(None, [w for w, _ in said], [w for w, _ in wrote], autojunk=False)
    for tag, i1, i2, j1, _ in matcher.get_opcodes():
        if tag == "equal":
            origin[i1:i2] = range(j1, j1 + i2 - i1)
        elif tag == "replace":
            origin[i1] = j1
    starts = [0]
    for first in firsts[1:]:
        while first > 0 and (first >= len(said) or origin[first] is None):
            first -= 1
        starts.append(max(origin[first] or 0, starts[-1]))
    offsets = [wrote[j][1] if j < len(wrote) else len(written) for j in starts] + [len(written)]
    texts = [written[a:b].strip() for a, b in zip(offsets, offsets[1:], strict=False)]
    return [text or None for text in texts]
