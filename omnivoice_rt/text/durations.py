"""Durations: how long a text takes to say, from its characters' weights.

This follows upstream ``omnivoice`` 0.2.1 (``utils/duration.py``, Apache-2.0, Xiaomi Corp.) line for line,
so that our prompts and lengths equal upstream's; copied rather than imported because
``omnivoice`` needs torch.
"""

from __future__ import annotations

import bisect
import unicodedata
from functools import lru_cache

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
