"""The benchmarks' machine line and core pinning: a figure said to be "on two cores" ran on two
distinct cores, never on one core's two hyperthreads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.benchmark import physical_cores, pin_cores

ROOT = Path(__file__).resolve().parents[2]


def test_each_cpu_is_on_one_core_and_pinning_takes_one_cpu_a_core():
    cores = physical_cores()
    cpus = [cpu for core in cores for cpu in core]
    assert sorted(cpus) == sorted(os.sched_getaffinity(0))  # each CPU once
    for core in cores:  # a core's CPUs are its SMT siblings as Linux lists them
        siblings = Path(f"/sys/devices/system/cpu/cpu{core[0]}/topology/thread_siblings_list")
        if siblings.exists():
            assert set(core) <= set(_cpu_list(siblings.read_text()))
    pinned = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os; from bench.benchmark import machine, pin_cores; pin_cores(1); "
            "print(sorted(os.sched_getaffinity(0))); print(machine())",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert pinned[0] == f"[{cores[0][0]}]"
    assert ", 1 core" in pinned[1], pinned
    assert ("of the machine's" in pinned[1]) == (os.cpu_count() > 1), pinned
    with pytest.raises(SystemExit, match=rf"--cores {len(cores) + 1}: .* {len(cores)} cores"):
        pin_cores(len(cores) + 1)


def _cpu_list(text: str) -> list[int]:
    """Linux's CPU list syntax: ``0-3,8,10-11``."""
    cpus = []
    for part in text.strip().split(","):
        low, _, high = part.partition("-")
        cpus.extend(range(int(low), int(high or low) + 1))
    return cpus
