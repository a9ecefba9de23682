"""One line for every door of the server: requests get a synthesis slot in the order they came.

Every door (the page, gradio_client, MCP, the OpenAI endpoint) waits here, so nobody overtakes and
the number waiting is bounded; a request whose client went away leaves the line.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import deque

from omnivoice_rt.errors import Busy, Cancelled, Stopping

logger = logging.getLogger(__name__)

LEAVE_CHECK_S = 0.1  # how often a request waiting in line checks that its client is still there


class Line:
    """One line for every door: requests get a synthesis slot in the order they came, ``slots`` at
    a time; with ``max_waiting`` already waiting, a newcomer is turned away (:class:`Busy`). A
    finished request hands its slot straight to the first in line, so nobody overtakes."""

    def __init__(self, slots: int, max_waiting: int):
        if slots < 1:
            raise ValueError(f"concurrency takes at least 1, not {slots}: one request at a time")
        self.slots, self.max_waiting = slots, max_waiting
        self._free = slots
        self._waiting: deque[threading.Event] = deque()
        self._lock = threading.Lock()
        self.closed = False  # the server is stopping: newcomers are turned away (Stopping)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    @property
    def serving(self) -> int:
        with self._lock:
            return self.slots - self._free

    def close(self) -> None:
        """Take no newcomer from now on (:class:`Stopping`); those in line and served go on."""
        with self._lock:
            self.closed = True

    @contextlib.contextmanager
    def turn(self, on_wait=None, should_stop=None):
        """Hold a slot for the block; ``on_wait(ahead)`` is told how many are ahead when it must
        wait. A request whose ``should_stop()`` says yes while it waits (its client went away)
        leaves the line, raising :class:`Cancelled`, and the ones behind it move up."""
        with self._lock:
            if self.closed:
                raise Stopping()
            if self._free and not self._waiting:
                self._free, ticket, ahead = self._free - 1, None, 0
            elif len(self._waiting) >= self.max_waiting:
                raise Busy(
                    f"The server is busy: {len(self._waiting)} requests are waiting already. Try again in a minute."
                )
            else:
                ticket, ahead = threading.Event(), len(self._waiting) + self.slots
                self._waiting.append(ticket)
        if ticket is not None:
            if on_wait is not None:
                try:
                    on_wait(ahead)
                except Exception:  # noqa: BLE001 - a report that failed must not lose the place in line
                    logger.exception("reporting a wait in line failed")
            self._wait(ticket, should_stop)
        try:
            yield
        finally:
            self._release()

    def _wait(self, ticket: threading.Event, should_stop) -> None:
        """Wait until a finished request hands over its slot (it sets the ticket), asking
        ``should_stop`` every ``LEAVE_CHECK_S``. However the wait ends without the slot (the
        client left, ``should_stop`` failed, the thread was interrupted), the ticket leaves the
        line, or the slot it was just handed goes on to the next."""
        try:
            while True:
                handed = ticket.wait(LEAVE_CHECK_S if should_stop is not None else None)
                if should_stop is not None and should_stop():  # left, or left as it was handed
                    logger.info("a request left the line: its client went away")
                    raise Cancelled("the request was abandoned while it waited in line")
                if handed:
                    return
        except BaseException:
            with self._lock:
                handed = ticket.is_set()
                if not handed:
                    self._waiting.remove(ticket)
            if handed:
                self._release()
            raise

    def _release(self) -> None:
        with self._lock:
            if self._waiting:
                self._waiting.popleft().set()
            else:
                self._free += 1
