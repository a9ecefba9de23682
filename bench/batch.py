"""Batch throughput on this machine: one process against a pool of N workers, same items.

    python bench/batch.py --model-dir ART [--items 8] [--workers 2] [--precision int4]

Prints items per minute, the real-time factor over the whole batch (seconds of work per second
of audio made), and the peak memory of each worker (the pool's children, sampled every 0.2 s).

Extras: dev (psutil).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from omnivoice_rt.tools.batch import RESULTS, run_batch  # noqa: E402

SENTENCES = [
    "The library opens at nine and closes late on Thursdays.",
    "Please remember to water the plants while I am away.",
    "A quiet morning is the best time to read a long book.",
    "The train to the coast leaves from the second platform.",
    "We walked along the river until the sun went down.",
    "Her new song was played on the radio for the first time.",
    "The museum has a room full of very old maps.",
    "Bring a warm coat, because the evenings are getting cold.",
]


def peak_memory(stop: threading.Event, peaks: dict) -> None:
    me = psutil.Process()
    while not stop.is_set():
        for process in [me, *me.children(recursive=True)]:
            try:
                peaks[process.pid] = max(peaks.get(process.pid, 0), process.memory_info().rss)
            except psutil.Error:
                pass
        time.sleep(0.2)


def measure(items: Path, args, workers: int) -> dict:
    out = Path(tempfile.mkdtemp(prefix=f"batch-{workers}-"))
    peaks, stop = {}, threading.Event()
    watcher = threading.Thread(target=peak_memory, args=(stop, peaks), daemon=True)
    watcher.start()
    started = time.perf_counter()
    counts = run_batch(
        items, out, args.model_dir, args.precision, workers=workers, show_progress=False
    )
    took = time.perf_counter() - started
    stop.set()
    watcher.join()
    records = [json.loads(line) for line in (out / RESULTS).read_text().splitlines()]
    audio = sum(r["seconds"] for r in records if r["status"] == "made")
    main = peaks.pop(psutil.Process().pid)
    worker_mb = max(peaks.values()) / 2**20 if peaks else main / 2**20
    return {
        "workers": workers,
        "made": counts["made"],
        "wall_s": took,
        "items_per_min": 60 * counts["made"] / took,
        "rtf": took / audio,
        "worker_peak_mb": worker_mb,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--precision", default="int4")
    parser.add_argument("--items", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    items = Path(tempfile.mkdtemp(prefix="batch-items-")) / "items.jsonl"
    lines = [
        {"id": f"item{n}", "text": SENTENCES[n % len(SENTENCES)], "seed": n}
        for n in range(args.items)
    ]
    items.write_text("".join(json.dumps(line) + "\n" for line in lines))
    cpu = psutil.cpu_count(logical=True)
    print(
        f"machine: {cpu} CPUs, {psutil.virtual_memory().total / 2**30:.0f} GiB; {args.items} items, {args.precision}, "
        f"balanced preset"
    )
    for workers in (1, args.workers):
        row = measure(items, args, workers)
        print(
            f"{row['workers']} worker(s): {row['items_per_min']:.2f} items/min, RTF {row['rtf']:.2f}, "
            f"{row['wall_s']:.1f} s for {row['made']} items, peak {row['worker_peak_mb']:.0f} MB per worker"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
