#!/usr/bin/env python3
"""How often the word aligner reports a word that was never spoken, and how often it wrongly
reports a spoken one, for each cost of leaving a word out (``omnivoice_rt.align.SKIP_SCALE``),
each weight of a hopped frame (``HOP_WEIGHT``) and each share of a word's frames the recording
must hear (``HEARD_SHARE``): every combination of the three lists.

    python bench/missing.py [--scales none,1.75,2.0,2.5] [--hops 0.5] [--heard none,0.2]
                            [--seeds 12] [--languages en,ru,...] [--speaker +f3 --pitch 70]

The speech is ``bench/align.py``'s (every word at its own rate, pauses, 20 dB SNR noise; six
languages of six scripts, both texts; ``--speaker`` and ``--pitch``: another eSpeak voice
variant speaks it, further from the template). Each rendering is aligned three ways: whole (every
unplaced word a false report), with one interior word cut out (from its sound's start to the
next word's) and with two adjacent ones cut out (a hit: every cut word unplaced; every other
unplaced word a false report). Prints, per scale and text (main, held out): the share of
missing words found, spoken words unplaced per 100 on whole speech and on speech with words
cut, the mean and 95th-percentile start error of the whole renderings' spoken words, and the
aligner's time against the first setting's (the settings alternate on each rendering, in a
rotating order); then one machine line with the CPU.

Extras: align (eSpeak NG).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import omnivoice_rt.align as aligner  # noqa: E402
from bench.align import PITCH, TEXTS, VARIANT, varied  # noqa: E402
from bench.benchmark import machine  # noqa: E402
from omnivoice_rt.align import espeak  # noqa: E402


def trials(language: str, text: str, seeds: int, speaker: str, pitch: int):
    """For each seed: the rendering whole, with one word cut, with two cut (audio, rate, the
    cut words' indices, each word's true start: NaN where eSpeak gave none), spoken by
    ``speaker`` at ``pitch``."""
    words = aligner.words_of(text)
    joiner = "" if language == "cmn" else " "
    for seed in range(seeds):
        rng = np.random.default_rng(1000 + seed)
        x, rate, truth = varied(words, language, joiner, rng, speaker, pitch)
        known = np.isfinite(truth)
        yield x, rate, [], truth
        for count in (1, 2):
            # an interior word (never the first or last) whose start and the next kept one's
            # are known
            options = [
                k for k in range(1, len(words) - count - 1) if known[k : k + count + 1].all()
            ]
            k = int(rng.choice(options))
            cut = slice(int(truth[k] * rate), int(truth[k + count] * rate))
            kept = np.r_[x[: cut.start], x[cut.stop :]]
            yield kept, rate, list(range(k, k + count)), truth


Setting = tuple[float, float | None, float | None]  # (HOP_WEIGHT, SKIP_SCALE, HEARD_SHARE)
SETTINGS = ("HOP_WEIGHT", "SKIP_SCALE", "HEARD_SHARE")  # the module's names, in that order


def measure(settings: list[Setting], cases) -> dict:
    """For each setting: the share of missing words found, spoken words unplaced per 100 (whole
    speech, speech with words cut), the whole renderings' start errors and the aligner's time;
    the settings alternate on each case (in a rotating order), so that their times share the
    machine's moments."""
    counts = {setting: dict.fromkeys(COUNTS, 0) for setting in settings}
    errors: dict = {setting: [] for setting in settings}
    took = dict.fromkeys(settings, 0.0)
    default = current()
    for number, (text, language, x, rate, cut, truth) in enumerate(cases):
        shift = number % len(settings)
        espeak.engine().forget()  # a template of its own for each case, shared by the settings
        for setting in settings[shift:] + settings[:shift]:
            apply(setting)
            started = time.perf_counter()
            try:
                result = aligner.align(x, rate, text, language)
            finally:  # the module's own settings back, for whatever aligns next
                apply(default)
            took[setting] += time.perf_counter() - started
            starts = [w.start for w in result]
            tally(counts[setting], errors[setting], starts, truth, cut)
    return {
        setting: {
            "found": c["found"] / max(c["missing"], 1),
            "false_whole": 100 * c["false_whole"] / max(c["whole"], 1),
            "false_cut": 100 * c["false_cut"] / max(c["kept"], 1),
            "mean_ms": 1000 * float(np.mean(errors[setting])) if errors[setting] else np.nan,
            "p95_ms": 1000 * float(np.percentile(errors[setting], 95))
            if errors[setting]
            else np.nan,
            "took": took[setting],
        }
        for setting, c in counts.items()
    }


