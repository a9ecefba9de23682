"""Connections the server holds, bounded: how many at once, how long a silent one may stay, and
one line of the log per condition when the system runs out of file descriptors.

Each connection holds a file descriptor, and a process has a fixed number (1,024 is common):
idle connections that are never closed, on any door, end in "Too many open files" for every
door, and asyncio then logged a traceback per failed accept (112 MB of log in 25 s). So:

- HTTP (:func:`http_protocol`, uvicorn's own protocol with two checks): at most
  ``max_connections`` open at once, a newcomer past them answered ``503`` and closed at once;
  a request's headers must all arrive within ``header_timeout`` seconds of the connection, or of
  the previous answer (uvicorn closes keep-alive connections idle for 5 s itself);
- Wyoming: its door counts its connections and closes idle ones (``omnivoice_rt/server/wyoming_door.py``);
- :class:`OncePerMinute` (a logging filter): a record about running out of file descriptors (and
  asyncio's retries of an accept it caused), or about a refused connection, is logged without
  its traceback, once a minute per kind, with the number left out since.
"""

from __future__ import annotations

import errno
import logging
import threading
import time

logger = logging.getLogger(__name__)

REFUSAL_BODY = b"The server has too many connections open; try again in a minute.\n"
REFUSAL = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"retry-after: 30\r\nconnection: close\r\ncontent-length: "
    + str(len(REFUSAL_BODY)).encode()
    + b"\r\n\r\n"
    + REFUSAL_BODY
)
# errors of a process out of file descriptors or memory for a socket
RESOURCE_ERRORS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


def http_protocol(max_connections: int, header_timeout: float):
    """uvicorn's HTTP protocol (``uvicorn.run(http=...)``) with a bound on connections and on
    the time a request's headers take."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    class BoundedHTTP(AutoHTTPProtocol):
        refused = False
        _deadline = None  # the timer that closes a connection whose headers are late
        _before = None  # the request (uvicorn's cycle) the awaited headers come after

        def connection_made(self, transport) -> None:
            if len(self.connections) >= max_connections:
                self.refused = True
                refused_connection("HTTP", max_connections)
                transport.write(REFUSAL)
                transport.close()
                return
            super().connection_made(transport)
            self._await_headers()

        def data_received(self, data: bytes) -> None:
            if self.refused:
                return
            super().data_received(data)
            if self._deadline is not None and self.cycle is not self._before:
                self._deadline.cancel()  # the headers of a new request came in time
                self._deadline = None

        def on_response_complete(self) -> None:
            before = self.cycle
            super().on_response_complete()  # which may start a pipelined request at once
            if self.cycle is before:
                self._await_headers()

        def connection_lost(self, exc) -> None:
            if self.refused:
                return
            if self._deadline is not None:
                self._deadline.cancel()
            super().connection_lost(exc)

        def _await_headers(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            self._before = self.cycle
            self._deadline = self.loop.call_later(header_timeout, self._headers_late)

        def _headers_late(self) -> None:
            self._deadline = None
            transport = self.transport
            # no new request, none being answered, and not another protocol's (a WebSocket's)
            idle = self.cycle is None or self.cycle.response_complete
            if self.cycle is self._before and idle and transport.get_protocol() is self:
                if not transport.is_closing():
                    closed_connection("HTTP", f"its request headers took over {header_timeout:g} s")
                    transport.close()

    return BoundedHTTP


def refused_connection(door: str, limit: int) -> None:
    """One line of the log (at most once a minute) for a connection refused."""
    flag = "--wyoming-max-connections" if door == "Wyoming" else "--max-connections"
    logger.warning("refused a %s connection: %d are open, the limit (%s)", door, limit, flag)


def closed_connection(door: str, why: str) -> None:
    """One line of the log (at most once a minute) for a connection closed by the server."""
    logger.info("closed a %s connection: %s", door, why)


class OncePerMinute(logging.Filter):
    """Lets through, once a minute per kind, records about the system's resources running out
    (an ``OSError`` of ``RESOURCE_ERRORS``, "Too many open files") and connections refused or
    closed by this module, each
    without its traceback and with the count of those left out since; every other record as it is."""

    PERIOD_S = 60.0

    def __init__(self):
        super().__init__()
        self._last: dict[str, float] = {}
        self._left_out: dict[str, int] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        judged = getattr(record, "once_per_minute", None)  # one record, several handlers
        if judged is None:
            try:
                judged = self.judge(record)
            except Exception:  # noqa: BLE001 - a filter must not fail the code that logs
                judged = True
            record.once_per_minute = judged
        return judged

    def judge(self, record: logging.LogRecord) -> bool:
        kind = self.kind(record)
        if kind is None:
            return True
        now = time.monotonic()
        with self._lock:
            if now - self._last.get(kind, -self.PERIOD_S) < self.PERIOD_S:
                self._left_out[kind] = self._left_out.get(kind, 0) + 1
                return False
            self._last[kind], left_out = now, self._left_out.pop(kind, 0)
        record.msg, record.args = f"{record.getMessage()}{self.detail(record)}", None
        if left_out:
            record.msg += f" ({left_out} such lines left out in the last minute)"
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True

    @staticmethod
    def kind(record: logging.LogRecord) -> str | None:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, OSError) and error.errno in RESOURCE_ERRORS:
            return f"{record.name}:{error.errno}"
        message = record.getMessage()
        if "Too many open files" in message or "out of system resource" in message:
            return f"{record.name}:resources"
        if isinstance(error, ValueError) and "_start_serving" in message:
            # asyncio's accept loop, out of descriptors, retries a second later; a retry that
            # finds its server closed meanwhile (the server stopping) fails on descriptor -1
            return f"{record.name}:accept retry"
        if record.name == __name__:  # a connection refused or closed: per door and reason
            return f"{record.name}:{message.split(':')[0]}:{record.msg}"
        return None

    @staticmethod
    def detail(record: logging.LogRecord) -> str:
        error = record.exc_info[1] if record.exc_info else None
        return f": {error}" if error is not None else ""


def quiet_resource_errors() -> None:
    """Install :class:`OncePerMinute` on every handler that such records reach: the root
    logger's (asyncio's accept loops, this module) and uvicorn's own."""
    quiet = OncePerMinute()
    for name in ("", "uvicorn", "uvicorn.error", "uvicorn.access"):
        for handler in logging.getLogger(name).handlers:
            handler.addFilter(quiet)
