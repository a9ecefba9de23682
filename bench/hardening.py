"""Measure how one stranger's requests weigh on a server: how long every door freezes while a long
text's numbers are read as words, the memory it keeps after them, and what idle connections do.

    python bench/hardening.py --artifacts ARTIFACTS [--app OTHER_CHECKOUT/app.py] [--burst 10]

Starts ``app.py`` as ``main`` does (``--wyoming`` on, under ``prlimit --nofile=1024``) on a free
port of 127.0.0.1, then, one after the other:

1. freeze: one 10,000-character text of numbers to ``/v1/audio/speech`` while ``/health`` is
   asked every 0.1 s: the slowest ``/health`` answer, and how long the request took;
2. memory: the server's resident memory (with its children's) at the start, after that request,
   and after ``--burst`` such requests at once (each a different text);
3. connections: 1,100 idle Wyoming connections, then one ``/v1/audio/speech`` request: answered
   or not, in how long; the log's size and its tracebacks.

``--app`` points at another checkout's ``app.py`` to compare (docs/reliability.md compares the
commit before the hardening with this one). Prints one line per figure and the CPU's model.

Extras: server, dev (the tests' server starter, httpx, psutil).
"""

from __future__ import annotations

import argparse
import platform
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import (  # noqa: E402 - the tests' own server starter and texts
    app_process,
    free_port,
    numeric_text,
    running_app,
)


def rss_mb(url: str) -> float:
    process = app_process(url)
    return sum(p.memory_info().rss for p in [process, *process.children(recursive=True)]) / 1e6


def speech(url: str, text: str, timeout: float = 600) -> tuple[int, float]:
    start = time.perf_counter()
    answer = httpx.post(f"{url}/v1/audio/speech", json={"input": text}, timeout=timeout)
    return answer.status_code, time.perf_counter() - start


def freeze(url: str, text: str) -> tuple[tuple[int, float], float]:
    """The long request's (status, seconds), and the slowest /health answer meanwhile."""
    result = {}
    request = threading.Thread(target=lambda: result.update(long=speech(url, text)))
    request.start()
    slowest = 0.0
    while request.is_alive():
        start = time.perf_counter()
        httpx.get(f"{url}/health", timeout=600)
        slowest = max(slowest, time.perf_counter() - start)
        time.sleep(0.1)
    return result["long"], slowest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--artifacts", required=True, help="an artifact folder (a tiny fixture will do)"
    )
    parser.add_argument("--app", default=str(ROOT / "app.py"), help="the app.py to start")
    parser.add_argument("--burst", type=int, default=10, help="long requests at once (default 10)")
    args = parser.parse_args()
    app = Path(args.app).resolve()
    wyoming = free_port()
    server_args = ["--artifacts", args.artifacts, "--asr-model", "none"]
    server_args += ["--wyoming", f"tcp://127.0.0.1:{wyoming}"]
    log = Path(tempfile.mkdtemp(prefix="hardening-")) / "server.log"
    cpu = (
        platform.processor()
        or subprocess.run(
            ["sh", "-c", "lscpu | grep 'Model name'"], capture_output=True, text=True
        ).stdout.strip()
    )
    print(f"app: {app}\ncpu: {cpu}, {psutil.cpu_count()} cores")
    import tests.conftest as conftest

    conftest.ROOT = app.parent  # the checkout whose app.py runs
    limit = ("prlimit", "--nofile=1024")
    with running_app(server_args, log, limit, HF_HUB_OFFLINE="1") as url:
        time.sleep(5)  # the preloads
        print(f"rss at start: {rss_mb(url):.0f} MB")
        (status, took), slowest = freeze(url, numeric_text(10_000, 0))
        print(
            f"one 10,000-character text of numbers: HTTP {status} in {took:.1f} s; slowest /health meanwhile {slowest:.2f} s"
        )
        print(f"rss after it: {rss_mb(url):.0f} MB")
        threads = [
            threading.Thread(target=speech, args=(url, numeric_text(10_000, 1 + n)))
            for n in range(args.burst)
        ]
        start = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        print(
            f"{args.burst} at once: answered in {time.perf_counter() - start:.1f} s; rss after: {rss_mb(url):.0f} MB"
        )
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
        idle = []
        try:
            for _ in range(1_100):
                idle.append(socket.create_connection(("127.0.0.1", wyoming), timeout=10))
            try:
                status, took = speech(url, "Hello there.", timeout=30)
                print(
                    f"1,100 idle Wyoming connections: a short speech request HTTP {status} in {took:.2f} s"
                )
            except httpx.HTTPError as exc:
                print(
                    f"1,100 idle Wyoming connections: a short speech request failed ({type(exc).__name__})"
                )
        finally:
            for connection in idle:
                connection.close()
    text = log.read_text(errors="replace")
    print(f"log: {len(text) / 1e3:.0f} kB, {text.count('Traceback')} tracebacks ({log})")


if __name__ == "__main__":
    main()
