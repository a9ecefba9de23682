#!/usr/bin/env python3
"""pocketsphinx's forced alignment, the issue's other candidate that needs no download (its wheel
ships a trained English model), against the default aligner (eSpeak NG's template, warped), on
``bench/missing.py``'s English trials: each rendering of ``bench/align.py``'s speech whole, with
one interior word cut out and with two adjacent ones cut out.

    python bench/sphinx_align.py [--seeds 6] [--optional-seeds 2]

Three aligners, alternating on each rendering: ``espeak`` (``omnivoice_rt.align``), ``forced``
(pocketsphinx given the text, ``Decoder.set_align_text``) and ``optional`` (pocketsphinx given
a grammar in which every word of the text may be left out, so that a word never spoken can be;
slow, so on the first ``--optional-seeds`` seeds only). Prints, per aligner: the missing words
found (every cut word unplaced), spoken words unplaced per 100 on whole speech and on speech
with words cut, the whole renderings' start errors (mean, p95) and the aligner's time; then one
machine line with the CPU.

Extras: align (eSpeak NG), dev (pocketsphinx).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import numpy as np
import soxr

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.align import PITCH, TEXTS, VARIANT  # noqa: E402
from bench.benchmark import machine  # noqa: E402
from bench.missing import COUNTS, tally, trials  # noqa: E402
from omnivoice_rt.align import align, espeak, words_of  # noqa: E402

RATE = 16_000  # pocketsphinx's model's
FRAME_S = 0.01  # its frames
NOT_WORDS = {"<s>", "</s>", "<sil>", "[NOISE]"}


class Sphinx:
    """pocketsphinx's English decoder, aligning a recording with its words."""

    def __init__(self):
        from pocketsphinx import Decoder

        self.decoder = Decoder(lm=None, loglevel="FATAL")

    def starts(self, samples: np.ndarray, rate: int, words: list[str], optional: bool):
        """Each word's start in seconds, None where it found none (the whole text where its
        forced alignment fails)."""
        said = [re.sub(r"[^a-z']", "", w.lower()) for w in words]
        if optional:
            rule = " ".join(f"[ {w} ]" for w in said)
            self.decoder.add_jsgf_string(
                "optional", f"#JSGF V1.0;\ngrammar g;\npublic <s> = {rule} ;"
            )
            self.decoder.activate_search("optional")
        else:
            self.decoder.set_align_text(" ".join(said))
        audio = np.clip(soxr.resample(samples, rate, RATE), -1, 1)
        self.decoder.start_utt()
        self.decoder.process_raw((audio * 32767).astype(np.int16).tobytes(), full_utt=True)
        self.decoder.end_utt()
        found: list[float | None] = [None] * len(said)
        if self.decoder.hyp() is None:  # no alignment of the whole text
            return found
        at = 0
        for segment in self.decoder.seg():
            word = re.sub(r"\(\d+\)$", "", segment.word)  # "the(2)": a second pronunciation
            if word in NOT_WORDS:
                continue
            while at < len(said) and said[at] != word:
                at += 1
            if at < len(said):
                found[at], at = segment.start_frame * FRAME_S, at + 1
        return found


def measure(seeds: int, optional_seeds: int) -> dict:
    sphinx, stats = Sphinx(), {}
    for name in ("espeak", "forced", "optional"):
        stats[name] = {**dict.fromkeys(COUNTS, 0), "took": 0.0, "errors": []}
    for text in TEXTS["en"]:
        words = words_of(text)
        for number, (x, rate, cut, truth) in enumerate(trials("en", text, seeds, VARIANT, PITCH)):
            espeak.engine().forget()  # a template of its own for each rendering
            names = ["espeak", "forced"] + (["optional"] if number < 3 * optional_seeds else [])
            for name in names[number % len(names) :] + names[: number % len(names)]:
                started = time.perf_counter()
                if name == "espeak":
                    starts = [w.start for w in align(x, rate, text, "en")]
                else:
                    starts = sphinx.starts(x, rate, words, name == "optional")
                stats[name]["took"] += time.perf_counter() - started
                tally(stats[name], stats[name]["errors"], starts, truth, cut)
    return stats


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--optional-seeds", type=int, default=2)
    args = parser.parse_args()
    line = []
    for name, s in measure(args.seeds, args.optional_seeds).items():
        ms = 1000 * np.array(s["errors"]) if s["errors"] else np.array([np.nan])
        print(
            f"{name:8}: found {s['found']}/{s['missing']}  spoken unplaced per 100: whole "
            f"{100 * s['false_whole'] / max(s['whole'], 1):.2f}, cut "
            f"{100 * s['false_cut'] / max(s['kept'], 1):.2f}  start error {np.mean(ms):.1f} / "
            f"p95 {np.percentile(ms, 95):.1f} ms  time {s['took']:.1f} s",
            flush=True,
        )
        line.append(f"found_{name}={s['found'] / max(s['missing'], 1):.3f}")
    print(" ".join([*line, f"cpu='{machine()}'"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
