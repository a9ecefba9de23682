"""Turns on the CPU (``omnivoice_rt/server/turns.py``): who computes next among the generations
under way. Generations here are threads that log what they compute; the order of the log is the
policy's. The same scheduler under real synthesis: tests/server/test_turns_served.py."""

from __future__ import annotations

import threading
import time

import pytest

from omnivoice_rt.errors import Cancelled
from omnivoice_rt.server.turns import Generation, Listener, Turns


def work(generation: Generation, name: str, steps: int, log: list, started=None) -> None:
    """A generation of ``steps`` equal steps, each logged, with a boundary after each saying
    the steps left (as the runtime's ``boundary(left)`` does, in its frame-steps)."""
    with generation:
        generation.take()
        if started is not None:
            started.set()
        for n in range(steps):
            log.append(name)
            time.sleep(0.002)
            generation.boundary(float(steps - n - 1))


def parked(turns: Turns, count: int) -> None:
    deadline = time.monotonic() + 10
    while turns.parked < count:
        assert time.monotonic() < deadline, "the generation never parked"
        time.sleep(0.001)


def behind_a_holder(turns: Turns, arriving: dict, steps: int) -> list:
    """The generations of ``arriving`` (name: generation) come in that order while the CPU is
    held, park, and compute ``steps`` steps each once it is given back: the order they computed
    in."""
    log, holder = [], turns.generation()
    holder.take()
    threads = [
        threading.Thread(target=work, args=(generation, name, steps, log))
        for name, generation in arriving.items()
    ]
    for n, thread in enumerate(threads):
        thread.start()
        parked(turns, n + 1)
    holder.give()
    for thread in threads:
        thread.join(10)
    return log


@pytest.mark.parametrize("policy", ["step", "shortest"])
def test_a_newcomer_computes_at_the_next_boundary_and_finishes_first(policy):
    turns, log = Turns(policy), []
    long, started = turns.generation(), threading.Event()
    first = threading.Thread(target=work, args=(long, "long", 60, log, started))
    first.start()
    started.wait(10)
    while len(log) < 20:  # the long one has had CPU and has work left: a newcomer goes first
        time.sleep(0.001)
    short = threading.Thread(target=work, args=(turns.generation(), "short", 3, log))
    short.start()
    short.join(10)
    first.join(10)
    at = log.index("short")
    assert log[at : at + 3] == ["short"] * 3  # the short one ran to its end at once
    assert log.count("long") == 60 and log[-1] == "long"
    assert turns.parked == 0


def test_shortest_work_left_finishes_equals_one_after_the_other():
    """``--turns shortest``: two equal generations that both had nothing to play: the first to
    come runs to its end once both have said their work, instead of sharing the CPU."""
    turns = Turns("shortest")
    log = behind_a_holder(turns, {"a": turns.generation(), "b": turns.generation()}, 6)
    # a's first step, b's first (it had said nothing yet), then a to its end, then b
    assert log == ["a", "b"] + ["a"] * 5 + ["b"] * 5, log


def test_least_attained_service_shares_the_cpu_among_equals():
    """``--turns step``: two generations that both had nothing to play alternate: whoever has
    had less CPU goes."""
    turns = Turns("step")
    log = behind_a_holder(turns, {"a": turns.generation(), "b": turns.generation()}, 6)
    assert log[0] == "a"  # first come among equals
    assert log.count("a") == log.count("b") == 6
    switches = sum(1 for x, y in zip(log, log[1:], strict=False) if x != y)
    assert switches >= 6, log  # they take turns, not one after the other


def test_a_listener_with_audio_to_play_waits_for_one_with_none():
    buffered = Listener()
    buffered.sent(60.0)  # a minute of audio sent just now: a minute to play
    turns = Turns("step")
    streams = {"buffered": turns.generation(buffered), "hungry": turns.generation()}
    log = behind_a_holder(turns, streams, 3)  # the buffered one came first
    assert log == ["hungry"] * 3 + ["buffered"] * 3


