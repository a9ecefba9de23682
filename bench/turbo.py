"""``turbo`` against ``balanced``, alternating in one process: auto voice, cloning from a
recording (encoded each run, as ``bench/benchmark.py`` does) and from a saved voice prompt (as
the server does after a reference's first use). No PyTorch: a few minutes where the full
benchmark takes most of an hour.

    python3 bench/turbo.py --artifacts FULL_INT4 [--precision int4] [--reps 3] [--variant NAME=JSON]

``--variant`` adds an engine: turbo with settings on top, e.g.
``--variant 'turbo-prompt={"frame_refresh_prompt": true}'``. Prints each engine's median
real-time factor and its speedup over ``balanced`` per case, and the machine.

Extras: none (the package's own dependencies).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.benchmark import CASES, FIVE_SECONDS, machine  # noqa: E402

REFERENCE_TEXT = CASES["clone"]["ref_text"]  # the benchmark's reference, said the same


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--artifacts", required=True)
    parser.add_argument("--precision", default="int4")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--variant", action="append", default=[], help="NAME=JSON settings")
    args = parser.parse_args(argv)

    from omnivoice_build.equivalence import write_reference
    from omnivoice_rt import OmniVoiceONNX

    voice = OmniVoiceONNX.load(args.artifacts, args.precision)
    print(f"machine: {machine()}; {args.precision}, MatMulNBits in {voice.matmul[0]}")
    reference = write_reference(
        os.path.join(tempfile.mkdtemp(), "reference.wav"), seconds=5.3, rate=24000, channels=1
    )
    prompt = voice.create_voice_prompt(reference, REFERENCE_TEXT)
    cases = {
        "auto": {},
        "clone": {"ref_audio": reference, "ref_text": REFERENCE_TEXT},
        "prompt": {"voice_prompt": prompt},
    }
    engines = {"balanced": {"preset": "balanced"}, "turbo": {"preset": "turbo"}}
    for variant in args.variant:
        name, _, settings = variant.partition("=")
        engines[name] = {"preset": "turbo", **json.loads(settings)}
    rtf: dict = {}
    for rep in range(args.reps):
        for case, voice_options in cases.items():
            for engine, settings in engines.items():  # alternate: drift hits every engine alike
                started = time.perf_counter()
                speech = voice.generate(
                    FIVE_SECONDS, duration=5.0, seed=rep, **voice_options, **settings
                )
                took = (time.perf_counter() - started) / speech.seconds
                rtf.setdefault(case, {}).setdefault(engine, []).append(took)
                print(f"rep {rep} {case:6s} {engine:14s} RTF {took:.2f}", flush=True)
    for case, engines_rtf in rtf.items():
        base = statistics.median(engines_rtf["balanced"])
        line = ", ".join(
            f"{engine} {statistics.median(v):.2f} ({base / statistics.median(v):.2f}x)"
            for engine, v in engines_rtf.items()
        )
        print(f"{case}: {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
