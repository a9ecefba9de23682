#!/usr/bin/env python3
"""How well the word aligner places Japanese written with kanji, whose readings eSpeak NG's
Japanese voice lacks (it says "Chinese letter" for each), for each kanji stand-in
(``omnivoice_rt.align.KANJI_STAND_IN``).

    python bench/kanji.py [--stand-ins none,かん,か] [--seeds 8]

The speech: ``bench/align.py``'s (eSpeak's ``+f3`` voice at pitch 70, each group at its own
rate, pauses, 20 dB SNR noise) speaking each text's kana reading, written here beside it group
by group (a group all kanji or all kana; the particles は and へ as said, わ and え); its true
starts are the groups'. The aligner is given the text as written, with its kanji. Prints, per
text and stand-in (alternating on each rendering): the mean and 95th-percentile start error of
the groups, of those that start with a kanji and of the kana ones, and how many groups were
unplaced; then the same with the reading itself as the text (what the aligner does where it
knows every sound); then one machine line with the CPU.

Extras: align (eSpeak NG).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import omnivoice_rt.align as aligner  # noqa: E402
from bench.align import varied  # noqa: E402
from bench.benchmark import machine  # noqa: E402
from omnivoice_rt.align import espeak  # noqa: E402

# (written, said) group by group: the first tuned the stand-in, the other two checked it
TEXTS = {
    "main": [
        ("私", "わたし"), ("は", "わ"), ("毎朝", "まいあさ"), ("公園", "こうえん"), ("を", "を"),
        ("散歩", "さんぽ"), ("して、", "して、"), ("小", "ちい"), ("さな", "さな"), ("池", "いけ"),
        ("の", "の"), ("周", "まわ"), ("り", "り"), ("で", "で"), ("鳥", "とり"), ("の", "の"),
        ("声", "こえ"), ("を", "を"), ("聞", "き"), ("きながら、", "きながら、"), ("温", "あたた"),
        ("かい", "かい"), ("お", "お"), ("茶", "ちゃ"), ("を", "を"), ("飲", "の"),
        ("みます。", "みます。"),
    ],
    "held": [
        ("昨日", "きのう"), ("の", "の"), ("夜、", "よる、"), ("友達", "ともだち"), ("と", "と"),
        ("駅", "えき"), ("の", "の"), ("近", "ちか"), ("くの", "くの"), ("レストラン", "レストラン"),
        ("で", "で"), ("晩", "ばん"), ("ご", "ご"), ("飯", "はん"), ("を", "を"), ("食", "た"),
        ("べて、", "べて、"), ("遅", "おそ"), ("くまで", "くまで"), ("話", "はな"),
        ("しました。", "しました。"),
    ],
    "third": [
        ("来週", "らいしゅう"), ("の", "の"), ("月曜日", "げつようび"), ("に、", "に、"),
        ("妹", "いもうと"), ("と", "と"), ("一緒", "いっしょ"), ("に", "に"), ("新", "あたら"),
        ("しい", "しい"), ("図書館", "としょかん"), ("へ", "え"), ("本", "ほん"), ("を", "を"),
        ("借", "か"), ("りに", "りに"), ("行", "い"), ("く", "く"), ("予定", "よてい"),
        ("です。", "です。"),
    ],
}  # fmt: skip


def measure(groups: list[tuple[str, str]], stand_ins: list, seeds: int, written: bool = True):
    """For each stand-in: the start errors (seconds) of the groups starting with a kanji and of
    the others, and how many groups were unplaced, over ``seeds`` renderings of the reading;
    ``written``: the aligner is given the text as written (else its reading)."""
    text = "".join(w if written else said for w, said in groups)
    firsts, at = [], 0  # each group's first word
    for w, said in groups:
        firsts.append(at)
        at += len(aligner.words_of(w if written else said))
    kanji = np.array([aligner._kanji(w[0]) for w, _ in groups])
    found = {s: ([], [], 0) for s in stand_ins}
    default = aligner.KANJI_STAND_IN
    for seed in range(seeds):
        x, rate, truth = varied([said for _, said in groups], "ja", "", np.random.default_rng(seed))
        espeak.engine().forget()  # templates of their own for each rendering
        for s in stand_ins[seed % len(stand_ins) :] + stand_ins[: seed % len(stand_ins)]:
            aligner.KANJI_STAND_IN = s
            try:
                words = aligner.align(x, rate, text, "ja")
            finally:
                aligner.KANJI_STAND_IN = default
            starts = np.array(
                [np.nan if words[i].start is None else words[i].start for i in firsts]
            )
            known = np.isfinite(truth)
            placed = known & np.isfinite(starts)
            ek, ea, lost = found[s]
            errors = np.abs(starts - truth)
            found[s] = (ek + list(errors[placed & kanji]), ea + list(errors[placed & ~kanji]),
                        lost + int((known & ~placed).sum()))  # fmt: skip
    return found


def _ms(errors: list) -> str:
    if not errors:
        return "  -   /   -  "
    return f"{1000 * np.mean(errors):5.1f} / {1000 * np.percentile(errors, 95):5.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stand-ins", default="none,かん,か")
    parser.add_argument("--seeds", type=int, default=8)
    args = parser.parse_args()
    stand_ins = [None if s == "none" else s for s in args.stand_ins.split(",")]
    line = []
    for name, groups in TEXTS.items():
        cases = [(stand_ins, True, ""), ([None], False, " (the reading as the text)")]
        for tried, written, note in cases:
            for s, (ek, ea, lost) in measure(groups, tried, args.seeds, written).items():
                label = "none" if s is None else s
                print(
                    f"{name:5} {label:>4}{note}: all {_ms(ek + ea)} ms, kanji {_ms(ek)}, kana "
                    f"{_ms(ea)}; {lost} of {args.seeds * len(groups)} groups unplaced",
                    flush=True,
                )
                if written:
                    line.append(f"mean_ms_{name}_{label}={1000 * np.mean(ek + ea):.1f}")
    print(" ".join([*line, f"cpu='{machine()}'"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
