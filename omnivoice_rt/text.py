"""Text front end: languages, voice-design instructs, prompt text, chunking, durations.

These follow upstream ``omnivoice`` 0.2.1 (``models/omnivoice.py`` and ``utils/{text,duration,
voice_design,lang_map}.py``, Apache-2.0, Xiaomi Corp.) line for line, so that our prompts and
lengths equal upstream's; they are copied rather than imported because ``omnivoice`` needs torch.
One difference, on purpose: an unknown language raises ``ValueError`` (upstream logs a warning
and silently falls back to no language).
"""

from __future__ import annotations

import bisect
import difflib
import json
import re
import unicodedata
from functools import lru_cache
from pathlib import Path

from omnivoice_rt.limits import MAX_INSTRUCT_CHARS

# ----------------------------------------------------------------------------- languages

_LANGUAGES = json.loads(
    (Path(__file__).parent / "data" / "languages.json").read_text(encoding="utf-8")
)
LANG_NAME_TO_ID: dict[str, str] = _LANGUAGES["name_to_id"]
LANG_IDS = frozenset(LANG_NAME_TO_ID.values())


def check_string(value, what: str) -> str:
    """``value`` if it is a string of characters: not another type, and no lone UTF-16 surrogate
    (U+D800-U+DFFF: what broken UTF-16, a JSON ``\\ud800`` escape or undecodable command-line bytes
    become), which no tokenizer, log or JSON encoder takes."""
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a string, got {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"{what} holds U+{ord(value[exc.start]):04X} at character {exc.start + 1}, half of a "
            "UTF-16 surrogate pair and not a character: send the text as valid Unicode"
        ) from None
    return value


def quoted(value: str, limit: int = 40) -> str:
    """``value`` as a message quotes what it refuses: in quotes, at most ``limit`` characters
    of it (a reply never copies a long input back)."""
    return repr(clipped(value, limit))


def clipped(value: str, limit: int = 40) -> str:
    """``value``, or its first ``limit`` characters and "..." (upstream's messages, which quote
    their input as it is, keep their wording for any input of a sane length)."""
    return value if len(value) <= limit else value[:limit] + "..."


def language_display_name(name: str) -> str:
    return _LANGUAGES["display_exceptions"].get(name, name.title())


# Two-letter tags (ISO 639-1) of languages OmniVoice knows only by an ISO 639-3 code, and the
# deprecated ones some clients still send; every other two-letter tag is one of its codes or none.
TAG_ALIASES = {
    "ar": "arb",  # Standard Arabic
    "ku": "kmr",  # Northern Kurdish (Kurmanji)
    "mg": "plt",  # Plateau Malagasy
    "ne": "npi",  # Nepali
    "or": "ory",  # Odia
    "tl": "fil",  # Tagalog: Filipino
    "iw": "he",
    "in": "id",
    "ji": "yi",
}
# A BCP-47 tag as browsers, Home Assistant and OpenAI clients send it: en-US, pt_BR, zh-Hant-TW.
LANGUAGE_TAG = re.compile(r"([A-Za-z]{2,3})(?:[-_][A-Za-z0-9]{1,8})*")


def resolve_language(language: str | None) -> str | None:
    """A language code from a code or a name (any case), or a BCP-47 tag by its primary subtag
    (``en-US`` -> ``en``, ``ar`` -> ``arb``); None for None, "" or "None"."""
    if language is not None:
        check_string(language, "the language (a name or code such as 'en')")
    if language is None or not language.strip() or language.strip().lower() == "none":
        return None
    language = language.strip()
    if language in LANG_IDS:
        return language
    if language.lower() in LANG_NAME_TO_ID:
        return LANG_NAME_TO_ID[language.lower()]
    tag = LANGUAGE_TAG.fullmatch(language)
    if tag:
        primary = tag.group(1).lower()
        primary = TAG_ALIASES.get(primary, primary)
        if primary in LANG_IDS:
            return primary
    close = (  # no language's name is over 64 characters
        difflib.get_close_matches(language.lower(), list(LANG_NAME_TO_ID), n=1, cutoff=0.75)
        if len(language) <= 64
        else []
    )
    hint = f" Did you mean '{language_display_name(close[0])}'?" if close else ""
    raise ValueError(
        f"Unknown language '{clipped(language)}'.{hint} Use a language code (e.g. 'en', 'zh', 'ja', 'de'), "
        "a name (e.g. 'English', 'Chinese'), or None to let the model decide."
    )


