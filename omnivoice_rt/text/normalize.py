"""Numbers, dates, times, money and percentages read as words: upstream's ``normalize_text``.

    normalize_text("I paid $12.50 on Jan. 5, 2024.", "en")
    -> "I paid twelve point five dollars on the fifth of january , twenty twenty four."

Upstream ``omnivoice`` 0.2.1 (``utils/text.py``, Apache-2.0, Xiaomi Corp.) sends English and
Chinese through WeTextProcessing 1.2.0's normalizers and other languages through ``num2words``
for whole numbers, holding out OmniVoice's control spans (``[laughter]``, CMU overrides such as
``[B EY1 S]``, and in Chinese pinyin with a tone digit). This module gives the same text (tests/
test_normalize.py compares it with upstream's function) with a smaller install:

- WeTextProcessing runs its FSTs on pynini: 720 MB installed, no wheel for macOS on Apple
  silicon. Its normalizers read the FSTs shipped in its wheel (the flags upstream passes only
  matter when FSTs are built, so the shipped ones apply: Chinese punctuation becomes half-width,
  erhua and interjections are removed). Those four files are here (``data/tn``, 1.2 MB
  compressed, checked by SHA-256; ``python -m omnivoice_build.tn_fsts`` copies them) and run on
  kaldifst (4 MB, OpenFst as pynini), with WeTextProcessing's token reordering (``_reorder``).
- Loaded once per process, on the first call of a language (both with a first call: 0.14 s and
  29 MB; WeTextProcessing: 2.5 s and 77 MB), shared by threads (a server loads them in its
  worker as it starts). Afterwards text takes 0.3 ms a character, and numbers 2-4 ms and 0.4 MB
  a character (the FST composed with the whole input at once: the memory grows with it).
- Bounded: a text is read in pieces of at most ``MAX_PIECE_CHARS`` (memory and time bounded by
  the piece), cut where the FSTs end a token anyway (after a sentence's end, see ``pieces``).
  Between pieces it stops when ``should_stop()`` says the client left (``Cancelled``), or as
  soon as the words so far pass ``max_chars`` (then no request could take them); ``run`` reads
  one piece elsewhere (a server's worker process, ``omnivoice_rt/server/normalizing.py``).
- A text of one piece (up to 200 characters) reads exactly as upstream. A longer one reads as
  upstream reads each piece alone, which is upstream's reading of the whole text except where
  the FSTs' shortest path through a long text settles otherwise: seen in 2 of about 60 texts
  of several sentences, "1,000,000" read "one zero zero zero zero zero zero" and "555-1234" "five
  fifty five to ..." in the whole text, "one million" and "five hundred and fifty five to ..."
  alone and in pieces (tests/runtime/test_normalize.py). ``piece_chars=None`` reads the whole text at
  once, as upstream, unbounded.

Differences, on purpose: a language is resolved as the runtime does (``text.resolve_language``:
an unknown one raises ``ValueError``, where upstream passes it to num2words; a BCP-47 tag such as
``en-US`` is English, where upstream gives it to num2words), a missing package raises
naming it (upstream skips num2words silently), and a number written with its thousands apart
("1 000", "2 500 000", a space, a no-break space or a narrow one between groups of three, as
French, German, Russian and SI write them) is read as one number (``JOIN_DIGIT_GROUPS``; upstream
reads each group alone: "one oh oh zero", French "un zéro", "deux cinq cents").
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import os
import re
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from omnivoice_rt.errors import Busy, Cancelled, SynthesisError
from omnivoice_rt.text.instructs import ZH_RE
from omnivoice_rt.text.languages import check_string, resolve_language

logger = logging.getLogger(__name__)

WETEXTPROCESSING = "1.2.0"  # the release whose FSTs these are
FST_DIR = Path(__file__).parents[1] / "data" / "tn"
# WeTextProcessing's TokenParser orders: a token's fields are verbalized in this order.
_ZH_ORDERS = {
    "date": ["year", "month", "day"],
    "fraction": ["denominator", "numerator"],
    "measure": ["denominator", "numerator", "value"],
    "money": ["value", "currency"],
    "time": ["noon", "hour", "minute", "second"],
}
_EN_ORDERS = {
    "date": ["preserve_order", "text", "day", "month", "year"],
    "money": ["integer_part", "fractional_part", "quantity", "currency_maj"],
}
# language: (tagger, verbalizer), each (file name, SHA-256 of the FST), and the token orders
FSTS = {
    "en": (
        ("en_tn_tagger.fst", "61cbddde25889cb9f300c522351c3d2d14f6ba4f4c544bfc9da76c961be6d258"),
        (
            "en_tn_verbalizer.fst",
            "5ba895b6a90a6ab0f60ccf9e52bbb770f496c62856e00ade3ef4a18760bd774e",
        ),
        _EN_ORDERS,
    ),
    "zh": (
        ("zh_tn_tagger.fst", "50381efdb844eb7879a6b90b298f30cd685ecd9ea46160d6f67572579ffcbce8"),
        (
            "zh_tn_verbalizer.fst",
            "d31cbd1905bb94ce16a881108feec4a4b58fe92acc01af149ee9ba3e60e87f66",
        ),
        _ZH_ORDERS,
    ),
}
INSTALL_HINT = (
    "pip install kaldifst num2words (dependencies of omnivoice-onnx; in requirements.txt)"
)

# upstream's protected spans: any [...] (non-verbal tags, CMU overrides); pinyin + tone digit
_BRACKET_TAG_RE = re.compile(r"\[[^\[\]]*\]")
_PINYIN_TONE_RE = re.compile(r"[A-Z]+[1-5]")
# A piece read at once: 200 characters of numbers take 0.6 s and 60 MB, plain words 0.06 s.
MAX_PIECE_CHARS = 200
# Where a text may be cut into pieces (the cut's separator is kept between their words), best
# first: one space after a sentence's end before a capital ("5 p.m. Then", not "Jan. 5"), or after
# a Chinese sentence's end not before closing punctuation; in a sentence longer than a piece, one
# space between two words of letters alone ("the cat", not "$5 million"), else any space, else
# between two Chinese characters, else at the limit.
_SENTENCE_CUT = re.compile(r"(?<=[.!?]) (?=[A-Z])|(?<=[。！？；])(?=[^\s”’」』）)\]])")
_HAN_CUT = re.compile(r"(?<=[\u4e00-\u9fff])(?=[\u4e00-\u9fff])")
# a number's thousands written apart ("1 000", "12 500 000"; a space, no-break space or narrow
# no-break space between groups of three): joined before reading, where upstream read "1 000"
# "one oh oh zero" (English), "un zéro" (French). Not where another digit, a decimal point or
# "+" touches the run, or a spaced digit follows it ("555 123 4567", "+33 612 345 678"), or its
# first group starts with 0 ("030 123 456"). Groups of three may still be apart on purpose ("912
# 345 678", a Spanish phone number; "pages 100 200 300"): such a run is read as one number.
# False: upstream's reading
JOIN_DIGIT_GROUPS = True
_DIGIT_GROUPS = re.compile(
    r"(?<![\d.,+])(?<![\d+][ \u00a0\u202f])(?!0)\d{1,3}(?:[ \u00a0\u202f]\d{3})+"
    r"(?![\d]|[ \u00a0\u202f]\d)"
)
_GROUP_SPACE = re.compile(r"[ \u00a0\u202f]")


def normalize_text(
    text: str,
    language: str | None = None,
    *,
    max_chars: int | None = None,
    should_stop: Callable[[], bool] | None = None,
    run: Callable[[str, str], str] | None = None,
    piece_chars: int | None = MAX_PIECE_CHARS,
) -> str:
    """``text`` with numbers, dates, times, money and percentages in words, as upstream's
    ``normalize_text(text, language)``: English and Chinese by WeTextProcessing's rules, other
    languages' whole numbers by num2words; ``language`` None: Chinese if the text has CJK
    characters, else English. Control spans are kept as they are.

    Read in pieces of at most ``piece_chars`` (None: the whole text at once, as upstream, with
    no bound on time or memory): ``ValueError`` as soon as the words pass ``max_chars``;
    ``Cancelled`` when ``should_stop()`` says so between pieces; ``run(code, piece)`` reads one
    piece (default: here, ``read_piece``)."""
    check_string(text, "text")
    if not text or not text.strip():
        return text
    code = resolve_language(language)
    if code is None:
        code = "zh" if ZH_RE.search(text) else "en"
    reading = _Reading(max_chars, should_stop, piece_chars)
    if JOIN_DIGIT_GROUPS:
        text = _DIGIT_GROUPS.sub(lambda m: _GROUP_SPACE.sub("", m.group()), text)
    if code in FSTS:
        if run is None:
            _normalizer(code)  # loaded first: a missing package is said, not taken for a failure
        read = run or read_piece
        return _apply_with_protection(text, lambda s: read(code, s), code == "zh", reading)
    num2words = _num2words()
    words = lambda s: _whole_numbers(s, code, num2words)  # noqa: E731 - one line, named
    return _apply_with_protection(text, words, False, reading)


def read_piece(code: str, piece: str) -> str:
    """One piece (at most ``MAX_PIECE_CHARS``, no protected span) through the FSTs of ``code``
    ("en" or "zh"), in this process; ``ValueError`` where there is no path."""
    return _normalizer(code).normalize(piece)


def pieces(text: str, limit: int | None = MAX_PIECE_CHARS) -> list[tuple[str, str]]:
    """``text`` cut into (piece, separator) of at most ``limit`` characters each (None: one
    piece), joined back by ``"".join(piece + separator ...)``: sentences packed together, a long
    sentence cut between words (see ``_SENTENCE_CUT``)."""
    if limit is not None and limit < 1:
        raise ValueError(f"a piece holds at least 1 character, not {limit}")
    out, start = [], 0
    while limit is not None and len(text) - start > limit:
        cut, width = _last_cut(text, start, start + limit)
        out.append((text[start:cut], text[cut : cut + width]))
        start = cut + width
    out.append((text[start:], ""))
    return out


def _last_cut(text: str, start: int, end: int) -> tuple[int, int]:
    """Where the piece from ``start`` ends, at most at ``end``: (position, separator's width)."""
    sentence = _last_match(_SENTENCE_CUT, text, start, end)
    if sentence is not None:
        return sentence
    spaces = [i for i in range(end, start, -1) if text[i] == " "]
    for i in spaces:
        before, after = text[text.rfind(" ", start, i) + 1 : i], text[i + 1 :].split(" ", 1)[0]
        if before.isalpha() and after.isalpha():
            return i, 1
    if spaces:
        return spaces[0], 1
    return _last_match(_HAN_CUT, text, start, end) or (end, 0)


def _last_match(pattern: re.Pattern, text: str, start: int, end: int) -> tuple[int, int] | None:
    """The last cut of ``pattern`` after ``start``, at most at ``end``: (position, width)."""
    cuts = [m for m in pattern.finditer(text, start + 1, end + 2) if m.start() <= end]
    return (cuts[-1].start(), len(cuts[-1].group())) if cuts else None


class TextTooLong(ValueError):
    """The words read so far pass the request's limit: reading stops there."""


class _Reading:
    """One ``normalize_text`` call's bounds: the words so far, against ``max_chars``, and the
    client's ``should_stop``, asked before each piece."""

    def __init__(self, max_chars: int | None, should_stop, piece_chars: int | None):
        self.max_chars, self.should_stop, self.chars = max_chars, should_stop, 0
        self.piece_chars = piece_chars

    def before_piece(self) -> None:
        if self.should_stop is not None and self.should_stop():
            raise Cancelled("the request was abandoned while its text was read")

    def add(self, words: str) -> str:
        self.chars += len(words)
        if self.max_chars is not None and self.chars > self.max_chars:
            raise TextTooLong(
                f"text is over {self.max_chars} characters long with its numbers read as words; "
                f"the limit is {self.max_chars}. Split it into parts."
            )
        return words


# ----------------------------------------------------------------------------- upstream's rules


def _apply_with_protection(
    text: str, fn: Callable[[str], str], protect_pinyin: bool, reading: _Reading
) -> str:
    """Run ``fn`` on ``text`` while holding out protected control spans (upstream's)."""
    spans = [m.span() for m in _BRACKET_TAG_RE.finditer(text)]
    if protect_pinyin:
        spans += [m.span() for m in _PINYIN_TONE_RE.finditer(text)]
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    out, last = [], 0
    for start, end in merged:
        if start > last:
            out.append(_normalize_segment(fn, text[last:start], reading))
        out.append(reading.add(text[start:end]))  # protected span, verbatim
        last = end
    if last < len(text):
        out.append(_normalize_segment(fn, text[last:], reading))
    return "".join(out)


def _normalize_segment(fn: Callable[[str], str], segment: str, reading: _Reading) -> str:
    """One segment normalized piece by piece, its outer whitespace kept; unchanged (one warning)
    if a piece fails, as upstream keeps a segment its normalizer fails on."""
    if not segment.strip():
        return reading.add(segment)
    lead = segment[: len(segment) - len(segment.lstrip())]
    trail = segment[len(segment.rstrip()) :]
    words = [reading.add(lead)]
    core = segment.strip()
    for piece, separator in pieces(core, reading.piece_chars):
        reading.before_piece()
        try:
            words.append(reading.add(fn(piece)))
        except (Cancelled, TextTooLong, Busy, SynthesisError):
            raise  # the request ends here, not just this segment's words
        except Exception as exc:  # noqa: BLE001 - upstream keeps such a segment as it is
            return _unchanged(segment, reading, words, exc)
        words.append(reading.add(separator))
    words.append(reading.add(trail))
    return "".join(words)


def _unchanged(segment: str, reading: _Reading, words: list[str], exc: Exception) -> str:
    logger.warning(
        "Text normalization failed on a segment (%s); keeping it unchanged.", type(exc).__name__
    )
    reading.chars -= sum(map(len, words))
    return reading.add(segment)


def _whole_numbers(text: str, lang: str, num2words) -> str:
    """Each run of digits in words by num2words in ``lang``; left as it is where it cannot."""

    def words(match):
        try:
            return num2words(int(match.group()), lang=lang)
        except Exception:
            return match.group()

    return re.sub(r"\d+", words, text)


# ----------------------------------------------------------------------------- loading

_LOCK = threading.Lock()
_NORMALIZERS: dict[str, _Normalizer] = {}


def _normalizer(code: str) -> _Normalizer:
    with _LOCK:
        if code not in _NORMALIZERS:
            tagger, verbalizer, orders = FSTS[code]
            _NORMALIZERS[code] = _Normalizer(_read_fst(*tagger), _read_fst(*verbalizer), orders)
            logger.info("loaded the %s text normalizer (WeTextProcessing's FSTs)", code)
        return _NORMALIZERS[code]


def _num2words():
    try:
        from num2words import num2words
    except ImportError:
        raise ValueError(f"text normalization needs num2words: {INSTALL_HINT}") from None
    return num2words


def _read_fst(name: str, sha256: str):
    """The FST ``name`` of ``data/tn``, checked, arcs sorted for composition."""
    try:
        import kaldifst
    except ImportError:
        raise ValueError(f"text normalization needs kaldifst: {INSTALL_HINT}") from None
    path = FST_DIR / f"{name}.gz"
    try:
        data = gzip.decompress(path.read_bytes())
    except (OSError, EOFError) as exc:
        raise ValueError(f"cannot read {path} ({exc}): restore it from the repository") from None
    if hashlib.sha256(data).hexdigest() != sha256:
        raise ValueError(f"{path} is not WeTextProcessing's FST: restore it from the repository")
    handle, temporary = tempfile.mkstemp(suffix=".fst")  # kaldifst reads FSTs from files
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        fst = kaldifst.StdVectorFst.read(temporary)
    finally:
        os.unlink(temporary)
    kaldifst.arcsort(fst, "ilabel")
    return fst


class _Normalizer:
    """WeTextProcessing's ``Processor.normalize``: tag (the best path through the tagger),
    reorder the tokens' fields, verbalize (the best path through the verbalizer), on bytes."""

    def __init__(self, tagger, verbalizer, orders: dict):
        self.tagger, self.verbalizer, self.orders = tagger, verbalizer, orders

    def normalize(self, text: str) -> str:
        return _best_path(self.verbalizer, _reorder(_best_path(self.tagger, text), self.orders))

    def __repr__(self) -> str:
        return f"_Normalizer({sorted(self.orders)})"


def _best_path(fst, text: str) -> str:
    """The output of the shortest path of ``text`` (its UTF-8 bytes) through ``fst``; as pynini,
    ``ValueError`` when there is none."""
    import kaldifst

    if not text:
        return ""
    lattice = kaldifst.compose(kaldifst.make_linear_acceptor(list(text.encode("utf-8"))), fst)
    if lattice.num_states == 0:
        raise ValueError("no path through the normalizer's FST")
    _ok, _inputs, outputs, _weight = kaldifst.get_linear_symbol_sequence(
        kaldifst.shortest_path(lattice, 1)
    )
    return bytes(label for label in outputs if label).decode("utf-8")


def _reorder(tagged: str, orders: dict) -> str:
    """WeTextProcessing's ``TokenParser.reorder``, step for step: ``name { key: "value" ... }``
    tokens, each token's fields put in ``orders[name]`` (unless it has ``preserve_order: "true"``).
    Where TokenParser would loop for ever (a value without its closing quote), ``ValueError``."""
    tokens, position, end = [], 0, len(tagged)

    def char() -> str:
        return tagged[position] if position < end else ""

    def skip_spaces() -> bool:
        nonlocal position
        while char() == " ":
            position += 1
        return position < end

    def key() -> str:  # letters and "_", possibly none (as TokenParser)
        nonlocal position
        start = position
        while char() and char() in _KEY_CHARS:
            position += 1
        return tagged[start:position]

    def skip(chars: str) -> None:  # each of ``chars`` in turn where it is next
        nonlocal position
        for expected in chars:
            if char() == expected:
                position += 1

    def value() -> str:  # up to the closing quote; a backslash escapes the next character
        nonlocal position
        start = position
        while char() != '"':
            if not char():
                raise ValueError("a tagged value without its closing quote")
            position += 2 if char() == "\\" else 1
        return tagged[start:position]

    while skip_spaces():
        name = key()
        skip(" { ")
        order, members = [], {}
        while skip_spaces():
            if char() == "}":
                position += 1
                break
            field = key()
            skip(': "')
            members[field] = value()
            order.append(field)
            skip('"')
        if name in orders and members.get("preserve_order") != "true":
            order = orders[name]
        tokens.append(
            name + " {" + "".join(f' {k}: "{members[k]}"' for k in order if k in members) + " }"
        )
    return " ".join(tokens).strip()


_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
