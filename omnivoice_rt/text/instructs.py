"""Voice-design instructs: the items a design may name, checked and normalised.

This follows upstream ``omnivoice`` 0.2.1 (``utils/voice_design.py`` and ``models/omnivoice.py``, Apache-2.0, Xiaomi Corp.) line for line,
so that our prompts and lengths equal upstream's; copied rather than imported because
``omnivoice`` needs torch.
"""

from __future__ import annotations

import difflib
import re

from omnivoice_rt.limits import MAX_INSTRUCT_CHARS
from omnivoice_rt.text.languages import check_string, clipped

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
