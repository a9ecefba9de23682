#!/usr/bin/env python3
"""The presets on each matrix kernel, alternating in one process, the same weights.

    python bench/kernel_speed.py --artifacts FULL_ARTIFACTS [--precision int4] [--kernels int8,qgemm-row,qgemm]
        [--presets balanced,turbo] [--cases auto,prompt] [--reps 3] [--cores N] [--threads N]

Each kernel of ``omnivoice_rt.engine.kernels.KERNELS`` loads the same artifacts (the integer GEMM's
graphs made once and kept under ``$HF_HOME``); every rep runs each case with each preset on each
kernel in turn, so a shared machine's drift hits them alike. Prints the median real-time factor
[range], the LLM's seconds, and each kernel's speed against the first kernel's; the CPU's
features are on the machine line, since which kernel is fast depends on them.
``--cores N`` runs on N distinct cores (one logical CPU each, never two hyperthreads of one
core) with N threads: how "two cores" is measured on a larger machine.

Extras: none (the package's own dependencies).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.benchmark import (  # noqa: E402
    CASES,
    add_core_options,
    machine,
    run_onnx,
    session_threads,
    summary,
)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--artifacts", required=True)
    parser.add_argument("--precision", default="int4")
    parser.add_argument("--kernels", default="int8,qgemm-row,qgemm")
    parser.add_argument("--presets", default="balanced,turbo")
    parser.add_argument("--cases", default="auto,prompt", help="auto, clone, prompt")
    parser.add_argument("--reps", type=int, default=3)
    add_core_options(parser)
    args = parser.parse_args(argv)
    args.threads = session_threads(args)

    from omnivoice_build.equivalence import write_reference
    from omnivoice_rt import OmniVoiceONNX

    kernels = args.kernels.split(",")
    voices = {
        k: OmniVoiceONNX.load(args.artifacts, args.precision, matmul=k, threads=args.threads)
        for k in kernels
    }
    threads = args.threads or "one per core"
    print(f"machine: {machine()}; {args.precision}; threads: {threads}")
    reference = write_reference(
        os.path.join(tempfile.mkdtemp(), "reference.wav"), seconds=5.3, rate=24000, channels=1
    )
    prompts = {}
    for kernel, voice in voices.items():
        prompts[kernel] = voice.create_voice_prompt(reference, CASES["prompt"]["ref_text"])
    runs: dict = {}
    for rep in range(args.reps):
        for case in args.cases.split(","):
            for preset in args.presets.split(","):
                for kernel in kernels if rep % 2 == 0 else reversed(kernels):
                    ref = prompts[kernel] if CASES[case].get("saved") else reference
                    run = run_onnx(voices[kernel], CASES[case], ref, rep, preset)
                    runs.setdefault((case, preset, kernel), []).append(run)
                    print(f"  rep {rep} {case} {preset} {kernel}: rtf {run['rtf']:.2f}", flush=True)
    print(
        f"\n{'case':6s} {'preset':9s} {'kernel':10s} RTF median [range]  LLM s   speed vs {kernels[0]}"
    )
    for (case, preset, kernel), done in runs.items():
        rtf = [r["rtf"] for r in done]
        base = statistics.median(r["rtf"] for r in runs[case, preset, kernels[0]])
        llm = statistics.median(r["llm"] for r in done)
        print(
            f"{case:6s} {preset:9s} {kernel:10s} {summary(rtf)}  {llm:6.2f}  "
            f"{base / statistics.median(rtf):.2f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
