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
  29 MB; WeTextProcessing: 2.5 s and 77 MB), shared by threads; ``preload()`` loads them ahead
  (a server, at start). Afterwards both take about 2 ms per character of English.

Differences, on purpose: a language is resolved as the runtime does (``text.resolve_language``:
an unknown one raises ``ValueError``, where upstream passes it to num2words; a BCP-47 tag such as
``en-US`` is English, where upstream gives it to num2words), and a missing package raises
naming it (upstream skips num2words silently).
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

from omnivoice_rt.text import ZH_RE, check_string, resolve_language

logger = logging.getLogger(__name__)

WETEXTPROCESSING = "1.2.0"  # the release whose FSTs these are
FST_DIR = Path(__file__).parent / "data" / "tn"
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
INSTALL_HINT = "pip install kaldifst num2words (both are in requirements.txt)"

# upstream's protected spans: any [...] (non-verbal tags, CMU overrides); pinyin + tone digit
_BRACKET_TAG_RE = re.compile(r"\[[^\[\]]*\]")
_PINYIN_TONE_RE = re.compile(r"[A-Z]+[1-5]")


def normalize_text(text: str, language: str | None = None) -> str:
    """``text`` with numbers, dates, times, money and percentages in words, as upstream's
    ``normalize_text(text, language)``: English and Chinese by WeTextProcessing's rules, other
    languages' whole numbers by num2words; ``language`` None: Chinese if the text has CJK
    characters, else English. Control spans are kept as they are."""
    check_string(text, "text")
    if not text or not text.strip():
        return text
    code = resolve_language(language)
    if code is None:
        code = "zh" if ZH_RE.search(text) else "en"
    if code in FSTS:
        return _apply_with_protection(text, _normalizer(code).normalize, code == "zh")
    num2words = _num2words()
    return _apply_with_protection(text, lambda s: _whole_numbers(s, code, num2words), False)


def preload(languages=tuple(FSTS)) -> None:
    """Load the normalizers of ``languages`` now (a server, at start, so that its first request
    does not wait); errors are logged, and raised again by the call that needs them."""
    try:
        for code in languages:
            _normalizer(code)
        _num2words()
    except (ValueError, OSError) as exc:
        logger.warning("text normalization is not available: %s", exc)


# ----------------------------------------------------------------------------- upstream's rules


def _apply_with_protection(text: str, fn: Callable[[str], str], protect_pinyin: bool) -> str:
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
            out.append(_normalize_segment(fn, text[last:start]))
        out.append(text[start:end])  # protected span, verbatim
        last = end
    if last < len(text):
        out.append(_normalize_segment(fn, text[last:]))
    return "".join(out)


def _normalize_segment(fn: Callable[[str], str], segment: str) -> str:
    """One segment normalized, its outer whitespace kept; unchanged (one warning) if it fails."""
    if not segment.strip():
        return segment
    lead = segment[: len(segment) - len(segment.lstrip())]
    trail = segment[len(segment.rstrip()) :]
    try:
        core = fn(segment.strip())
    except Exception as exc:  # upstream's rule: a segment the normalizer fails on stays as it is
        logger.warning(
            "Text normalization failed on a segment (%s); keeping it unchanged.",
            type(exc).__name__,
        )
        return segment
    return lead + core + trail


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
