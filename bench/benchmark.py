#!/usr/bin/env python3
"""Benchmark: our runtime against stock PyTorch ``OmniVoice.generate``, in one run, on one machine.

    python bench/benchmark.py --checkpoint FULL_CHECKPOINT --artifacts FULL_ARTIFACTS [--reps 3] [--cases auto,clone,long]
        [--presets best,balanced,turbo] [--published REPLICA] [--threads 1]

Make the inputs with ``python -m omnivoice_build.fixtures --size full --output ckpt`` and
``python build_artifacts.py --model ckpt --output art --device cpu`` (and ``cpu_fp16``,
``cpu_int8``, ``--include-higgs``). Each case runs PyTorch and every precision in turn,
alternating, ``--reps`` times; the table shows the median and the range. All engines speak the
same text for the same number of frames. PyTorch runs upstream's 32 steps and 16 (``pytorch@16``);
each precision runs every preset of ``--presets`` (``int4`` is ``best``, ``int4/balanced``...), and
``int4@16`` is the exact path at 16 steps, which ``balanced`` is compared with: its speedup, and the
share of its codes that equal the exact path's (a sanity figure: random weights say nothing about
quality). Speedups are against PyTorch at 32 steps (what a user of upstream runs) and at the same
number of steps.

Cases: ``auto`` (5 s of speech), ``clone`` (a 5 s reference, encoded each run, 5 s of speech),
``prompt`` (the same reference encoded once before the runs, as a saved voice prompt: what the
server does after a reference's first use; upstream's ``create_voice_clone_prompt``), and with ``--long``
a text of about 40 s (chunked), and then the time to its first audio when streamed (int4,
``balanced``) against the time its first piece takes alone. Columns: real-time factor, speedup over PyTorch, seconds per step,
where the time goes (encoder, LLM, heads, codec decode, the rest: Python and numpy). Then the
load time and the peak resident memory of a fresh process that loads int4 and speaks, and a
roofline line: the LLM's arithmetic per second against the best MatMulNBits throughput measured
here with the same kernel. The last line is machine-readable.

Extras: build (PyTorch and upstream omnivoice, for its baseline).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

FIVE_SECONDS = "This is a benchmark sentence that lasts about five seconds when it is spoken aloud."
LONG_TEXT = " ".join(
    f"Paragraph {i} of the long benchmark keeps talking about nothing in particular, so that it lasts."
    for i in range(8)
)
CASES = {
    "auto": {"text": FIVE_SECONDS, "duration": 5.0},
    "clone": {
        "text": FIVE_SECONDS,
        "duration": 5.0,
        "ref_text": "This is the voice I would like you to copy.",
    },
    "long": {"text": LONG_TEXT},
}
CASES["prompt"] = {**CASES["clone"], "saved": True}  # the clone case's reference, encoded once


def machine() -> str:
    with open("/proc/cpuinfo") as info:
        cpu = next(
            (line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), "?"
        )
    cores, cpus = len(physical_cores()), len(os.sched_getaffinity(0))
    where = f"{cores} core{'s' * (cores > 1)}"
    where = where if cores == cpus else f"{cpus} CPUs on {where}"
    if cpus != os.cpu_count():
        where += f" of the machine's {os.cpu_count()} CPUs"
    return f"{cpu}, {where} ({cpu_features()}), {platform.python_version()}"


def physical_cores() -> list[list[int]]:
    """The cores this process may run on, each as its logical CPUs (a core's SMT siblings share
    its integer and matrix units); one CPU a core where Linux's topology cannot be read."""
    cores: dict[tuple, list[int]] = {}
    for cpu in sorted(os.sched_getaffinity(0)):
        topology = f"/sys/devices/system/cpu/cpu{cpu}/topology/"
        try:
            key = tuple(
                open(topology + name).read().strip() for name in ("physical_package_id", "core_id")
            )
        except OSError:
            key = (str(cpu),)
        cores.setdefault(key, []).append(cpu)
    return list(cores.values())


def add_core_options(parser) -> None:
    """``--cores`` and ``--threads``, for a bench that times one process's sessions."""
    parser.add_argument(
        "--cores",
        type=int,
        help="run on this many distinct cores, one CPU each, and as many threads (default: all)",
    )
    parser.add_argument(
        "--threads", type=int, help="each session's threads (default: one per core); say which"
    )


def session_threads(args) -> int | None:
    """Pin the process to ``args.cores`` (:func:`pin_cores`) where given, and return each
    session's threads: ``--threads``, else ``--cores``, else None (one per core)."""
    if args.cores:
        pin_cores(args.cores)
    return args.threads or args.cores


