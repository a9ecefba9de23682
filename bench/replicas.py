#!/usr/bin/env python3
"""Throughput of the Ray Serve replicas (docs/replicas.md) on this machine: one replica with every
CPU against one replica per CPU, the same requests, in one run.

    python bench/replicas.py --artifacts ART [--requests 8] [--cpus 2] [--rounds 1]

Starts a Ray cluster of this machine (``--cpus`` CPUs), deploys deploy/replicas.yaml with each
layout in turn (``omnivoice-onnx-replicas``), sends one request per replica to warm them, then
``--requests`` at once through the OpenAI door; prints requests per minute, seconds of audio made
per second and per CPU, and the kernel each layout's replicas chose. The last line is
machine-readable.

Extras: server, ray.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import io
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import soundfile as sf
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from omnivoice_rt.engine.qgemm import cpu_flags  # noqa: E402

RAY = [sys.executable, "-m", "ray.scripts.scripts"]
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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def speak(url: str, n: int) -> tuple[float, str]:
    """Sentence n: (seconds of audio, the replica that made it)."""
    body = {
        "model": "omnivoice",
        "voice": "alloy",
        "input": SENTENCES[n % len(SENTENCES)],
        "response_format": "wav",
        "seed": n,
    }
    request = urllib.request.Request(
        f"{url}/v1/audio/speech", json.dumps(body).encode(), {"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=900) as answer:
        audio, rate = sf.read(io.BytesIO(answer.read()))
        return len(audio) / rate, answer.headers["x-replica"]


def layout(args, folder: Path, address: str, replicas: int, cpus: int) -> dict:
    """Deploy ``replicas`` of ``cpus`` CPUs, warm them, time ``args.requests`` at once."""
    config = yaml.safe_load((ROOT / "deploy" / "replicas.yaml").read_text())
    port = free_port()
    config["http_options"]["port"] = port
    application = config["applications"][0]
    application["args"].update(
        artifacts=str(args.artifacts), voices=str(folder), asr_model="none", precision=None
    )
    model = next(d for d in application["deployments"] if d["name"] == "Model")
    del model["autoscaling_config"]
    model.update(num_replicas=replicas, ray_actor_options={"num_cpus": cpus})
    path = folder / f"replicas-{replicas}.yaml"
    path.write_text(yaml.safe_dump(config))
    log = folder / f"replicas-{replicas}.log"
    with open(log, "w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "omnivoice_rt.server.replicas", str(path), "--address", address],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        while "serving on" not in log.read_text():
            if process.poll() is not None:
                raise SystemExit(log.read_text()[-2000:])
            time.sleep(1)
        with concurrent.futures.ThreadPoolExecutor(args.requests) as pool:
            list(pool.map(lambda n: speak(url, n), range(replicas)))  # warm every replica
            health = json.loads(urllib.request.urlopen(f"{url}/health", timeout=60).read())
            start = time.perf_counter()
            made = list(pool.map(lambda n: speak(url, n), range(args.requests)))
            wall = time.perf_counter() - start
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=120)
    audio = sum(seconds for seconds, _ in made)
    return {
        "replicas": replicas,
        "cpus_each": cpus,
        "served_by": len({replica for _, replica in made}),
        "kernel": next(iter(health["kernels"].values()), {}).get("kernel"),
        "wall_s": round(wall, 2),
        "requests_per_min": round(60 * args.requests / wall, 2),
        "audio_s_per_s": round(audio / wall, 3),
        "audio_s_per_s_per_cpu": round(audio / wall / (replicas * cpus), 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--artifacts", required=True, type=Path)
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--cpus", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    args.artifacts = args.artifacts.resolve()
    flags = cpu_flags()
    features = [f for f in ("amx_int8", "avx512_vnni", "avx_vnni", "avx2") if f in flags]
    print(f"machine: {os.cpu_count()} CPUs, {', '.join(features) or 'no AVX2'}")
    port = free_port()
    address = f"127.0.0.1:{port}"
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    subprocess.run(
        [
            *RAY,
            "start",
            "--head",
            "--node-ip-address",
            "127.0.0.1",
            "--port",
            str(port),
            "--num-cpus",
            str(args.cpus),
            "--include-dashboard",
            "false",
            "--disable-usage-stats",
        ],
        check=True,
        env=env,
        capture_output=True,
    )
    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="omnivoice-replicas-") as tmp:
            for _ in range(args.rounds):  # alternating, so that the machine's drift hits both
                for replicas, cpus in ((1, args.cpus), (args.cpus, 1)):
                    result = layout(args, Path(tmp), address, replicas, cpus)
                    print(
                        f"{replicas} replica(s) x {cpus} CPU(s) [{result['kernel']}]: "
                        f"{result['requests_per_min']} requests/min, {result['audio_s_per_s']} s "
                        f"of audio per s ({result['audio_s_per_s_per_cpu']} per CPU), "
                        f"served by {result['served_by']}",
                        flush=True,
                    )
                    results.append(result)
    finally:
        subprocess.run([*RAY, "stop", "--force"], env=env, capture_output=True)
    print(json.dumps({"machine_features": features, "results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
