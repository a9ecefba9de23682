"""Dynamic time warping of a recording onto its template, in a band around the diagonal.

The recording is the time axis: each of its frames takes one template frame, the template
advancing 0, 1 or 2 frames a step (a word may be spoken at any slower rate and up to twice as
fast as the template's). Before each word's onset the template holds a gap (silence, real or
added) that a step may leap over whole, so a pause in the recording is absorbed by the gap and
a word spoken without one costs nothing for it. Memory: the band's back-pointers, one int16 a
cell; the costs are made a row at a time."""

from __future__ import annotations

import numpy as np

MAX_ADVANCE = 2  # template frames one recording frame may advance


def band_width(frames: int, template_frames: int, seconds: float, share: float, hop: float) -> int:
    """Half the band: ``seconds`` and ``share`` of the longer signal either side of the line."""
    return max(int(seconds / hop + share * max(frames, template_frames)), MAX_ADVANCE)


def reachable(frames: int, template_frames: int, half: int) -> bool:
    """Whether a recording of ``frames`` can take every template frame within the band: it
    advances the template at most ``MAX_ADVANCE`` frames a step (a text far longer than what
    was said cannot be warped onto it)."""
    return template_frames <= MAX_ADVANCE * max(frames - 1, 0) + half


def warp(
    recording: np.ndarray,
    template: np.ndarray,
    onsets: np.ndarray,
    gaps: np.ndarray,
    half: int,
    skips: np.ndarray | None = None,
    hop_weight: float = 0.0,
) -> np.ndarray:
    """For each recording frame, the template frame it takes. ``onsets``: the template frame
    where each word's sound starts; ``gaps``: where the silence before it starts (an onset is
    reached from anywhere in ``[gap - 1, onset)`` in one step); ``half``: half the band.
    ``skips``: what leaving each word out costs (inf: never): word k's onset leapt over from
    where word k-1 could start (``[gap - 1, onset)`` of word k-1), one word or two side by side,
    so that a word never spoken takes no frames (:func:`skipped` finds it on the path).
    ``hop_weight``: a two-frame step also pays this share of the distance of the frame it hops
    over (to the same recording frame): a word the recording does not say is then dearer to
    squeeze in at double speed, a word said fast barely so."""
    n, m = len(recording), len(template)
    if n == 0 or m == 0:
        return np.zeros(n, np.int64)
    slope = (m - 1) / max(n - 1, 1)
    lows = np.clip(np.round(np.arange(n) * slope).astype(np.int64) - half, 0, m - 1)
    width = min(2 * half + 1, m)
    lows = np.minimum(lows, m - width)
    inf = np.float32(np.inf)
    back = np.zeros((n, width), np.int16)  # how far back in the template each cell came from
    prev = np.full(m, inf, np.float32)
    prev[0] = _cost(recording[0], template[:1])[0]
    first_onset = int(onsets[0]) if len(onsets) else 0
    if first_onset < width:  # the template's leading silence may be leapt over
        prev[first_onset] = _cost(recording[0], template[first_onset : first_onset + 1])[0]
    sources = np.maximum(np.asarray(gaps, np.int64) - 1, 0)
    onsets = np.asarray(onsets, np.int64)
    for i in range(1, n):
        lo, hi = int(lows[i]), int(lows[i]) + width
        before = min(lo, 1)  # the frame before the band, where there is one
        costs = _cost(recording[i], template[lo - before : hi])
        best = prev[lo:hi].copy()
        step = np.zeros(width, np.int16)
        for advance in range(1, MAX_ADVANCE + 1):
            came = np.full(width, inf, np.float32)
            start = max(lo - advance, 0)
            came[start + advance - lo :] = prev[start : max(hi - advance, start)]
            if advance == MAX_ADVANCE and hop_weight:  # the frame hopped over: j - 1
                came[1 - before :] += hop_weight * costs[: len(costs) - 1]
            better = came < best
            best[better], step[better] = came[better], advance
        inside = (onsets >= lo) & (onsets < hi) & (sources < onsets)
        for onset, source in zip(onsets[inside], sources[inside], strict=True):
            segment = prev[source:onset]
            k = int(np.argmin(segment))
            if segment[k] < best[onset - lo]:
                best[onset - lo], step[onset - lo] = segment[k], onset - source - k
        if skips is not None:
            _leave_out(prev, best, step, lo, hi, onsets, sources, skips)
        row = np.full(m, inf, np.float32)
        row[lo:hi] = best + costs[before:]
        if not np.isfinite(row[lo:hi]).any():
            raise ValueError("the template cannot be reached within the band (reachable())")
        back[i] = step
        prev = row
    j = m - 1 if np.isfinite(prev[m - 1]) else int(lows[-1] + np.argmin(prev[lows[-1] :][:width]))
    path = np.zeros(n, np.int64)
    for i in range(n - 1, -1, -1):
        path[i] = j
        if i:
            j -= int(back[i, j - lows[i]])
    return path


def _leave_out(prev, best, step, lo, hi, onsets, sources, skips) -> None:
    """Into ``best`` and ``step`` (the row's cells from ``lo``): each onset in the band reached
    from where the word one or two before it could start (the cheapest cell of its
    ``[source, onset)``), for what leaving those words out costs."""
    targets = np.flatnonzero((onsets >= lo) & (onsets < hi))
    targets = targets[targets >= 2]  # the first word is never left out
    if not targets.size:
        return
    first = max(int(targets[0]) - 2, 1)
    words = np.arange(first, int(targets[-1]))
    edges = np.stack([sources[words], onsets[words]], 1).reshape(-1)
    starts = np.minimum.reduceat(prev, edges)[::2]  # each word's cheapest place to start
    starts[sources[words] >= onsets[words]] = np.inf  # a word with no room before it
    cost = np.full(len(targets), np.inf, np.float32)
    left = np.zeros(len(targets), np.int64)
    for back in (1, 2):  # leaving out one word, or two side by side
        lefts = targets - back
        usable = lefts >= 1
        leaving = skips[targets - 1] + (skips[lefts] if back == 2 else 0)
        here = np.where(usable, starts[np.maximum(lefts, first) - first] + leaving, np.inf)
        better = here < cost
        cost[better], left[better] = here[better], lefts[better]
    cells = onsets[targets] - lo
    for t, cell, c, w in zip(targets, cells, cost, left, strict=True):
        if c < best[cell]:
            k = int(np.argmin(prev[sources[w] : onsets[w]]))
            best[cell], step[cell] = c, onsets[t] - sources[w] - k


def skipped(
    path: np.ndarray, onsets: np.ndarray, gaps: np.ndarray, skips: np.ndarray
) -> np.ndarray:
    """Which words the path leaves out: no recording frame takes a template frame of their
    sound (``[onset, next gap)``; the last word is never left out), of those ``skips`` lets
    it leave out (a word that may not be, one frame long, is hopped by a two-frame step)."""
    ends = np.r_[gaps[1:], np.iinfo(np.int64).max]
    taken = np.searchsorted(path, ends) > np.searchsorted(path, onsets)
    return ~taken & np.isfinite(skips)


def _cost(frame: np.ndarray, frames: np.ndarray) -> np.ndarray:
    """The distance of one frame's features to each of ``frames``' (RMS over the features)."""
    return np.sqrt(((frames - frame) ** 2).mean(1)).astype(np.float32)
