"""Languages: names and codes, and the checks of a user's strings.

This follows upstream ``omnivoice`` 0.2.1 (``utils/lang_map.py`` and ``models/omnivoice.py``, Apache-2.0, Xiaomi Corp.) line for line,
so that our prompts and lengths equal upstream's; copied rather than imported because
``omnivoice`` needs torch.
One difference, on purpose: an unknown language raises ``ValueError`` (upstream logs a warning
and silently falls back to no language).
"""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path

_LANGUAGES = json.loads(
    (Path(__file__).parents[1] / "data" / "languages.json").read_text(encoding="utf-8")
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