# ----------------------------------------------------------------------------- voice design

ZH_RE = re.compile(r"[\u4e00-\u9fff]")
_INSTRUCT_CATEGORIES: list = [
    {"male": "男", "female": "女"},
    {
        "child": "儿童",
        "teenager": "少年",
        "young adult": "青年",
        "middle-aged": "中年",
        "elderly": "老年",
    },
    {
        "very low pitch": "极低音调",
        "low pitch": "低音调",
        "moderate pitch": "中音调",
        "high pitch": "高音调",
        "very high pitch": "极高音调",
    },
    {"whisper": "耳语"},
    {
        "american accent",
        "british accent",
        "australian accent",
        "chinese accent",
        "canadian accent",
        "indian accent",
        "korean accent",
        "portuguese accent",
        "russian accent",
        "japanese accent",
    },
    {
        "河南话",
        "陕西话",
        "四川话",
        "贵州话",
        "云南话",
        "桂林话",
        "济南话",
        "石家庄话",
        "甘肃话",
        "宁夏话",
        "青岛话",
        "东北话",
    },
]
INSTRUCT_EN_TO_ZH: dict[str, str] = {}
INSTRUCT_ZH_TO_EN: dict[str, str] = {}
INSTRUCT_EXCLUSIVE: list[set[str]] = []
for _category in _INSTRUCT_CATEGORIES:
    if isinstance(_category, dict):
        INSTRUCT_EN_TO_ZH.update(_category)
        INSTRUCT_ZH_TO_EN.update({v: k for k, v in _category.items()})
        INSTRUCT_EXCLUSIVE.append(set(_category) | set(_category.values()))
    else:
        INSTRUCT_EXCLUSIVE.append(set(_category))
INSTRUCT_VALID = (
    set(INSTRUCT_EN_TO_ZH)
    | set(INSTRUCT_ZH_TO_EN)
    | INSTRUCT_EXCLUSIVE[-2]
    | INSTRUCT_EXCLUSIVE[-1]
)
INSTRUCT_VALID_EN = frozenset(i for i in INSTRUCT_VALID if not ZH_RE.search(i))
INSTRUCT_VALID_ZH = frozenset(i for i in INSTRUCT_VALID if ZH_RE.search(i))


def resolve_instruct(instruct: str | None, use_zh: bool = False) -> str | None:
    """Validate and normalise a voice-design instruct, as upstream's ``_resolve_instruct``."""
    if instruct is not None:
        check_string(instruct, "the instruct (voice-design items such as 'female, low pitch')")
    if instruct is None or not instruct.strip():
        return None
    instruct_str = instruct.strip()
    if len(instruct_str) > MAX_INSTRUCT_CHARS:
        raise ValueError(
            f"the instruct is {len(instruct_str)} characters long; a voice design is a few short "
            f"items such as 'female, low pitch' (at most {MAX_INSTRUCT_CHARS} characters)"
        )
    raw_items = [x for x in re.split(r"\s*[,，]\s*", instruct_str) if x]
    unknown, normalised = [], []
    for raw in raw_items:
        item = raw.strip().lower()
        if item in INSTRUCT_VALID:
            normalised.append(item)
        else:
            suggestion = difflib.get_close_matches(item, INSTRUCT_VALID, n=1, cutoff=0.6)
            unknown.append((raw, item, suggestion[0] if suggestion else None))
    if unknown:
        lines = [
            f"  '{clipped(raw)}' -> '{clipped(item)}' (unsupported; did you mean '{sug}'?)"
            if sug
            else f"  '{clipped(raw)}' -> '{clipped(item)}' (unsupported)"
            for raw, item, sug in unknown[:8]
        ] + ([f"  and {len(unknown) - 8} more"] if len(unknown) > 8 else [])
        raise ValueError(
            f"Unsupported instruct items found in {clipped(instruct_str, 200)}:\n"
            + "\n".join(lines)
            + "\n\nValid English items: "
            + ", ".join(sorted(INSTRUCT_VALID_EN))
            + "\nValid Chinese items: "
            + "，".join(sorted(INSTRUCT_VALID_ZH))
            + "\n\nTip: Use only English or only Chinese instructs. English instructs should use comma + "
            "space (e.g. 'male, indian accent'),\nChinese instructs should use full-width comma (e.g. '男，河南话')."
        )
    has_dialect = any(n.endswith("话") for n in normalised)
    has_accent = any(" accent" in n for n in normalised)
    if has_dialect and has_accent:
        raise ValueError(
            "Cannot mix Chinese dialect and English accent in a single instruct. "
            "Dialects are for Chinese speech, accents for English speech."
        )
    if has_dialect:
        use_zh = True
    elif has_accent:
        use_zh = False
    table = INSTRUCT_EN_TO_ZH if use_zh else INSTRUCT_ZH_TO_EN
    normalised = [table.get(n, n) for n in normalised]
    conflicts = [
        hits for cat in INSTRUCT_EXCLUSIVE if len(hits := [n for n in normalised if n in cat]) > 1
    ]
    if conflicts:
        raise ValueError(
            "Conflicting instruct items within the same category: "
            + "; ".join(" vs ".join(f"'{x}'" for x in group) for group in conflicts)
            + ". Each category (gender, age, pitch, style, accent, dialect) allows at most one item."
        )
    has_zh = any(any("\u4e00" <= c <= "\u9fff" for c in n) for n in normalised)
    return ("，" if has_zh else ", ").join(normalised)


