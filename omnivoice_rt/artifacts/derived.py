"""Graphs the runtime derives from an artifact folder and keeps: the repaired LLM
(:mod:`omnivoice_rt.artifacts.bidirectional`) and the integer GEMM rewrite (:mod:`omnivoice_rt.engine.qgemm`).

A derived graph lives in a folder of its own, ``<storage>/<name>-<key>/``, where ``key`` hashes the
source graph (its bytes and its weights' identity) and the version of what derives it
(:func:`source_key`): a changed source or a newer derivation gets a new folder, which replaces the
older ones of the same ``name``. The folder is made under another name and renamed into place
when complete, with ``made.json`` listing its files' sizes and the graphs' sha256; a folder that
does not match its list (truncated, changed, or written before lists were kept) is made again.
The weights' data files are checked by size only (hashing hundreds of megabytes at every start
costs more than it finds). Processes sharing a storage folder (replicas, containers on one
volume) make a folder one at a time: the others wait on a lock file beside it (``flock``, which
the kernel releases if its holder dies) and then take what it made. A maker killed mid-way
leaves its half-made folder, which the next maker of that name removes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import secrets
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from omnivoice_rt.artifacts.manifest import ArtifactError

logger = logging.getLogger(__name__)

STAMP = "made.json"


def source_key(path: Path, derivation: str) -> str:
    """A key that changes when the graph ``path`` changes (its bytes, its weights' file name and
    size) or when ``derivation`` (what derives from it, with its version) does."""
    digest = hashlib.sha256(f"{derivation}\n".encode())
    digest.update(path.read_bytes())
    data = path.with_name(path.name + ".data")
    if data.exists():
        real = data.resolve()  # in the HF cache, the blob's name is its sha256
        digest.update(f"{real.name}:{real.stat().st_size}".encode())
    return digest.hexdigest()[:16]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _stamp(folder: Path) -> None:
    files = {
        f.name: {
            "size": f.stat().st_size,
            **({"sha256": _sha256(f)} if f.suffix == ".onnx" else {}),
        }
        for f in sorted(folder.iterdir())
        if f.is_file()
    }
    (folder / STAMP).write_text(json.dumps({"files": files}, indent=1))


def intact(folder: Path) -> bool:
    """Whether ``folder`` holds what its ``made.json`` lists, sizes and graph hashes alike."""
    try:
        files = json.loads((folder / STAMP).read_text())["files"]
        return bool(files) and all(
            (folder / name).stat().st_size == entry["size"]
            and ("sha256" not in entry or _sha256(folder / name) == entry["sha256"])
            for name, entry in files.items()
        )
    except (OSError, ValueError, KeyError, TypeError):
        return False


@contextmanager
def _alone(lock: Path, what: str) -> Iterator[None]:
    """Hold ``lock`` (an exclusive ``flock``) for the block, saying so if another process holds
    it; without ``fcntl`` (not POSIX) or a file system that locks, the block runs unlocked."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    with open(lock, "a") as held:
        try:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            logger.info("waiting for another process making %s", what)
            fcntl.flock(held, fcntl.LOCK_EX)
        except OSError:  # a file system without locks (some network ones): made unlocked
            logger.debug("no lock on %s: %s made without one", lock, what)
        yield  # the lock goes with the file's closing


def derived(storage: Path, name: str, key: str, make: Callable[[Path], None], what: str) -> Path:
    """The folder ``<storage>/<name>-<key>``: reused when intact, else made by ``make(folder)``
    (which writes the derived files into the empty folder it is given). ``what`` names it in
    logs and errors."""
    target = storage / f"{name}-{key}"
    if intact(target):
        return target
    try:
        storage.mkdir(parents=True, exist_ok=True)
        with _alone(storage / f".{name}.lock", what):
            if intact(target):  # made by the process this one waited for
                return target
            for left in storage.glob(f"{target.name}.partial-*"):  # by a maker that was killed
                shutil.rmtree(left, ignore_errors=True)
            logger.info("making %s in %s", what, target)
            staging = storage / f"{target.name}.partial-{secrets.token_hex(4)}"
            staging.mkdir()
            try:
                make(staging)
                _stamp(staging)
                shutil.rmtree(target, ignore_errors=True)  # damaged: not intact, so not in use
                staging.rename(target)
            finally:
                shutil.rmtree(staging, ignore_errors=True)  # nothing half-written stays behind
    except OSError as exc:
        raise ArtifactError(
            f"cannot write {what} into {storage} ({exc.strerror or exc}); "
            "set HF_HOME to a writable folder"
        ) from exc
    for old in storage.glob(f"{name}-*"):  # made from an earlier source or version
        if old != target and re.fullmatch(rf"{re.escape(name)}-[0-9a-f]{{16}}", old.name):
            logger.info("removing %s, derived from an earlier source", old)
            shutil.rmtree(old, ignore_errors=True)
    return target
