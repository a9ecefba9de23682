"""Turns on the CPU between the generations under way: who computes next, decided at every
boundary of the work (after each unmasking step, between a piece's stages), so that one listener
does not hold everyone else.

The line (``line.py``) admits ``--concurrency`` generations at a time, first come first served;
each admitted generation is a :class:`Generation` that computes only while it holds the CPU's
one turn (``take``), gives it back whenever it hands a piece to its door (``give``, taking it
again at its next boundary), and at each boundary (``boundary``) goes on or hands the turn to a
waiting generation that ranks before it.
A generation's state is its own, never a thread's: whichever thread calls ``next()`` on its
pieces takes the turn for it.

The policy (``--turns step``, docs/design.md "Fair turns", chosen by measurement): a generation
whose listener has no audio to play (none yet, or it has played all it was sent) ranks before one
whose listener holds audio it has not played; among equals, the one that has had the least CPU
since its listener last got audio (least attained service) goes first; then the one that came
first. A newcomer gets the CPU at the next boundary, and a long request's next piece waits only
while its listener has audio buffered. ``--turns shortest`` ranks equals by the least work left
before their next audio instead (the runtime says how much at every boundary): better medians,
but a long piece starves behind a stream of short ones. ``--turns request`` is the behaviour
before turns: an admitted generation computes from its first step to its last without pausing
(``--concurrency`` of them side by side).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable

from omnivoice_rt.server.line import wait_or_leave

logger = logging.getLogger(__name__)

TURNS = "step"  # the default policy, chosen by measurement (docs/design.md section 6)
# a streamed long text's first piece, in seconds of speech (its later pieces upstream's ~15 s):
# its first audio while others share the CPU, measured there too; 0: upstream's pieces
FIRST_PIECE_S = 4.0
POLICIES = {
    "step": "turns at every boundary: listeners with nothing to play first, then the least CPU "
    "had since their last audio (least attained service)",
    "shortest": "turns at every boundary: listeners with nothing to play first, then the least "
    "work left before their next audio (shortest remaining work)",
    "request": "a request computes from its first step to its last (the behaviour before turns)",
}


class Listener:
    """A client's audio clock: the moment the audio it was sent runs out, played in real time
    from each piece's arrival (a piece that comes after the last ran out plays from then on, as
    a player resumes). A Wyoming connection's sentences share one: its listener is the
    connection."""

    def __init__(self):
        self.until: float | None = None  # time.monotonic() when its audio runs out
        self._lock = threading.Lock()

    def sent(self, seconds: float) -> None:
        with self._lock:
            now = time.monotonic()
            self.until = max(self.until or now, now) + seconds

    def buffered(self) -> float:
        """Seconds of audio sent and not yet played (0.0 before the first)."""
        with self._lock:
            return 0.0 if self.until is None else max(0.0, self.until - time.monotonic())


class Generation:
    """One admitted request's share of the CPU: it computes between ``take`` and ``give`` and
    pauses at a ``boundary`` when another generation ranks before it (:class:`Turns`).
    ``should_stop()``: its client went away (a parked generation then leaves, ``Cancelled``)."""

    def __init__(self, turns: Turns, listener: Listener, should_stop: Callable[[], bool] | None):
        self.turns, self.listener, self.should_stop = turns, listener, should_stop
        self.order = next(turns.arrivals)  # first come, first served among equals
        self.attained = 0.0  # CPU seconds since its listener last got audio
        # the work left before its next audio, as its last boundary said (runtime frame-steps);
        # 0 before its first: a newcomer computes until it can say
        self.left = 0.0
        self.holding = False
        self.started = False  # it has held the CPU once
        self.since = 0.0  # time.monotonic() when it last took the CPU
        self._handed = threading.Event()

    def rank(self) -> tuple:
        """Smaller goes first: nothing to play, then the least CPU had since its last audio
        (``shortest``: the least work left before its next), then arrival; when the server is
        stopping (``Turns.draining``), arrival alone: the oldest finish first."""
        if self.turns.draining:
            return (False, 0.0, self.order)
        work = self.left if self.turns.policy == "shortest" else self.attained
        return (self.listener.buffered() > 0.0, work, self.order)

    def take(self) -> None:
        self.turns.take(self)

    def give(self) -> None:
        self.turns.give(self)

    def boundary(self, left: float = 0.0) -> None:
        """The runtime's ``boundary(left)``: go on, or park for one that ranks before it."""
        self.left = left
        self.turns.boundary(self)

    def delivered(self, seconds: float) -> None:
        """A piece of ``seconds`` went to its listener: the service it attained starts again."""
        self.listener.sent(seconds)
        self.attained = 0.0

    def __enter__(self) -> Generation:
        return self

    def __exit__(self, *_exc) -> None:
        if self.holding:
            self.give()