# ----------------------------------------------------------------------------- prompt text

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


SENTENCE_END = set(".!?…")  # ends a sentence when a space or the end of the text follows
SENTENCE_END_CJK = set("。！？")  # ends a sentence where it stands


def complete_sentences(text: str) -> tuple[list[str], str]:
    """The complete sentences at the start of ``text`` (a text still arriving, as a language
    model writes it), and the rest, still incomplete. A sentence ends at '.', '!', '?' or '…'
    followed by a space (not after an abbreviation such as 'Dr.'), or at '。', '！', '？'; closing
    quotes and brackets after it belong to it."""
    sentences, start, i = [], 0, 0
    while i < len(text):
        char = text[i]
        if char in SENTENCE_END or char in SENTENCE_END_CJK:
            end = i + 1
            while end < len(text) and (text[end] in CLOSING_MARKS or text[end] in SENTENCE_END):
                end += 1
            words = text[start:end].split()
            complete = char in SENTENCE_END_CJK or (end < len(text) and text[end].isspace())
            if char == "." and words and words[-1].rstrip("".join(CLOSING_MARKS)) in ABBREVIATIONS:
                complete = False
            if complete:
                sentence = text[start:end].strip()
                if sentence:
                    sentences.append(sentence)
                start = end
            i = end
        else:
            i += 1
    return sentences, text[start:].lstrip()


# ----------------------------------------------------------------------------- durations

