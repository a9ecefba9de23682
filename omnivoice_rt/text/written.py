"""A read text's pieces as written: where a long segment was normalized ("$5" read as "five
dollars") and then cut into pieces, each piece's written text is found by matching the written
and the read text word by word, so that its captions and word timings show what the user wrote.

    written_pieces("It costs $5. Pay now.", "It costs five dollars. Pay now.",
                   ["It costs five dollars.", "Pay now."])
    # ["It costs $5.", "Pay now."]

A word here is a run of characters between spaces, or one character of a script written without
spaces (Chinese, Japanese kana, Thai: ``UNSPACED``, the table the word aligner splits such
scripts by too; it also joins punctuation to a word, which matching need not)."""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left

# scripts written without spaces between words: a word is a character
UNSPACED = ("CJK", "HIRAGANA", "KATAKANA", "THAI", "LAO", "KHMER", "MYANMAR", "TIBETAN")
# where the written and the read text part, they meet again within this many written words
# ("1 000 000" is three) and this many read ones ("$31,415,926,535" is 21)
REACH_WRITTEN, REACH_SPOKEN = 8, 40
SENTENCE_ENDS = ".!?。！？"
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
    a piece given no written word, and None for all where the pieces are not ``spoken`` cut
    (each with words) or the two texts part for longer than ``_meeting`` looks."""
    said, wrote = tokens(spoken), tokens(written)
    if not said or not wrote or not all(piece.strip() for piece in pieces):
        return None
    starts = [start for _, start in said]
    firsts, at = [], 0  # each piece's first word among the spoken words
    for piece in pieces:
        found = spoken.find(piece.strip(), at)
        if found < 0:
            return None
        firsts.append(bisect_left(starts, found))
        at = found + len(piece.strip())
    origin = origins([w for w, _ in said], [w for w, _ in wrote])
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


def origins(said: list[str], wrote: list[str]) -> list[int | None] | None:
    """Each spoken word's first written word (None: it is read from the one before it), walking
    both texts in step; where they part, on from where they meet again (:func:`_meeting`); None
    where they do not. Linear in the words: a text's numbers, dates and money change only the
    words they are."""
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
        _fill(origin, said, wrote, (i, j), met)
        i, j = met
    return origin


def _fill(origin: list, said: list, wrote: list, parted: tuple, met: tuple) -> None:
    """Words alike between where the texts parted and where they meet again, in order, as each
    other's ("5 p.m. Be 1st." read "five PM Be first.": "Be" is "Be", so a piece starting there
    starts there as written)."""
    at = parted[1] + 1
    for i in range(parted[0] + 1, met[0]):
        alike = [b for b in range(at, met[1]) if wrote[b] == said[i]][:1]
        if alike:
            origin[i], at = alike[0], alike[0] + 1


def _meeting(said: list, wrote: list, i: int, j: int) -> tuple[int, int] | None:
    """Where the texts, parted at spoken word ``i`` and written word ``j``, meet again: the
    fewest written words skipped (a written stretch read otherwise is short, its reading may be
    long: "$105" is "one hundred and five dollars"), then the fewest spoken, within
    ``REACH_WRITTEN`` and ``REACH_SPOKEN`` words; sure (two words in a row alike, both ends, or
    a word alike after a sentence's end on both sides) where there is such a place, else the
    first word alike (a list of numbers read as words)."""
    first = None
    for b in range(j, min(j + REACH_WRITTEN, len(wrote) - 1) + 1):
        for a in range(i, min(i + REACH_SPOKEN, len(said) - 1) + 1):
            if (a, b) == (i, j) or said[a] != wrote[b]:
                continue
            if said[a] is _END or said[a + 1] == wrote[b + 1]:
                return a, b
            if a > i and b > j and _ends(said[a - 1]) and _ends(wrote[b - 1]):
                return a, b
            first = first or (a, b)
    return first


def _ends(word: str) -> bool:
    """Whether a word ends a sentence."""
    return word[-1] in SENTENCE_ENDS