def pin_cores(count: int) -> None:
    """Run this process (and the threads it starts from now on) on ``count`` distinct cores, one
    logical CPU of each: two CPUs of a large machine picked by hand can be one core's two
    hyperthreads, which halves the integer GEMM."""
    cores = physical_cores()
    if not 0 < count <= len(cores):
        raise SystemExit(f"--cores {count}: this process may run on {len(cores)} cores")
    os.sched_setaffinity(0, [core[0] for core in cores[:count]])


# The CPU features that decide which matrix kernel is fast (omnivoice_rt.engine.matmul), as /proc/cpuinfo
# names them, and as the machine line shows them.
FEATURES = {
    "amx_int8": "AMX",
    "avx512_vnni": "AVX-512 VNNI",
    "avx_vnni": "AVX-VNNI",
    "avx512f": "AVX-512",
    "avx2": "AVX2",
}


def cpu_features() -> str:
    from omnivoice_rt.engine.qgemm import cpu_flags

    flags = cpu_flags()
    return ", ".join(name for flag, name in FEATURES.items() if flag in flags) or "no AVX2"


# ----------------------------------------------------------------------------- engines


def voice_kwargs(case: dict, reference, prompt_key: str) -> dict:
    """``case`` as generate's keyword arguments: a recording's path with its text, or for a
    saved case the prompt made from it (``reference``) under ``prompt_key``."""
    kwargs = {k: v for k, v in case.items() if k != "saved"}
    if case.get("saved"):
        del kwargs["ref_text"]
        kwargs[prompt_key] = reference
    elif "ref_text" in kwargs:
        kwargs["ref_audio"] = reference
    return kwargs


def run_pytorch(model, case: dict, reference, num_step: int = 32) -> dict:
    import torch

    kwargs = dict(voice_kwargs(case, reference, "voice_clone_prompt"), num_step=num_step)
    started = time.perf_counter()
    with torch.inference_mode():
        audio = model.generate(**kwargs)[0]
    total = time.perf_counter() - started
    seconds = audio.shape[-1] / 24000
    return {"total": total, "seconds": seconds, "rtf": total / seconds}


def run_onnx(voice, case: dict, reference, seed: int, num_step) -> dict:
    kwargs = voice_kwargs(case, reference, "voice_prompt")
    speech = voice.generate(seed=seed, num_step=num_step, **kwargs)
    t = speech.metadata["timings"]
    parts = {
        "encoder": t.get("model.audio_embeddings_encoder", 0.0),
        "llm": t.get("model.llm_decoder", 0.0),
        "heads": t.get("model.audio_heads_decoder", 0.0),
        "decode": t["decode"],
    }
    parts["python"] = t["total"] - sum(parts.values())
    return {
        "total": t["total"],
        "seconds": speech.seconds,
        "rtf": speech.metadata["rtf"],
        "codes": speech.codes,
        "steps": speech.metadata["steps"],
        "frames": speech.metadata["frames"],
        **parts,
    }


def first_audio(voice, preset: str) -> tuple[float, float]:
    """Seconds until ``stream`` hands over the long text's first piece, and seconds to make that
    piece's text alone with ``generate`` (what the first audio cannot beat)."""
    started = time.perf_counter()
    stream = voice.stream(LONG_TEXT, seed=0, num_step=preset)
    first = next(stream)
    streamed = time.perf_counter() - started
    stream.close()
    alone = voice.generate(first.metadata["text"], seed=0, num_step=preset).metadata["timings"][
        "total"
    ]
    return streamed, alone


# ----------------------------------------------------------------------------- roofline


