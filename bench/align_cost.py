#!/usr/bin/env python3
"""What word timings cost against the synthesis they follow, in one run: each text synthesized
with the doors' preset (``balanced``, numbers read as words), then its words placed piece by
piece (``Speech.align_words``, the doors' call), alternating, several times over.

    python bench/align_cost.py ARTIFACTS [--precision int4] [--runs 3] [--languages en,ru,cmn]

The budget (issue 53): the aligner's time under 5% of the synthesis's. Speed does not depend on
the weights, so a random-weight checkpoint's artifacts (``tests/prebuilt``) measure it as well
as the real ones; the words' places on such speech mean nothing. Prints, per text, the seconds
of audio, the synthesis's and the aligner's time (medians over the runs) and their ratio; then
one machine line with the CPU.

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

from bench.align import TEXTS  # noqa: E402
from bench.benchmark import machine  # noqa: E402
from omnivoice_rt.model import OmniVoiceONNX  # noqa: E402
from omnivoice_rt.request import DOOR_NORMALIZE_TEXT, DOOR_PRESET  # noqa: E402

CODES = {"cmn": "zh"}  # bench/align's eSpeak voices as the model's language codes


def measure(voice, text: str, language: str, runs: int) -> dict:
    """The medians over ``runs`` of the synthesis's and the aligner's time, and the audio's
    length; the two alternate, so that they share the machine's moments."""
    made, placed, seconds = [], [], 0.0
    for run in range(runs):
        started = time.perf_counter()
        speech = voice.generate(
            text, language=language, preset=DOOR_PRESET, normalize_text=DOOR_NORMALIZE_TEXT,
            seed=run,
        )  # fmt: skip
        made.append(time.perf_counter() - started)
        started = time.perf_counter()
        speech.align_words(language)
        placed.append(time.perf_counter() - started)
        seconds = speech.seconds
    return {
        "audio": seconds,
        "synthesis": float(np.median(made)),
        "align": float(np.median(placed)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("artifacts", help="an artifacts folder (tests/prebuilt's cpu/ serves)")
    parser.add_argument("--precision", default="int4")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--languages", default="en,ru,cmn")
    args = parser.parse_args()
    voice = OmniVoiceONNX.load(args.artifacts, args.precision)
    voice.generate("Warm up.", language="en", num_step=2)
    line, spent, aligned = [], 0.0, 0.0
    for language in args.languages.split(","):
        for which, text in zip(("main", "held"), TEXTS[language], strict=True):
            m = measure(voice, text, CODES.get(language, language), args.runs)
            share = 100 * m["align"] / m["synthesis"]
            spent, aligned = spent + m["synthesis"], aligned + m["align"]
            print(
                f"{language:4} {which:4} {m['audio']:5.1f} s of audio: synthesis "
                f"{m['synthesis']:6.2f} s, words {m['align']:5.3f} s ({share:.2f}%)",
                flush=True,
            )
            line.append(f"share_{language}_{which}={share:.2f}")
    total = 100 * aligned / spent
    print(f"words: {total:.2f}% of the synthesis ({DOOR_PRESET}, {args.precision})")
    print(" ".join([*line, f"share={total:.2f}", f"cpu='{machine()}'"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
