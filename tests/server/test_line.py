"""The server's one line (``omnivoice_rt/server/line.py``), alone: the turns every door waits
for, in arrival order, a bound on who may wait, and a waiter whose client left dropping out.
Through the doors: ``test_openai.py`` (two doors, one line), ``test_clients_that_leave.py``."""

from __future__ import annotations

import threading
import time

import pytest

from omnivoice_rt.errors import Busy, Cancelled
from omnivoice_rt.server.line import Line


def wait_for(condition, seconds: float = 60) -> None:
    deadline = time.time() + seconds
    while not condition():
        assert time.time() < deadline, "timed out"
        time.sleep(0.05)


def test_the_line_serves_in_order_and_turns_away_the_surplus():
    line = Line(slots=1, max_waiting=2)
    served, release = [], threading.Event()

    def request(name, hold=False):
        with line.turn():
            if hold:
                release.wait(10)
            served.append(name)

    threads = [threading.Thread(target=request, args=("first", True))]
    threads[0].start()
    for name in ("second", "third"):
        waiting = line.waiting
        threads.append(threading.Thread(target=request, args=(name,)))
        threads[-1].start()
        while line.waiting == waiting:  # in line now
            time.sleep(0.01)
    with pytest.raises(Busy, match="busy: 2 requests are waiting"):
        with line.turn():
            pass
    release.set()
    for thread in threads:
        thread.join(10)
    assert served == ["first", "second", "third"] and line.waiting == 0
    with line.turn():  # the slot came back
        pass


def test_a_request_that_leaves_the_line_hands_nothing_to_nobody():
    """The line itself: a waiter whose client left raises Cancelled and drops out; one that leaves
    as the slot is handed to it passes the slot on; the rest are served in order."""
    line = Line(slots=1, max_waiting=5)
    gone = {"a": threading.Event(), "b": threading.Event(), "c": threading.Event()}
    served, cancelled = [], []

    def wait(name):
        try:
            with line.turn(should_stop=gone[name].is_set):
                served.append(name)
        except Cancelled:
            cancelled.append(name)

    with line.turn():
        threads = {}
        for name in gone:
            waiting = line.waiting
            threads[name] = threading.Thread(target=wait, args=(name,))
            threads[name].start()
            wait_for(lambda: line.waiting > waiting, 10)  # noqa: B023 - each waits for its own
        gone["a"].set()
        threads["a"].join(5)
        assert cancelled == ["a"] and line.waiting == 2
        gone["b"].set()  # as the slot is handed over: either way, it goes on to c
    threads["b"].join(5)
    threads["c"].join(5)
    assert served == ["c"] and cancelled == ["a", "b"] and line.waiting == 0
    with line.turn():  # the slot came back
        with pytest.raises(ZeroDivisionError):  # a should_stop that fails leaves the line too

            def broken():
                raise ZeroDivisionError

            with line.turn(should_stop=broken):
                pass
        assert line.waiting == 0
    with line.turn():
        pass