def test_a_listener_resumes_from_a_piece_that_came_after_it_ran_dry():
    """A player that ran out waits, then plays the next piece from its arrival: that piece is
    all buffered (a clock started at the first piece would count the silence as played)."""
    listener = Listener()
    listener.sent(0.05)
    time.sleep(0.2)  # it ran dry 0.15 s ago
    listener.sent(5.0)
    assert 4.9 < listener.buffered() <= 5.0


def test_a_listener_that_played_all_it_was_sent_ranks_as_a_newcomer():
    listener = Listener()
    listener.sent(0.05)
    time.sleep(0.1)  # played it all
    assert listener.buffered() == 0.0
    generation = Turns("step").generation(listener)
    generation.attained = 0.0
    assert generation.rank()[0] is False


def test_a_parked_generation_whose_client_left_leaves_and_the_cpu_goes_on():
    turns, log = Turns("step"), []
    holder = turns.generation()
    holder.take()
    gone = threading.Event()
    leaving = turns.generation(should_stop=gone.is_set)
    outcome = {}

    def wait():
        try:
            leaving.take()
        except Cancelled as exc:
            outcome["left"] = str(exc)

    thread = threading.Thread(target=wait)
    thread.start()
    parked(turns, 1)
    staying = threading.Thread(target=work, args=(turns.generation(), "stays", 2, log))
    staying.start()
    parked(turns, 2)
    gone.set()
    thread.join(10)
    assert "abandoned while it waited" in outcome["left"] and turns.parked == 1
    holder.give()
    staying.join(10)
    assert log == ["stays", "stays"] and turns.parked == 0


def test_a_failing_generation_gives_the_cpu_back():
    turns, log = Turns("step"), []
    failing = turns.generation()
    with pytest.raises(RuntimeError), failing:
        failing.take()
        raise RuntimeError("post-processing failed")
    work(turns.generation(), "next", 1, log)  # would wait forever if the CPU were still held
    assert log == ["next"]


def test_request_turns_never_pause():
    """``--turns request``: a generation computes from its first step to its last."""
    turns = Turns("request")
    a, b = turns.generation(), turns.generation()
    a.take()
    b.take()  # side by side, as --concurrency slots did before turns
    a.boundary()
    assert a.holding and b.holding and turns.parked == 0


def test_an_unknown_policy_is_one_clear_error():
    with pytest.raises(
        ValueError, match="unknown turns policy 'fair': one of step, shortest, request"
    ):
        Turns("fair")


def test_when_the_server_stops_the_oldest_under_way_finish_first():
    """SIGTERM's drain (``Service.stop``): arrival alone decides, whatever each has had."""
    turns = Turns("step")
    old, new = turns.generation(), turns.generation()
    old.attained = 30.0  # it has had much more CPU than the newcomer
    turns.draining = True
    log = behind_a_holder(turns, {"new": new, "old": old}, 3)
    assert log == ["old"] * 3 + ["new"] * 3


def test_a_stream_that_gave_the_cpu_back_takes_it_at_its_next_boundary():
    """Between pieces a stream holds no CPU (its door sends one); its end computes nothing and
    waits for nobody, and its next piece takes the CPU at its first boundary, in turn."""
    turns = Turns("step")
    stream, other = turns.generation(), turns.generation()
    stream.take()
    stream.give()  # a piece went to the door
    other.take()  # someone else computes meanwhile
    with stream:  # the stream's end: nothing to compute, no wait
        pass
    assert other.holding and turns.parked == 0
    resumed = threading.Thread(target=stream.boundary, args=(10.0,))
    resumed.start()  # its next piece's first boundary: it waits for the CPU
    parked(turns, 1)
    assert not stream.holding
    other.give()
    resumed.join(10)
    assert stream.holding and not resumed.is_alive()
    stream.give()