COUNTS = ("found", "missing", "false_whole", "whole", "false_cut", "kept")


def tally(counts: dict, errors: list, starts: list, truth: np.ndarray, cut: list[int]) -> None:
    """One alignment's words counted into ``counts`` (``COUNTS``) and ``errors``: ``starts``,
    each word's start found (None: unplaced); ``truth``, its true start (NaN: none); ``cut``,
    the words cut out of the rendering (none: it is whole). A cut rendering counts as found
    where every cut word is unplaced, and its other unplaced words as false; a whole one its
    unplaced words as false and its placed words' start errors."""
    found = np.array([np.nan if s is None else s for s in starts], np.float64)
    lost, others = ~np.isfinite(found), np.isfinite(truth)
    others[cut] = False
    wrong = int((lost & others).sum())
    if cut:
        counts["missing"] += 1
        counts["found"] += int(lost[cut].all())
        counts["false_cut"] += wrong
        counts["kept"] += int(others.sum())
    else:
        counts["false_whole"] += wrong
        counts["whole"] += int(others.sum())
        errors += list(np.abs(found - truth)[others & ~lost])


def current() -> Setting:
    """The aligner module's settings now."""
    return tuple(getattr(aligner, name) for name in SETTINGS)


def apply(setting: Setting) -> None:
    for name, value in zip(SETTINGS, setting, strict=True):
        setattr(aligner, name, value)


def _label(setting: Setting) -> str:
    return "/".join("none" if v is None else f"{v:g}" for v in setting)


def _numbers(text: str) -> list[float | None]:
    return list(dict.fromkeys(None if s == "none" else float(s) for s in text.split(",")))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scales", default="none,1.75,2.0,2.5", help="SKIP_SCALE values")
    parser.add_argument("--hops", default=f"{aligner.HOP_WEIGHT:g}", help="HOP_WEIGHT values")
    parser.add_argument(
        "--heard", default=_label((aligner.HEARD_SHARE,)), help="HEARD_SHARE values"
    )
    parser.add_argument("--seeds", type=int, default=12)
    parser.add_argument("--languages", default=",".join(TEXTS))
    parser.add_argument("--speaker", default=VARIANT, help="eSpeak's voice variant: +m3, +whisper")
    parser.add_argument("--pitch", type=int, default=PITCH)
    args = parser.parse_args()
    hops = [h or 0.0 for h in _numbers(args.hops)]
    settings = [
        (hop, scale, heard)
        for hop in hops
        for scale in _numbers(args.scales)
        for heard in _numbers(args.heard)
    ]
    line = []
    for index, name in enumerate(("main", "held")):
        cases = [
            (TEXTS[lang][index], lang, *case)
            for lang in args.languages.split(",")
            for case in trials(lang, TEXTS[lang][index], args.seeds, args.speaker, args.pitch)
        ]
        aligner.align(*cases[0][2:4], *cases[0][:2])  # warm (eSpeak, the first calls): unmeasured
        results = measure(settings, cases)
        base = results[settings[0]]["took"]
        for setting, r in results.items():
            label = _label(setting)
            print(
                f"{name:4} hop/scale/heard {label:>14}: found {100 * r['found']:5.1f}%  spoken "
                f"unplaced per 100: whole {r['false_whole']:.2f}, cut {r['false_cut']:.2f}  "
                f"start error {r['mean_ms']:.1f} / p95 {r['p95_ms']:.1f} ms  "
                f"time {r['took'] / base:.2f}x",
                flush=True,
            )
            line += [f"found_{name}_{label}={r['found']:.3f}"]
            line += [f"false_{name}_{label}={r['false_whole']:.2f}"]
    print(" ".join([*line, f"speaker={args.speaker}", f"pitch={args.pitch}", f"cpu='{machine()}'"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
