#!/usr/bin/env python3
"""How listeners hear a shared server: a real server process on loopback, driven with the
official ``openai`` client (``/v1/audio/speech``, ``pcm`` streamed), each turns policy in turn,
alternating, in one run.

    python bench/serve.py --artifacts ART [--policies step,step@4,request] [--clients 1,2,4,8]
                          [--rounds 1] [--preset balanced]

For each policy (``--turns``), a fresh server (``app.py`` as the Space starts it, ``--asr-model
none``, a library holding one saved voice) is started and warmed; ``step`` at the default
``--concurrency``, ``request`` at ``--request-concurrency`` (default 1: the server before turns,
one request at a time, first come first served). Then:

(a) head of line: the short text alone, its first audio; then a 10-sentence text, and 3 s into
    it the short text again: its first audio against alone (``hol_ratio``);
(b) ``--clients`` N at once, each asking a fixed mix in turn (short, medium and ten sentences;
    auto voice, a design, the saved voice) for about ``--seconds`` of audio: seconds of speech
    per wall second, first audio p50 and p95, the longest gap a real-time player would hear
    inside a stream, each request's RTF (wall time over its audio);
(c) the peak resident memory of the server with its children (the text worker), sampled;
(d) one client floods: it sends ``FLOOD`` medium texts at once, and 3 s later another client
    sends the short text: its first audio against alone (``flood_ratio``).

Every client is a client of its own to the server (``X-Forwarded-For`` from loopback, which the
server believes: an address of 198.18.0.0/15, the benchmarking range), as people behind one
proxy would be. Prints a table, then one machine line (``hol_ratio_{policy}=``,
``flood_ratio_{policy}=``, ``throughput_c{N}_{policy}=``, ``ttfa_p95_c{N}_{policy}=``,
``gap_max_c{N}_{policy}=``, ``peak_mb_{policy}=``) with the CPU's name and flags. Compare
ratios within one run only (docs/performance.md).

Extras: server, dev (the tests' server starter, openai, psutil).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import openai
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from omnivoice_rt.engine.qgemm import cpu_flags  # noqa: E402
from tests.conftest import running_app, save_narrator  # noqa: E402

RATE, WIDTH = 24_000, 2  # the pcm the door streams: 24 kHz, 16-bit mono
SHORT = "The train leaves in ten minutes. Please hurry."
MEDIUM = (
    "The library opens at nine and closes late on Thursdays. Please remember to water the plants "
    "while I am away. A quiet morning is the best time to read a long book."
)
LONG = " ".join(
    f"{s} This is sentence {n + 1} of a longer reading."
    for n, s in enumerate(
        (
            "We walked along the river until the sun went down.",
            "Her new song was played on the radio for the first time.",
            "The museum has a room full of very old maps.",
            "Bring a warm coat, because the evenings are getting cold.",
            "The train to the coast leaves from the second platform.",
        )
    )
)
FLOOD = 4  # the texts one client sends at once in (d)
MIX = [  # (text, voice, instruct) asked in turn by each client
    (SHORT, "auto", None),
    (MEDIUM, "auto", "female, low pitch"),
    (LONG, "narrator", None),
]


def listen(client: openai.OpenAI, text: str, voice: str, instruct, preset: str) -> dict:
    """One streamed request as a real-time player hears it: first audio, the longest stall after
    it (the player runs dry until more bytes come), audio seconds and wall seconds."""
    body = {"preset": preset, **({"instruct": instruct} if instruct else {})}
    started = time.perf_counter()
    first = None
    played_until = 0.0  # wall time (since start) when the audio received so far runs out
    gap, audio = 0.0, 0.0
    with client.audio.speech.with_streaming_response.create(
        model="omnivoice", voice=voice, input=text, response_format="pcm", extra_body=body
    ) as response:
        for chunk in response.iter_bytes(4096):
            now = time.perf_counter() - started
            if first is None:
                first, played_until = now, now
            elif now > played_until:
                gap = max(gap, now - played_until)
                played_until = now
            seconds = len(chunk) / (RATE * WIDTH)
            audio += seconds
            played_until += seconds
    wall = time.perf_counter() - started
    return {"ttfa": first or wall, "gap": gap, "audio": audio, "wall": wall}


class PeakMemory:
    """The server's resident memory with its children's, sampled every 0.2 s."""

    def __init__(self, url: str):
        port = url.rsplit(":", 1)[1]
        self.process = next(
            p
            for p in psutil.process_iter(["cmdline"])
            if p.info["cmdline"] and "--port" in p.info["cmdline"] and port in p.info["cmdline"]
        )
        self.peak, self.done = 0, threading.Event()
        self.thread = threading.Thread(target=self.sample, daemon=True)
        self.thread.start()

    def sample(self) -> None:
        while not self.done.wait(0.2):
            try:
                family = [self.process, *self.process.children(recursive=True)]
                rss = sum(p.memory_info().rss for p in family if p.is_running())
            except psutil.Error:
                continue
            self.peak = max(self.peak, rss)

    def stop(self) -> int:
        self.done.set()
        self.thread.join()
        return self.peak


def head_of_line(client, preset: str, before: str = LONG, times: int = 1) -> dict:
    """(a): the short text's first audio alone, and 3 s into the long text; (d) with ``times``
    of ``before`` sent at once by one client."""
    alone = listen(client(0), SHORT, "auto", None, preset)["ttfa"]
    with concurrent.futures.ThreadPoolExecutor(times) as pool:
        ahead = [pool.submit(listen, client(1), before, "auto", None, preset) for _ in range(times)]
        time.sleep(3.0)
        behind = listen(client(0), SHORT, "auto", None, preset)["ttfa"]
        for each in ahead:
            each.result()
    return {"alone": alone, "behind": behind, "ratio": behind / alone}


def crowd(client, clients: int, seconds: float, preset: str) -> dict:
    """(b): ``clients`` at once, each asking the mix in turn until it has had ``seconds`` of
    audio."""

    def one(n: int) -> list[dict]:
        heard, total, k = [], 0.0, n
        while total < seconds:
            heard.append(listen(client(n), *MIX[k % len(MIX)], preset))
            total += heard[-1]["audio"]
            k += 1
        return heard

    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        results = [r for heard in pool.map(one, range(clients)) for r in heard]
    wall = time.perf_counter() - started
    ttfa = sorted(r["ttfa"] for r in results)
    return {
        "throughput": sum(r["audio"] for r in results) / wall,
        "ttfa_p50": statistics.median(ttfa),
        "ttfa_p95": ttfa[min(len(ttfa) - 1, round(0.95 * (len(ttfa) - 1)))],
        "gap_max": max(r["gap"] for r in results),
        "rtf_p50": statistics.median(r["wall"] / max(r["audio"], 1e-9) for r in results),
        "requests": len(results),
    }


def run_policy(policy: str, args, library: Path, log_dir: Path) -> dict:
    """One server: ``policy`` is a ``--turns`` value, then optionally ``@N`` for ``--per-client
    N`` (``step@4``: turns without one client's share) and ``:S`` for ``--first-piece S``
    (``step:0``: turns with upstream's pieces). ``request`` is the server before turns: one
    request at a time (``--request-concurrency``) with upstream's pieces."""
    policy, _, first_piece = policy.partition(":")
    turns, _, per_client = policy.partition("@")
    serve = ["--artifacts", str(args.artifacts), "--asr-model", "none", "--turns", turns]
    if turns == "request":
        serve += ["--concurrency", str(args.request_concurrency)]
        first_piece = first_piece or "0"
    if per_client:
        serve += ["--per-client", per_client]
    if first_piece:
        serve += ["--first-piece", first_piece]
    serve += ["--voices", str(library), *args.server_args]
    env = {"HF_HUB_OFFLINE": "1", "OMNIVOICE_MATMUL": args.matmul}  # not the tests' fp32
    with running_app(serve, log_dir / f"{policy}.log", **env) as url:
        memory = PeakMemory(url)
        clients = {}

        def client(n: int) -> openai.OpenAI:  # client n, as the server tells clients apart
            if n not in clients:
                clients[n] = openai.OpenAI(
                    base_url=f"{url}/v1",
                    api_key="unused",
                    max_retries=0,
                    timeout=900,
                    default_headers={"X-Forwarded-For": f"198.18.{n // 250}.{n % 250 + 1}"},
                )
            return clients[n]

        listen(client(0), SHORT, "narrator", None, args.preset)  # warm: loads, first calls
        with urllib.request.urlopen(f"{url}/health") as health:
            kernels = json.load(health)["kernels"]
        print(f"{policy}: kernels {kernels}", flush=True)
        figures = {"hol": head_of_line(client, args.preset)}
        figures["flood"] = head_of_line(client, args.preset, MEDIUM, FLOOD)
        for n in args.clients:
            figures[f"c{n}"] = crowd(client, n, args.seconds, args.preset)
        figures["peak_mb"] = memory.stop() / 2**20
    return figures


def machine() -> str:
    name = next(
        (line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if "model name" in line),
        "unknown CPU",
    )
    flags = cpu_flags()
    features = [f for f in ("amx_int8", "avx512_vnni", "avx_vnni", "avx2") if f in flags]
    return f"{name}, {psutil.cpu_count()} CPUs, {', '.join(features) or 'no AVX2'}"


def report(results: dict[str, list[dict]], args) -> None:
    print(f"machine: {machine()}; preset {args.preset}; kernel {args.matmul}; rounds {args.rounds}")
    line = []
    for policy, rounds in results.items():
        hol = statistics.median(r["hol"]["ratio"] for r in rounds)
        alone = statistics.median(r["hol"]["alone"] for r in rounds)
        behind = statistics.median(r["hol"]["behind"] for r in rounds)
        peak = max(r["peak_mb"] for r in rounds)
        flood = statistics.median(r["flood"]["ratio"] for r in rounds)
        flooded = statistics.median(r["flood"]["behind"] for r in rounds)
        print(
            f"{policy:8} (a) short text alone {alone:.2f} s, 3 s into a long one {behind:.2f} s: "
            f"{hol:.2f}x; (d) 3 s after another client's {FLOOD} texts {flooded:.2f} s: "
            f"{flood:.2f}x; (c) peak memory {peak:.0f} MB"
        )
        line += [
            f"hol_ratio_{policy}={hol:.2f}",
            f"flood_ratio_{policy}={flood:.2f}",
            f"peak_mb_{policy}={peak:.0f}",
        ]
        for n in args.clients:
            c = {k: statistics.median(r[f"c{n}"][k] for r in rounds) for k in rounds[0][f"c{n}"]}
            print(
                f"{policy:8} (b) {n} clients: {c['throughput']:.2f} s of speech a second, first "
                f"audio p50 {c['ttfa_p50']:.2f} s p95 {c['ttfa_p95']:.2f} s, longest gap "
                f"{c['gap_max']:.2f} s, RTF p50 {c['rtf_p50']:.2f} ({c['requests']:.0f} requests)"
            )
            line += [
                f"throughput_c{n}_{policy}={c['throughput']:.3f}",
                f"ttfa_p95_c{n}_{policy}={c['ttfa_p95']:.2f}",
                f"gap_max_c{n}_{policy}={c['gap_max']:.2f}",
            ]
    print(" ".join(line) + f" cpu={machine()!r}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--artifacts", required=True, type=Path)
    parser.add_argument("--policies", default="step,request")
    parser.add_argument("--clients", default="1,2,4,8", help="comma-separated client counts")
    parser.add_argument("--seconds", type=float, default=20.0, help="audio each client asks for")
    parser.add_argument("--rounds", type=int, default=1, help="each policy in turn, this often")
    parser.add_argument("--preset", default="balanced")
    parser.add_argument("--matmul", default="auto", help="the LLM's kernel (OMNIVOICE_MATMUL)")
    parser.add_argument(
        "--request-concurrency", type=int, default=1, help="--concurrency of --turns request"
    )
    parser.add_argument(
        "--server-args", nargs=argparse.REMAINDER, default=[], help="more flags for the server"
    )
    args = parser.parse_args()
    args.artifacts = args.artifacts.resolve()
    args.clients = [int(n) for n in args.clients.split(",") if n]
    policies = args.policies.split(",")
    with tempfile.TemporaryDirectory(prefix="omnivoice-serve-") as tmp:
        library = Path(tmp) / "voices"
        library.mkdir()
        save_narrator(library, args.artifacts)
        results: dict[str, list[dict]] = {policy: [] for policy in policies}
        for _ in range(args.rounds):
            for policy in policies:  # alternating, so that a drift of the machine hits both
                results[policy].append(run_policy(policy, args, library, Path(tmp)))
                print(f"{policy}: {results[policy][-1]}", flush=True)
    report(results, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
