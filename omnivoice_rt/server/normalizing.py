"""Numbers read as words for the server: in a worker process of its own, a text piece at a time.

Reading numbers as words (``omnivoice_rt.text.normalize``) is C++ work (kaldifst) that holds the
interpreter lock for as long as a piece takes and grows memory with its length: in the server's
process one long numeric text froze every door for 40 s and kept gigabytes. Here it runs in one
worker process (this file, run as a script; started at the first need):

- the server's threads wait on a pipe, without the lock, so every door keeps answering;
- a request's text goes over in pieces (``normalize.pieces``), each a turn in a line of its own
  (``omnivoice_rt/server/line.py``: first come, first served; ``max_waiting`` waiting, more are ``Busy``), so
  a long text does not hold up a short one by more than a piece; a client that leaves stops its
  reading before its next piece, and a text whose words pass the request's limit stops there;
- the worker gives its memory back after every piece (``malloc_trim``) and is started again if
  it dies;
- the last ``CACHE_SIZE`` texts' words (or their refusal) are kept: the same text is not read
  twice.

    reader = TextReader(max_waiting=32)
    reader.normalize("It costs $5.", "en", should_stop=lambda: False)  # "It costs five dollars."
"""

from __future__ import annotations

import json
import logging
import os
import select
import subprocess
import sys
import threading
from collections import OrderedDict
from pathlib import Path

from omnivoice_rt.errors import SynthesisError
from omnivoice_rt.limits import MAX_TEXT_CHARS
from omnivoice_rt.server.line import Line
from omnivoice_rt.server.memory import release_memory
from omnivoice_rt.text import normalize

logger = logging.getLogger(__name__)

CACHE_SIZE = 32  # texts whose words are kept (a text is at most 10,000 characters)
PIECE_TIMEOUT_S = 30.0  # a piece takes at most about a second: past this the worker is stuck
ROOT = Path(__file__).resolve().parents[2]  # the folder holding the omnivoice_rt package


class TextReader:
    """The server's text normalization: one worker process, its pieces in a line of their own."""

    def __init__(self, max_waiting: int):
        self.line = Line(1, max_waiting)
        self.pieces_read = 0  # pieces the worker read: /health shows it
        self._process: subprocess.Popen | None = None
        self._cache: OrderedDict[tuple, str | normalize.TextTooLong] = OrderedDict()
        self._lock = threading.Lock()

    def normalize(self, text: str, language: str | None, should_stop=None) -> str:
        """``normalize.normalize_text(text, language)`` bounded by ``MAX_TEXT_CHARS`` with its
        pieces read by the worker; ``Busy`` when too many wait, ``Cancelled`` when
        ``should_stop()``."""
        key = (text, language)
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                kept = self._cache[key]
                if isinstance(kept, Exception):
                    raise normalize.TextTooLong(str(kept))
                return kept
        try:
            words = normalize.normalize_text(
                text,
                language,
                max_chars=MAX_TEXT_CHARS,
                should_stop=should_stop,
                run=lambda code, piece: self._read(code, piece, should_stop),
            )
        except normalize.TextTooLong as exc:
            self._keep(key, exc)
            raise
        self._keep(key, words)
        return words

    def _keep(self, key: tuple, result) -> None:
        with self._lock:
            self._cache[key] = result
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)

    def _read(self, code: str, piece: str, should_stop) -> str:
        """One piece through the worker, in its turn; ``ValueError`` where the FSTs have no path
        (the segment then stays as written, as upstream keeps it)."""
        with self.line.turn(should_stop=should_stop):
            try:
                process = self._worker()
                process.stdin.write(json.dumps({"code": code, "piece": piece}) + "\n")
                process.stdin.flush()
                if not _readable(process.stdout, PIECE_TIMEOUT_S):
                    raise TimeoutError(f"no answer in {PIECE_TIMEOUT_S:g} s")
                answer = json.loads(process.stdout.readline())
            # it died (killed, out of memory), hung or could not start: a new one next time
            except (OSError, ValueError) as exc:
                logger.error("the text normalization worker failed (%s); starting it again", exc)
                self.close()
                raise SynthesisError(
                    "Reading the text's numbers as words failed; try again, or send the request "
                    "with normalize_text off."
                ) from None
            self.pieces_read += 1
        if "error" in answer:
            raise ValueError(answer["error"])
        return answer["words"]

    def _worker(self) -> subprocess.Popen:
        if self._process is None or self._process.poll() is not None:
            environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
            self._process = subprocess.Popen(
                [sys.executable, "-u", "-m", __name__],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                encoding="utf-8",
                env=environment,
                cwd=ROOT,
            )
            logger.info("started the text normalization worker (pid %d)", self._process.pid)
        return self._process

    def close(self) -> None:
        """Stop the worker (a later piece starts another)."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()

    def preload(self) -> None:
        """Start the worker and load its normalizers now (a server, at start)."""
        for code in normalize.FSTS:
            try:
                self._read(code, "1", None)
            except (ValueError, SynthesisError) as exc:
                logger.warning("text normalization is not available: %s", exc)


def _readable(stream, timeout: float) -> bool:
    """Whether ``stream`` has something to read within ``timeout`` seconds (where pipes can be
    waited on: elsewhere, always)."""
    if os.name != "posix":
        return True
    return bool(select.select([stream], [], [], timeout)[0])


def serve() -> None:
    """The worker: a JSON line ``{"code", "piece"}`` in, ``{"words"}`` or ``{"error"}`` out on
    its standard output, which nothing else writes to (anything printed goes to standard error,
    the server's log, as the worker's log does)."""
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s (worker) %(message)s")
    for line in sys.stdin:
        asked = json.loads(line)
        try:
            answer = {"words": normalize.read_piece(asked["code"], asked["piece"])}
        except Exception as exc:  # noqa: BLE001 - the caller keeps the segment as written
            answer = {"error": f"{type(exc).__name__}: {exc}"[:200]}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()
        release_memory()


if __name__ == "__main__":
    serve()
