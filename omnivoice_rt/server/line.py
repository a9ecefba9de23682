"""One line for every door of the server: requests get a synthesis slot in the order they came.

Every door (the page, gradio_client, MCP, the OpenAI endpoint, Wyoming) waits here, so nobody
overtakes and the number waiting is bounded; a request whose client went away leaves the line.
The server's line is a :class:`ClientLine`: one client holds at most ``per_client`` slots and
its share of the waiting places, and its other requests let other clients' go first.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import Counter, deque
from collections.abc import Callable

from omnivoice_rt.errors import Busy, Cancelled, Stopping

logger = logging.getLogger(__name__)

LEAVE_CHECK_S = 0.1  # how often a request waiting (in line, for the CPU) checks its client is there


def wait_or_leave(
    handed: threading.Event, should_stop: Callable[[], bool] | None, place: str, waited: str
) -> None:
    """Wait until ``handed`` is set, asking ``should_stop()`` every ``LEAVE_CHECK_S``: a client
    that went away (even as it was handed its turn) leaves with :class:`Cancelled` ("the
    request was abandoned while it waited ``waited``"), the log saying "a request left
    ``place``". The caller gives back, in its ``except``, what it may have been handed."""
    while True:
        done = handed.wait(LEAVE_CHECK_S if should_stop is not None else None)
        if should_stop is not None and should_stop():
            logger.info("a request left %s: its client went away", place)
            raise Cancelled(f"the request was abandoned while it waited {waited}")
        if done:
            return


class _Ticket(threading.Event):
    """A place in line: set when a slot is handed to it; ``client`` is who asked (None: nobody
    said)."""

    def __init__(self, client: str | None):
        super().__init__()
        self.client = client


class Line:
    """One line for every door: requests get a synthesis slot in the order they came, ``slots`` at
    a time; with ``max_waiting`` already waiting, a newcomer is turned away (:class:`Busy`). A
    finished request hands its slot straight to the first in line that may hold it, so nobody
    overtakes (here anyone may: :class:`ClientLine` says who may not)."""

    def __init__(self, slots: int, max_waiting: int):
        if slots < 1:
            raise ValueError(f"concurrency takes at least 1, not {slots}: one request at a time")
        self.slots, self.max_waiting = slots, max_waiting
        self._free = slots
        self._waiting: deque[_Ticket] = deque()
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
    def turn(self, on_wait=None, should_stop=None, client: str | None = None):
        """Hold a slot for the block; ``on_wait(ahead)`` is told how many are ahead when it must
        wait. A request whose ``should_stop()`` says yes while it waits (its client went away)
        leaves the line, raising :class:`Cancelled`, and the ones behind it move up. ``client``:
        who asked (an address), for a line that bounds each client's share."""
        with self._lock:
            if self.closed:
                raise Stopping()
            ticket = _Ticket(client)
            if self._free and self._may_hold(client):  # then nobody waiting may: see _release
                self._free, ahead = self._free - 1, 0
                self._hold(client)
                ticket.set()
            else:
                self._refuse_surplus(client)
                ahead = self._ahead(client)
                self._waiting.append(ticket)
        if not ticket.is_set():
            if on_wait is not None:
                try:
                    on_wait(ahead)
                except Exception:  # noqa: BLE001 - a report that failed must not lose the place in line
                    logger.exception("reporting a wait in line failed")
            self._wait(ticket, should_stop)
        try:
            yield
        finally:
            self._release(client)

    def _wait(self, ticket: _Ticket, should_stop) -> None:
        """Wait until a finished request hands over its slot (it sets the ticket). However the
        wait ends without the slot (the client left, ``should_stop`` failed, the thread was
        interrupted), the ticket leaves the line, or the slot it was just handed goes on."""
        try:
            wait_or_leave(ticket, should_stop, "the line", "in line")
        except BaseException:
            with self._lock:
                handed = ticket.is_set()
                if not handed:
                    self._waiting.remove(ticket)
            if handed:
                self._release(ticket.client)
            raise

    # ------------------------------------------------------------------ under the lock

    def _may_hold(self, client: str | None) -> bool:
        """Whether a request of ``client`` may take a slot now (here: always)."""
        return True

    def _hold(self, client: str | None) -> None:
        """A request of ``client`` took a slot."""

    def _refuse_surplus(self, client: str | None) -> None:
        """Raise :class:`Busy` if a request of ``client`` may not wait."""
        if len(self._waiting) >= self.max_waiting:
            raise Busy(
                f"The server is busy: {len(self._waiting)} requests are waiting already. "
                "Try again in a minute."
            )

    def _ahead(self, client: str | None) -> int:
        """What a newcomer that must wait is told: those in line before it and those served."""
        return len(self._waiting) + self.slots

    def _release(self, client: str | None) -> None:
        with self._lock:
            self._let_go(client)
            for ticket in self._waiting:  # the first in line that may hold the slot
                if self._may_hold(ticket.client):
                    self._waiting.remove(ticket)
                    self._hold(ticket.client)
                    ticket.set()
                    return
            self._free += 1

    def _let_go(self, client: str | None) -> None:
        """A request of ``client`` gave its slot back."""


class ClientLine(Line):
    """The server's line: a :class:`Line` where one client (an address, ``client``) holds at most
    ``per_client`` slots and ``share`` waiting places (its share of ``max_waiting`` as of the
    slots: ``max_waiting * per_client / slots``, at least 1). Its requests beyond its slots wait
    without blocking the line: a slot goes to the first in line whose client may hold one, so
    other clients' requests go first and its own keep their order. A request that names no
    client is bounded by the line alone."""

    def __init__(self, slots: int, max_waiting: int, per_client: int):
        super().__init__(slots, max_waiting)
        if not 1 <= per_client <= slots:
            raise ValueError(
                f"per_client takes 1 to concurrency ({slots}), not {per_client}: the slots one "
                "client may hold"
            )
        self.per_client = per_client
        self.share = max(1, max_waiting * per_client // slots)
        self._held: Counter[str] = Counter()  # slots held, by client

    def held(self, client: str | None) -> int:
        """Slots ``client``'s requests hold now."""
        with self._lock:
            return self._held[client] if client is not None else 0

    def _may_hold(self, client: str | None) -> bool:
        return client is None or self._held[client] < self.per_client

    def _hold(self, client: str | None) -> None:
        if client is not None:
            self._held[client] += 1

    def _let_go(self, client: str | None) -> None:
        if client is not None:
            self._held[client] -= 1
            if not self._held[client]:
                del self._held[client]  # bounded by the slots, not by the clients ever seen

    def _waiting_of(self, client: str) -> int:
        """Requests of ``client`` in line now."""
        return sum(ticket.client == client for ticket in self._waiting)

    def _refuse_surplus(self, client: str | None) -> None:
        super()._refuse_surplus(client)
        if client is not None:
            mine = self._waiting_of(client)
            if mine >= self.share:
                raise Busy(
                    f"The server is busy with your requests: {mine} are waiting already, the most "
                    f"one client may, and {self.per_client} are made at once. Try again when one "
                    "has finished."
                )

    def _ahead(self, client: str | None) -> int:
        """Those in line before it and those served that come before it: the slots, or, where its
        client holds all its own, only those slots (other clients' pass it)."""
        if client is not None and not self._may_hold(client):
            return self._waiting_of(client) + self.per_client
        return super()._ahead(client)