def matmul_throughput(bits: int, block_size: int) -> float:
    """GOP/s of one MatMulNBits (accuracy level 4), M=512 x K=1024 x N=3072, as the LLM uses it."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
    from onnxruntime.quantization.matmul_nbits_quantizer import (
        DefaultWeightOnlyQuantConfig,
        MatMulNBitsQuantizer,
    )

    m, k, n = 512, 1024, 3072
    weight = (np.random.default_rng(0).standard_normal((k, n)) / 32).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["A", "W"], ["Y"])],
        "g",
        [helper.make_tensor_value_info("A", TensorProto.FLOAT, [None, k])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, n])],
        [numpy_helper.from_array(weight, "W")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    config = DefaultWeightOnlyQuantConfig(
        block_size=block_size, is_symmetric=True, accuracy_level=4, bits=bits
    )
    quantizer = MatMulNBitsQuantizer(
        onnx.load_from_string(model.SerializeToString()), algo_config=config
    )
    quantizer.process()
    session = ort.InferenceSession(
        quantizer.model.model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    a = np.random.default_rng(1).standard_normal((m, k)).astype(np.float32)
    session.run(None, {"A": a})
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        session.run(None, {"A": a})
        best = min(best, time.perf_counter() - started)
    return 2 * m * k * n / best / 1e9


def llm_gop_per_token(manifest) -> float:
    """Multiply-adds of the LLM's matrices per token (attention scores are a few percent more)."""
    c = manifest.model
    hidden, head_dim = c.hidden_size, c.head_dim
    q_dim, kv_dim = c.num_attention_heads * head_dim, c.num_key_value_heads * head_dim
    per_layer = hidden * (q_dim + 2 * kv_dim) + q_dim * hidden + 3 * hidden * c.intermediate_size
    return 2 * per_layer * c.num_hidden_layers / 1e9


# ----------------------------------------------------------------------------- memory and load time

