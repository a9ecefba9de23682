"""The server's life beyond requests: freeing the models when idle, and stopping gracefully.

- Idle unload (``--idle-unload SECONDS``): :class:`IdleUnloader` frees the models and the speech
  recogniser once nothing has used them for that long (``Service.unload_if_idle``: never while a
  request holds a model); the next request loads them again, and says so (the page's progress,
  the OpenAI door's ``X-Model-Load-Seconds``); ``/health`` shows the state.
- Stop (SIGTERM, as a container engine or a Space sends it): :class:`DrainingServer` first stops
  taking requests: the line turns newcomers away (``errors.Stopping``: the OpenAI door's 503 with
  ``Retry-After``, Wyoming's ``stopping``) and :class:`StoppingGuard` answers every new HTTP
  request 503 with ``Retry-After``; the requests under way finish, for at most ``drain_s``; then
  uvicorn's own graceful shutdown closes the connections (``GRACEFUL_STOP_S``) and the process
  exits 0. A second SIGTERM or SIGINT stops at once.
"""

from __future__ import annotations

import json
import logging
import signal
import threading
import time

import uvicorn

from omnivoice_rt.errors import Stopping
from omnivoice_rt.server.api_errors import RETRY_AFTER_S

logger = logging.getLogger(__name__)

STOPPING_BODY = json.dumps(
    {
        "status": "stopping",
        "error": {
            "message": str(Stopping()),
            "type": "server_error",
            "param": None,
            "code": "server_stopping",
        },
    }
).encode()


class IdleUnloader:
    """A daemon thread that asks ``service.unload_if_idle(seconds)`` a few times per period."""

    def __init__(self, service, seconds: float):
        self.service, self.seconds = service, seconds
        self._stop = threading.Event()

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self._run, name="idle-unload", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        period = min(max(self.seconds / 4, 0.25), 10.0)
        while not self._stop.wait(period):
            try:
                self.service.unload_if_idle(self.seconds)
            except Exception:  # noqa: BLE001 - the next period tries again; the log says why
                logger.exception("the idle unload failed")


class StoppingGuard:
    """ASGI middleware: while ``service.stopping``, every new HTTP request is answered 503 with
    ``Retry-After`` (a load balancer's health check included, which then takes this replica out);
    requests already under way are not touched."""

    def __init__(self, app, service):
        self.app, self.service = app, service

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or not self.service.stopping:
            await self.app(scope, receive, send)
            return
        headers = [
            (b"content-type", b"application/json"),
            (b"retry-after", str(RETRY_AFTER_S).encode()),
            (b"connection", b"close"),
            (b"content-length", str(len(STOPPING_BODY)).encode()),
        ]
        await send({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": STOPPING_BODY})


class DrainingServer(uvicorn.Server):
    """uvicorn's server, whose first SIGTERM drains ``service`` (no new request; those under way
    finish, for at most ``drain_s``) before uvicorn's own shutdown."""

    def __init__(self, config: uvicorn.Config, service, drain_s: float):
        super().__init__(config)
        self.service, self.drain_s = service, drain_s
        self._draining = False

    def handle_exit(self, sig: int, frame) -> None:
        if sig != signal.SIGTERM or self._draining:
            super().handle_exit(sig, frame)
            return
        self._draining = True
        self._captured_signals.append(sig)  # raised again after the shutdown, as uvicorn does
        self.service.stop()
        threading.Thread(target=self._drain, name="drain", daemon=True).start()

    def _drain(self) -> None:
        deadline = time.monotonic() + self.drain_s
        while self.service.working and time.monotonic() < deadline:
            time.sleep(0.1)
        left = self.service.working
        if left:
            logger.warning("stopping with %d requests unfinished after %.0f s", left, self.drain_s)
        else:
            logger.info("stopping: every request under way has finished")
        self.should_exit = True