class Turns:
    """The CPU's one turn among the admitted generations (``policy``: a key of ``POLICIES``)."""

    def __init__(self, policy: str = TURNS, waited: Callable[[float, bool], None] | None = None):
        if policy not in POLICIES:
            raise ValueError(f"unknown turns policy {policy!r}: one of {', '.join(POLICIES)}")
        self.policy = policy
        # told each wait for the CPU: its seconds, and whether it was the generation's first
        self.waited = waited
        self.draining = False  # SIGTERM came: those under way finish oldest first
        self.arrivals = itertools.count()
        self._holder: Generation | None = None
        self._parked: list[Generation] = []
        self._lock = threading.Lock()

    @property
    def parked(self) -> int:
        """Generations under way waiting for the CPU."""
        return len(self._parked)

    def generation(
        self, listener: Listener | None = None, should_stop: Callable[[], bool] | None = None
    ) -> Generation:
        return Generation(self, listener or Listener(), should_stop)

    def take(self, generation: Generation) -> None:
        """Hold the CPU: at once when nobody does, else parked until it is handed over."""
        if self.policy == "request":
            generation.holding = True
            return
        with self._lock:
            if self._holder is None:
                first = not generation.started
                self._hold(generation)
            else:
                generation._handed.clear()
                self._parked.append(generation)
                first = None
        if first is None:
            self._park(generation)
        elif first and self.waited is not None:
            self.waited(0.0, True)  # its first turn came at once

    def give(self, generation: Generation) -> None:
        """Give the CPU back: to the parked generation that ranks first, or to nobody."""
        if self.policy == "request":
            generation.holding = False
            return
        with self._lock:
            self._let_go(generation)
            self._hand_on()

    def boundary(self, generation: Generation) -> None:
        """Go on, or hand the CPU to a parked generation that ranks before this one and park; a
        generation that gave the CPU back (its door had a piece to send) takes it here, at the
        first boundary of its next piece, so that a stream's end, which computes nothing, never
        waits for a turn."""
        if self.policy == "request":
            return
        if not generation.holding:
            self.take(generation)
            return
        with self._lock:
            if not self._parked:
                return
            self._let_go(generation)
            first = min(self._parked, key=Generation.rank)
            if first.rank() >= generation.rank():
                self._hold(generation)
                return
            generation._handed.clear()
            self._parked.append(generation)
            self._hand_on()
        self._park(generation)

    # ------------------------------------------------------------------ under the lock

    def _hold(self, generation: Generation) -> None:
        self._holder, generation.holding, generation.since = generation, True, time.monotonic()
        generation.started = True

    def _let_go(self, generation: Generation) -> None:
        if self._holder is generation:
            generation.attained += time.monotonic() - generation.since
            self._holder = None
        generation.holding = False

    def _hand_on(self) -> None:
        if self._holder is None and self._parked:
            first = min(self._parked, key=Generation.rank)
            self._parked.remove(first)
            self._hold(first)
            first._handed.set()

    # ------------------------------------------------------------------ parked

    def _park(self, generation: Generation) -> None:
        """Wait until the CPU is handed over (``line.wait_or_leave``): a generation whose client
        left leaves (:class:`Cancelled`), handing on what it got."""
        first, parked = not generation.started, time.monotonic()
        try:
            wait_or_leave(generation._handed, generation.should_stop, "its turn", "for its turn")
        except BaseException:
            with self._lock:
                if generation in self._parked:
                    self._parked.remove(generation)
                else:  # handed over as it left: on to the next
                    self._let_go(generation)
                    self._hand_on()
            raise
        if self.waited is not None:
            self.waited(time.monotonic() - parked, first)