# VmHWM, not getrusage: ru_maxrss survives fork and exec, so a child would report its parent's peak.
PROBE = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
started = time.perf_counter()
from omnivoice_rt import OmniVoiceONNX
voice = OmniVoiceONNX.load(sys.argv[2], sys.argv[3])
loaded = time.perf_counter() - started
voice.generate(sys.argv[4], duration=5.0, seed=0)
peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM"))
print(json.dumps({"load_s": loaded, "peak_rss_mb": peak / 1024}))
"""


def probe(artifacts: str, precision: str) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", PROBE, str(ROOT), artifacts, precision, FIVE_SECONDS],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------- main


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):7.2f} [{min(values):.2f}-{max(values):.2f}]"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--checkpoint", required=True, help="the full-size OmniVoice checkpoint (PyTorch)"
    )
    parser.add_argument("--artifacts", required=True, help="artifacts built from it")
    parser.add_argument(
        "--precisions", default="int4,fp16,int8", help="comma-separated, those built"
    )
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--cases", default="auto,clone", help="auto, clone, prompt, long")
    parser.add_argument(
        "--presets",
        default="best,balanced,turbo",
        help="comma-separated presets of omnivoice_rt.request.PRESETS",
    )
    parser.add_argument(
        "--published",
        help="a replica of the published repo built from the same checkpoint (python -m "
        "omnivoice_build.published --model FULL --output DIR): its int4/ and root (fp16 heads) "
        "profiles run balanced and turbo, repaired as the Hub's would be",
    )
    parser.add_argument(
        "--threads",
        default="",
        help="comma-separated thread counts besides the default (e.g. 1): int4 balanced and "
        "turbo again with that many ONNX Runtime threads",
    )
    parser.add_argument(
        "--first-audio",
        action="store_true",
        help="time the long text's first streamed audio "
        "(int4, balanced), also without the long case",
    )
    args = parser.parse_args(argv)

    import torch
    from omnivoice.models.omnivoice import OmniVoice

    from omnivoice_build.equivalence import write_reference
    from omnivoice_rt import OmniVoiceONNX
    from omnivoice_rt.artifacts.manifest import load_manifest
    from omnivoice_rt.engine.matmul import fallback as fallback_matmul

    print(f"machine: {machine()}; torch {torch.__version__} threads {torch.get_num_threads()}")
    manifest = load_manifest(args.artifacts)
    precisions = [p for p in args.precisions.split(",") if p in manifest.profiles]
    pytorch = OmniVoice.from_pretrained(args.checkpoint).eval()
    voices = {p: OmniVoiceONNX.load(args.artifacts, p) for p in precisions}
    fewer = [p for p in args.presets.split(",") if p != "best"]  # the extra engines skip best
    extra: dict = {}  # engine name -> (voice key, preset)
    if args.published:
        for precision in ("int4", "fp16"):  # the published int4/ and root profiles
            voices[f"published {precision}"] = OmniVoiceONNX.load(args.published, precision)
            extra.update({f"pub-{precision}/{p}": (f"published {precision}", p) for p in fewer})
    for threads in [int(t) for t in args.threads.split(",") if t]:
        voices[f"int4 {threads}t"] = OmniVoiceONNX.load(args.artifacts, "int4", threads=threads)
        extra.update({f"int4/{p} {threads}t": (f"int4 {threads}t", p) for p in fewer})
    # balanced on MatMulNBits (the faster of its modes here) and on the integer GEMM, whichever
    # of the two int4 (the kernel auto chose) is not already: speedup_qgemm_balanced
    kernels, nbits = {}, ""
    if "int4" in voices:
        chosen = voices["int4"].matmul[0]
        llm = voices["int4"].graphs["llm_decoder"].path
        nbits = chosen if chosen in ("fp32", "int8") else fallback_matmul(llm, None)
        for kernel in (nbits, "qgemm-row"):
            if kernel != chosen:
                voices[f"int4 {kernel}"] = OmniVoiceONNX.load(args.artifacts, "int4", matmul=kernel)
                extra[f"int4 {kernel}/balanced"] = (f"int4 {kernel}", "balanced")
            kernels[kernel] = "int4/balanced" if kernel == chosen else f"int4 {kernel}/balanced"
    reference = write_reference(
        os.path.join(tempfile.mkdtemp(), "reference.wav"), seconds=5.3, rate=24000, channels=1
    )
    # engine name -> (precision or "pytorch", num_step or preset); "int4" is the best preset, as before.
    engines = {"pytorch": ("pytorch", 32), "pytorch@16": ("pytorch", 16)}
    for precision in precisions:
        for preset in args.presets.split(","):
            engines[precision if preset == "best" else f"{precision}/{preset}"] = (
                precision,
                preset,
            )
        if "balanced" in args.presets.split(","):
            engines[f"{precision}@16"] = (precision, 16)
    engines.update(extra)
    for name, voice in voices.items():
        print(f"{name}: the LLM multiplies with {voice.matmul[0]} ({voice.matmul[1]})")
    saved: dict = {}  # runner -> its voice prompt of the reference, for the prompt case

    def prompt_of(runner: str):
        if runner not in saved:
            ref_text = CASES["prompt"]["ref_text"]
            saved[runner] = (
                pytorch.create_voice_clone_prompt(reference, ref_text)
                if runner == "pytorch"
                else voices[runner].create_voice_prompt(reference, ref_text)
            )
        return saved[runner]

    results: dict = {}
    for case_name in args.cases.split(","):
        case = CASES[case_name]
        for rep in range(args.reps):
            for engine, (
                runner,
                steps,
            ) in engines.items():  # alternate, so drift hits every engine alike
                ref = prompt_of(runner) if case.get("saved") else reference
                if runner == "pytorch":
                    run = run_pytorch(pytorch, case, ref, steps)
                else:
                    run = run_onnx(voices[runner], case, ref, rep, steps)
                results.setdefault(case_name, {}).setdefault(engine, []).append(run)
                print(
                    f"  {case_name} rep {rep} {engine}: {run['seconds']:.2f} s audio, rtf {run['rtf']:.2f}",
                    flush=True,
                )

    print(
        "\ncase   engine                RTF median [range]  vs pt@32  vs pt@same  kernel     s/step  encoder    LLM  heads decode python"
    )
    speedups: dict = {}
    for case_name, by_engine in results.items():
        base = {
            steps: statistics.median(r["rtf"] for r in by_engine[name])
            for name, (runner, steps) in engines.items()
            if runner == "pytorch"
        }
        for engine, runs in by_engine.items():
            rtf = [r["rtf"] for r in runs]
            speed = base[32] / statistics.median(rtf)
            speedups[(case_name, engine)] = speed
            steps = runs[0].get("steps", engines[engine][1]) // max(
                1, len(runs[0].get("codes", [0]))
            )
            same = f"{base[steps] / statistics.median(rtf):10.2f}" if steps in base else " " * 10
            if engines[engine][0] == "pytorch":
                print(f"{case_name:6s} {engine:20s} {summary(rtf)}  {speed:7.2f}  {same}")
                continue
            kernel = voices[engines[engine][0]].matmul[0]
            per_step = statistics.median(r["total"] / r["steps"] for r in runs)
            split = " ".join(
                f"{statistics.median(r[k] for r in runs):6.2f}"
                for k in ("encoder", "llm", "heads", "decode", "python")
            )
            print(
                f"{case_name:6s} {engine:20s} {summary(rtf)}  {speed:7.2f}  {same}  {kernel:9s}  {per_step:6.3f}  {split}"
            )
        for precision in precisions:  # how far balanced is from the exact path at its 16 steps
            exact, cached = by_engine.get(f"{precision}@16"), by_engine.get(f"{precision}/balanced")
            if exact and cached:
                agree = statistics.median(
                    float(
                        np.mean(
                            [(a == b).mean() for a, b in zip(x["codes"], y["codes"], strict=True)]
                        )
                    )
                    for x, y in zip(exact, cached, strict=True)
                )
                print(
                    f"{case_name:6s} {precision}/balanced: {agree:.2f} of its codes equal the exact path's at 16 steps"
                )

    # the Hub's default, else what was built
    probed = "int4" if "int4" in precisions else precisions[0]
    memory = probe(args.artifacts, probed)
    print(
        f"\n{probed} in a fresh process: load {memory['load_s']:.2f} s, peak resident memory {memory['peak_rss_mb']:.0f} MB"
    )
    rtf_auto = 0.0
    # one chunk, so the token count below is exact
    if "auto" in results and "int4" in results["auto"]:
        block = manifest.profiles["int4"].llm_block_size or 32
        best = matmul_throughput(4, block)
        runs = results["auto"]["int4"]
        rtf_auto = statistics.median(r["rtf"] for r in runs)
        # cond (prompt + target) and uncond rows
        tokens = statistics.median(r["frames"] for r in runs) * 2 + 30
        gop_step = llm_gop_per_token(manifest) * tokens
        achieved = gop_step * statistics.median(r["steps"] / r["llm"] for r in runs)
        print(
            f"roofline: the LLM does {gop_step:.0f} GOP per step; it ran at {achieved:.0f} GOP/s on "
            f"{voices['int4'].matmul[0]}, the best int4 "
            f"MatMulNBits here (block {block}, accuracy level 4) is {best:.0f} GOP/s "
            f"({100 * achieved / best:.0f}%)"
        )
    first_s = 0.0
    if (
        "long" in results or args.first_audio
    ) and "int4" in voices:  # the long text streamed: its first audio
        runs = [first_audio(voices["int4"], "balanced") for _ in range(args.reps)]
        first_s, alone = (
            statistics.median(r[0] for r in runs),
            statistics.median(r[1] for r in runs),
        )
        print(
            f"long, int4/balanced, streamed: first audio after {first_s:.2f} s; its first piece alone takes "
            f"{alone:.2f} s ({first_s / alone:.2f}x)"
        )

    def median_rtf(case: str, engine: str) -> float:
        runs = results.get(case, {}).get(engine)
        return statistics.median(r["rtf"] for r in runs) if runs else 0.0

    rtf_balanced = median_rtf("auto", "int4/balanced")
    on_nbits, on_qgemm = (median_rtf("auto", kernels.get(k, "")) for k in (nbits, "qgemm-row"))
    qgemm_speedup = on_nbits / on_qgemm if on_nbits and on_qgemm else 0.0
    if qgemm_speedup:
        print(
            f"auto, balanced: {on_nbits:.2f} on MatMulNBits ({nbits}), {on_qgemm:.2f} on qgemm-row: "
            f"{qgemm_speedup:.2f}x; int4 runs {voices['int4'].matmul[0]} ({voices['int4'].matmul[1]})"
        )
    # turbo against balanced: the same profile, the same run
    turbo = {
        case: median_rtf(case, "int4/balanced") / median_rtf(case, "int4/turbo")
        if median_rtf(case, "int4/turbo")
        else 0.0
        for case in ("auto", "clone", "prompt")
    }
    print(
        f"speedup_auto={speedups.get(('auto', 'int4'), 0):.2f} speedup_clone={speedups.get(('clone', 'int4'), 0):.2f} "
        f"rtf_int4_auto={rtf_auto:.2f} peak_rss_mb={memory['peak_rss_mb']:.0f} load_s={memory['load_s']:.2f} "
        f"speedup_balanced_auto={speedups.get(('auto', 'int4/balanced'), 0):.2f} "
        f"speedup_balanced_clone={speedups.get(('clone', 'int4/balanced'), 0):.2f} "
        f"rtf_balanced_int4_auto={rtf_balanced:.2f} first_audio_s={first_s:.2f} "
        f"speedup_turbo_auto={turbo['auto']:.2f} speedup_turbo_clone={turbo['clone']:.2f} "
        f"speedup_turbo_prompt={turbo['prompt']:.2f} "
        f"rtf_turbo_auto={median_rtf('auto', 'int4/turbo'):.2f} "
        f"speedup_qgemm_balanced={qgemm_speedup:.2f} rtf_balanced_auto={rtf_balanced:.2f}"
    )
    for engine, (_, preset) in extra.items():  # each against int4 with the same preset, in this run
        for case in ("auto", "clone", "prompt"):
            if median_rtf(case, engine):
                print(
                    f"{engine} {case}: rtf {median_rtf(case, engine):.2f}, "
                    f"{median_rtf(case, 'int4/' + preset) / median_rtf(case, engine):.2f}x int4/{preset}'s speed"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
