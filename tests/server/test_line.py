"""The server's one line (``omnivoice_rt/server/line.py``), alone: the turns every door waits
for, in arrival order, a bound on who may wait, and a waiter whose client left dropping out; the
server's ``ClientLine``: one client's share of the slots and of the waiting places.
Through the doors: ``test_openai.py`` (two doors, one line), ``test_clients_that_leave.py``."""

from __future__ import annotations

import threading
import time

import pytest

from omnivoice_rt.errors import Busy, Cancelled
from omnivoice_rt.server.line import ClientLine, Line


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


class Requests:
    """Requests of named clients in a line, each in a thread, held in their slot until let go."""

    def __init__(self, line: Line):
        self.line, self.served, self.told, self.threads = line, [], {}, {}
        self.go: dict[str, threading.Event] = {}

    def send(self, name: str, client: str | None) -> None:
        """``name`` arrives (in line, or in a slot, before this returns)."""
        self.go[name] = threading.Event()
        before = (self.line.waiting, self.line.serving)

        def run():
            with self.line.turn(
                on_wait=lambda ahead: self.told.update({name: ahead}), client=client
            ):
                self.served.append(name)
                self.go[name].wait(10)

        self.threads[name] = threading.Thread(target=run)
        self.threads[name].start()
        wait_for(lambda: (self.line.waiting, self.line.serving) != before, 10)

    def finish(self, name: str) -> None:
        self.go[name].set()
        self.threads[name].join(10)


def test_one_client_holds_its_share_of_slots_and_others_pass_its_surplus():
    """Two slots, one a client: a's second and third wait, b and c (who came later) are served
    at once, a's keep their order, and nobody is left holding a slot in the count."""
    line = ClientLine(slots=2, max_waiting=8, per_client=1)
    requests = Requests(line)
    requests.send("a1", "a")
    requests.send("a2", "a")
    requests.send("a3", "a")
    assert (line.serving, line.waiting) == (1, 2)  # a slot free, a's surplus waiting
    requests.send("b1", "b")  # past a's two
    assert requests.served == ["a1", "b1"] and "b1" not in requests.told
    requests.finish("b1")  # the slot is free again: a may not take it
    assert (line.serving, line.waiting) == (1, 2)
    requests.send("c1", "c")
    requests.send("anon", None)  # a request that names no client: the line's order alone
    assert requests.served == ["a1", "b1", "c1"] and requests.told["anon"] == 4
    requests.finish("a1")  # a's slot: to a2 (first in line of those who may hold it)
    wait_for(lambda: requests.served[-1] == "a2", 10)
    requests.finish("c1")  # to anon, before a3 (a holds its one)
    wait_for(lambda: requests.served[-1] == "anon", 10)
    for name in ("a2", "a3", "anon"):
        requests.finish(name)
    assert requests.served == ["a1", "b1", "c1", "a2", "anon", "a3"]
    # what each was told: a1 ahead of a2, a1 and a2 ahead of a3 (other clients' do not count)
    assert requests.told["a2"] == 1 and requests.told["a3"] == 2
    assert (line.serving, line.waiting, line.held("a")) == (0, 0, 0) and not line._held


def test_one_client_holds_its_share_of_the_waiting_places():
    """Four waiting places, a client's share half of them (as 1 slot is of 2): a's third in
    line is turned away, b still finds places, then the line is full for everyone."""
    line = ClientLine(slots=2, max_waiting=4, per_client=1)
    assert line.share == 2
    requests = Requests(line)
    for name in ("a1", "a2", "a3"):
        requests.send(name, "a")
    with pytest.raises(Busy, match="busy with your requests: 2 are waiting already"):
        with line.turn(client="a"):
            pass
    for name in ("b1", "b2", "b3"):
        requests.send(name, "b")
    with pytest.raises(Busy, match="busy: 4 requests are waiting already"):
        with line.turn(client="c"):
            pass
    for name in ("a1", "b1", "a2", "b2", "a3", "b3"):
        requests.finish(name)
    assert sorted(requests.served) == ["a1", "a2", "a3", "b1", "b2", "b3"] and not line._held


def test_a_client_whose_request_leaves_the_line_keeps_its_count():
    line = ClientLine(slots=1, max_waiting=4, per_client=1)
    gone, left = threading.Event(), []
    requests = Requests(line)
    requests.send("a1", "a")

    def leave():
        try:
            with line.turn(should_stop=gone.is_set, client="a"):
                pass
        except Cancelled:
            left.append("a2")

    leaving = threading.Thread(target=leave)
    leaving.start()
    wait_for(lambda: line.waiting == 1, 10)
    gone.set()
    leaving.join(10)
    requests.finish("a1")
    assert left == ["a2"] and (line.serving, line.waiting) == (0, 0) and not line._held
    with line.turn(client="a"):  # its slot came back
        assert line.held("a") == 1


@pytest.mark.parametrize("per_client", [0, 3])
def test_a_share_outside_the_slots_is_refused(per_client):
    with pytest.raises(
        ValueError, match=f"per_client takes 1 to concurrency \\(2\\), not {per_client}"
    ):
        ClientLine(slots=2, max_waiting=4, per_client=per_client)
