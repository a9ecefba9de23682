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
from bisect import bisect_left

# scripts written without spaces between words: a word is a character
UNSPACED = ("CJK", "HIRAGANA", "KATAKANA", "THAI", "LAO", "KHMER", "MYANMAR", "TIBETAN")
# where the written and the read text part, they meet again within this many words on each side
# (a number read as words: "1,234,567" is nine)
REACH = 16
_END = object()


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
    a piece given no written word, and None for all where the pieces are not ``spoken`` cut or
    the two texts part for longer than ``REACH`` words."""
    said, wrote = tokens(spoken), tokens(written)
    starts = [start for _, start in said]
    firsts, at = [], 0  # each piece's first word among the spoken words
    for piece in pieces:
        found = spoken.find(piece.strip(), at)
        if found < 0:
            return None
        firsts.append(bisect_left(starts, found))
        at = found + len(piece.strip())
    origin = _origins([w for w, _ in said], [w for w, _ in wrote])
    if origin is None:
        return None
    begins = [0]  # each piece's first written word
    for first in firsts[1:]:
        while first > 0 and (first >= len(said) or origin[first] is None):
            first -= 1
        begins.append(max(origin[first] or 0, begins[-1]))
    offsets = [wrote[j][1] if j < len(wrote) else len(written) for j in begins] + [len(written)]
    texts = [written[a:b].strip() for a, b in zip(offsets, offsets[1:], strict=False)]
    return [text or None for text in texts]


def _origins(said: list[str], wrote: list[str]) -> list[int | None] | None:
    """Each spoken word's first written word (None: it is read from the one before it), walking
    both texts in step: where they part, the nearest place they meet again (fewest words skipped
    on both sides, each within ``REACH``); None where they do not meet. Linear in the words
    (a text's numbers, dates and money change only the words they are)."""
    origin: list[int | None] = [None] * len(said)
    n, m = len(said), len(wrote)
    said, wrote = [*said, _END], [*wrote, _END]  # the ends meet
    i = j = 0
    while i < n and j < m:
        origin[i] = j
        if said[i] == wrote[j]:
            i, j = i + 1, j + 1
            continue
        met = _meeting(said, wrote, i, j)
        if met is None:
            return None
        i, j = met
    return origin


def _meeting(said: list[str], wrote: list[str], i: int, j: int) -> tuple[int, int] | None:
    for skipped in range(1, 2 * REACH):
        for ahead in range(max(0, skipped - REACH + 1), min(skipped, REACH - 1) + 1):
            a, b = i + ahead, j + skipped - ahead
            if a < len(said) and b < len(wrote) and said[a] == wrote[b]:
                return a, b
    return None
