"""Batch synthesis on a Ray cluster: actors that each hold one loaded model, fed the items as they
free up. Ray is optional; this module is imported only for ``batch --ray``.

Every node resolves the artifacts itself: a Hub repo id through its own Hugging Face cache, a
folder at the same path on every node (a shared mount). The ``omnivoice_rt`` package travels to
the cluster with the job (Ray's ``py_modules``). The wav bytes come back to the driver, which
writes them, so the output folder need not be shared.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path

logger = logging.getLogger(__name__)


def ray_results(
    synthesizer: Callable,
    items: list,
    source,
    precision: str,
    workers: int,
    address: str,
    threads: int | None,
) -> Iterator:
    """(record, wav bytes) for each item, as the actors finish them; each actor holds one
    ``synthesizer(source, precision, threads)`` (``batch.Synthesizer``), which takes an item.

    ``address``: ``auto`` (the cluster this machine belongs to), ``local`` (a cluster of this
    machine alone, started and stopped with the run), or ``HOST:PORT`` of a cluster's head.
    ``workers``: actors, one model each (default: one per 2 CPUs of the cluster); ``threads``:
    ONNX Runtime threads and Ray CPUs per actor (default: the cluster's CPUs shared out)."""
    try:
        import ray
        from ray.util import ActorPool
    except ImportError as exc:
        raise ValueError("--ray needs Ray: pip install 'omnivoice-onnx[ray]'") from exc
    import omnivoice_rt
    from omnivoice_rt.tools import ray_auth

    source = str(Path(source).resolve()) if source and Path(source).is_dir() else source
    package = str(Path(omnivoice_rt.__file__).parent)
    ray_auth.prepare(address, "--ray")  # the token the cluster asks for, or one line
    try:
        ray.init(
            address=address,  # "local": a new cluster, never one found on this machine
            runtime_env={"py_modules": [package]},
            log_to_driver=False,
            logging_level=logging.WARNING,
        )
    except ConnectionError as exc:  # no cluster there
        refused = ray_auth.refusal(exc, f"--ray {address}")
        if refused:
            raise ValueError(refused) from exc
        where = "on this machine" if address == "auto" else f"at {address}"
        raise ValueError(
            f"--ray {address}: no Ray cluster is running {where}; start one with `ray start --head`, "
            "or use --ray local for a cluster of this machine alone, for this run"
        ) from exc
    try:
        cpus = int(ray.cluster_resources().get("CPU", 1))
        actors = workers if workers > 1 else max(1, cpus // 2)
        per_actor = threads or max(1, cpus // actors)
        logger.info("Ray: %d actors of %d CPUs on a cluster of %d CPUs", actors, per_actor, cpus)
        remote = ray.remote(num_cpus=per_actor)(_Actor)
        pool = ActorPool(
            [remote.remote(synthesizer, source, precision, per_actor) for _ in range(actors)]
        )
        yield from pool.map_unordered(lambda actor, item: actor.run.remote(item), items)
    finally:
        ray.shutdown()  # the driver leaves; a cluster started elsewhere keeps running


class _Actor:
    """One model on a Ray worker."""

    def __init__(self, synthesizer, source, precision, threads):
        self.synthesize = synthesizer(source, precision, threads)

    def run(self, item):
        return self.synthesize(item)
