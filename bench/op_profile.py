#!/usr/bin/env python3
"""Where one generation's time goes, per graph and per operator type (ONNX Runtime's profiler).

    python bench/op_profile.py --artifacts FULL_ARTIFACTS [--precision int4] [--matmul qgemm-row]
        [--preset balanced] [--reference] [--cores N] [--threads N]

Loads the model (``--matmul`` as ``load(matmul=)``), reopens every graph's session with
ONNX Runtime's profiler on (the same file, settings and kernel), makes 5 s of speech once to warm
up and once measured, and prints each graph's operators by total time, with the seconds outside
ONNX Runtime (numpy, Python) from the generation's own timings. ``--reference`` clones from a
saved voice prompt instead of the auto voice.
``--cores N`` runs on N distinct cores (one logical CPU each, never two hyperthreads of one
core) with N threads: how "two cores" is measured on a larger machine.

Extras: none (the package's own dependencies).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.benchmark import (  # noqa: E402
    CASES,
    FIVE_SECONDS,
    add_core_options,
    machine,
    session_threads,
)


def profiled(graph, kernel: str, folder: str, threads: int | None) -> None:
    """Reopen ``graph``'s session with the profiler on, files under ``folder``."""
    import onnxruntime as ort

    from omnivoice_rt.engine.kernels import KERNELS
    from omnivoice_rt.engine.sessions import session_options

    options = session_options(threads, KERNELS[kernel].config)
    options.enable_profiling = True
    options.profile_file_prefix = os.path.join(folder, graph.role)
    graph.session = ort.InferenceSession(
        str(graph.path), options, providers=graph.session.get_providers()
    )


def operator_times(path: str) -> dict[str, float]:
    """Seconds per operator type in one profile file."""
    times: dict[str, float] = defaultdict(float)
    for event in json.loads(Path(path).read_text()):
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            times[event["args"]["op_name"]] += event["dur"] / 1e6
    return times


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--artifacts", required=True)
    parser.add_argument("--precision", default="int4")
    parser.add_argument("--matmul", default=None, help="the LLM's kernel (default: auto)")
    parser.add_argument("--preset", default="balanced")
    parser.add_argument("--reference", action="store_true", help="clone from a saved prompt")
    parser.add_argument("--top", type=int, default=8, help="operator types shown per graph")
    add_core_options(parser)
    args = parser.parse_args(argv)
    args.threads = session_threads(args)

    from omnivoice_build.equivalence import write_reference
    from omnivoice_rt import OmniVoiceONNX

    voice = OmniVoiceONNX.load(
        args.artifacts, args.precision, matmul=args.matmul, threads=args.threads
    )
    kernel = voice.matmul[0]
    options = {"duration": 5.0, "seed": 0, "preset": args.preset}
    if args.reference:
        wav = write_reference(
            os.path.join(tempfile.mkdtemp(), "reference.wav"), seconds=5.3, rate=24000, channels=1
        )
        options["voice_prompt"] = voice.create_voice_prompt(wav, CASES["prompt"]["ref_text"])
    folder = tempfile.mkdtemp(prefix="omnivoice-profile-")
    graphs = [*voice.graphs.values(), voice.codec.graphs["higgs_decoder"]]
    for graph in graphs:
        profiled(graph, kernel, folder, args.threads)
    voice.generate(FIVE_SECONDS, **options)  # warm up; its events are in the files too
    for graph in graphs:  # so the files restart with the measured run
        graph.session.end_profiling()
        profiled(graph, kernel, folder, args.threads)
    speech = voice.generate(FIVE_SECONDS, **options)
    timings = speech.metadata["timings"]
    print(f"machine: {machine()}; {args.precision}, the LLM on {kernel} ({voice.matmul[1]})")
    print(
        f"{args.preset}{' from a saved prompt' if args.reference else ''}: {speech.seconds:.2f} s "
        f"of speech in {timings['total']:.2f} s (RTF {speech.metadata['rtf']:.2f})"
    )
    inside = 0.0
    for graph in graphs:
        times = operator_times(graph.session.end_profiling())
        total = sum(times.values())
        inside += total
        shown = sorted(times.items(), key=lambda item: -item[1])[: args.top]
        print(f"\n{graph.role}: {total:.2f} s in its operators")
        for op, seconds in shown:
            print(f"  {op:36s} {seconds:7.3f} s  {100 * seconds / max(total, 1e-9):5.1f}%")
    print(
        f"\noutside ONNX Runtime's operators (numpy, Python, feeding and fetching): "
        f"{timings['total'] - inside:.2f} s of {timings['total']:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