_WEIGHTS = {
    "cjk": 3.0,
    "hangul": 2.5,
    "kana": 2.2,
    "ethiopic": 3.0,
    "yi": 3.0,
    "indic": 1.8,
    "thai_lao": 1.5,
    "khmer_myanmar": 1.8,
    "arabic": 1.5,
    "hebrew": 1.5,
    "latin": 1.0,
    "cyrillic": 1.0,
    "greek": 1.0,
    "armenian": 1.0,
    "georgian": 1.0,
    "punctuation": 0.5,
    "space": 0.2,
    "digit": 3.5,
    "mark": 0.0,
    "default": 1.0,
}
# (last code point, script) of each Unicode block, in order; upstream's RuleDurationEstimator table.
_RANGES = [
    (0x02AF, "latin"),
    (0x03FF, "greek"),
    (0x052F, "cyrillic"),
    (0x058F, "armenian"),
    (0x05FF, "hebrew"),
    (0x077F, "arabic"),
    (0x089F, "arabic"),
    (0x08FF, "arabic"),
    (0x097F, "indic"),
    (0x09FF, "indic"),
    (0x0A7F, "indic"),
    (0x0AFF, "indic"),
    (0x0B7F, "indic"),
    (0x0BFF, "indic"),
    (0x0C7F, "indic"),
    (0x0CFF, "indic"),
    (0x0D7F, "indic"),
    (0x0DFF, "indic"),
    (0x0EFF, "thai_lao"),
    (0x0FFF, "indic"),
    (0x109F, "khmer_myanmar"),
    (0x10FF, "georgian"),
    (0x11FF, "hangul"),
    (0x137F, "ethiopic"),
    (0x139F, "ethiopic"),
    (0x13FF, "default"),
    (0x167F, "default"),
    (0x169F, "default"),
    (0x16FF, "default"),
    (0x171F, "default"),
    (0x173F, "default"),
    (0x175F, "default"),
    (0x177F, "default"),
    (0x17FF, "khmer_myanmar"),
    (0x18AF, "default"),
    (0x18FF, "default"),
    (0x194F, "indic"),
    (0x19DF, "indic"),
    (0x19FF, "khmer_myanmar"),
    (0x1A1F, "indic"),
    (0x1AAF, "indic"),
    (0x1B7F, "indic"),
    (0x1BBF, "indic"),
    (0x1BFF, "indic"),
    (0x1C4F, "indic"),
    (0x1C7F, "indic"),
    (0x1C8F, "cyrillic"),
    (0x1CBF, "georgian"),
    (0x1CCF, "indic"),
    (0x1CFF, "indic"),
    (0x1D7F, "latin"),
    (0x1DBF, "latin"),
    (0x1DFF, "default"),
    (0x1EFF, "latin"),
    (0x309F, "kana"),
    (0x30FF, "kana"),
    (0x312F, "cjk"),
    (0x318F, "hangul"),
    (0x9FFF, "cjk"),
    (0xA4CF, "yi"),
    (0xA4FF, "default"),
    (0xA63F, "default"),
    (0xA69F, "cyrillic"),
    (0xA6FF, "default"),
    (0xA7FF, "latin"),
    (0xA82F, "indic"),
    (0xA87F, "default"),
    (0xA8DF, "indic"),
    (0xA8FF, "indic"),
    (0xA92F, "indic"),
    (0xA95F, "indic"),
    (0xA97F, "hangul"),
    (0xA9DF, "indic"),
    (0xA9FF, "khmer_myanmar"),
    (0xAA5F, "indic"),
    (0xAA7F, "khmer_myanmar"),
    (0xAADF, "indic"),
    (0xAAFF, "indic"),
    (0xAB2F, "ethiopic"),
    (0xAB6F, "latin"),
    (0xABBF, "default"),
    (0xABFF, "indic"),
    (0xD7AF, "hangul"),
    (0xFAFF, "cjk"),
    (0xFDFF, "arabic"),
    (0xFE6F, "default"),
    (0xFEFF, "arabic"),
    (0xFFEF, "latin"),
]
_BREAKPOINTS = [end for end, _ in _RANGES]


@lru_cache(maxsize=4096)
def char_weight(char: str) -> float:
    """How long a character takes to say, relative to one Latin letter."""
    code = ord(char)
    if 65 <= code <= 90 or 97 <= code <= 122:
        return _WEIGHTS["latin"]
    if code == 32:
        return _WEIGHTS["space"]
    if code == 0x0640:  # Arabic tatweel
        return _WEIGHTS["mark"]
    category = unicodedata.category(char)
    for prefix, kind in (
        ("M", "mark"),
        ("P", "punctuation"),
        ("S", "punctuation"),
        ("Z", "space"),
        ("N", "digit"),
    ):
        if category.startswith(prefix):
            return _WEIGHTS[kind]
    index = bisect.bisect_left(_BREAKPOINTS, code)
    if index < len(_RANGES):
        return _WEIGHTS[_RANGES[index][1]]
    return _WEIGHTS["cjk"] if code > 0x20000 else _WEIGHTS["default"]


def estimate_frames(
    text: str, ref_text: str | None, ref_frames: int | None, speed: float = 1.0
) -> int:
    """Target frames for ``text`` at the pace of the reference (upstream's RuleDurationEstimator
    and ``_estimate_target_tokens``); without a reference, "Nice to meet you." in 25 frames."""
    if ref_frames is None or not ref_text:
        ref_text, ref_frames = "Nice to meet you.", 25
    ref_weight = sum(char_weight(c) for c in ref_text)
    if ref_frames <= 0 or ref_weight == 0:
        estimate = 0.0
    else:
        estimate = sum(char_weight(c) for c in text) / (ref_weight / ref_frames)
        if estimate < 50:  # short texts get a power-curve boost (low_threshold 50, strength 3)
            estimate = 50 * (estimate / 50) ** (1 / 3)
    if speed > 0 and speed != 1.0:
        estimate = estimate / speed
    return max(1, int(estimate))
