"""An acoustic model the user adds as the aligner: a CTC model in ONNX (such as the multilingual
MMS forced-alignment model, exported), its words placed by CTC forced alignment.

    aligner = CtcAligner.load("mms-fa/")     # a folder (or a Hub repo) with the two files below
    words = aligner.align(waveform, 24_000, ["hello", "world"])

The folder holds ``model.onnx`` (input: float32 samples ``[1, samples]`` at its rate; output:
``[1, frames, labels]`` logits or log-probabilities) and ``aligner.json``::

    {"labels": ["-", "a", "b", ...], "blank": 0, "sample_rate": 16000}

A word is spelled in the model's labels: lower-cased, accents taken off where the labels lack
them, characters the labels lack left out (MMS-FA's labels are romanized Latin letters: give
such a model romanized text, or use one whose labels are your script's). A word with no label
left is unplaced. The alignment is the most likely path through the word's labels with blanks
between (Viterbi over the CTC states), bounded by ``MAX_CTC_CELLS``.
"""

from __future__ import annotations

import functools
import json
import unicodedata
from pathlib import Path

import numpy as np

from omnivoice_rt.errors import AlignError, ArtifactError

CTC_FILES = ["model.onnx", "aligner.json"]
MAX_CTC_CELLS = 40_000_000  # frames x states of one alignment: its back-pointers, one byte each
# what a path pays to leave a word out, in log-probability: a word is unplaced where the model
# finds the recording's most likely path without it more than 1,000 times as likely as with it
UNSAID: float | None = float(np.log(1_000))
CTC_HINT = (
    "an aligner folder holds model.onnx (a CTC acoustic model) and aligner.json "
    '({"labels": [...], "blank": 0, "sample_rate": 16000}); docs/design.md section 10'
)


class CtcAligner:
    """One loaded CTC model and its labels."""

    def __init__(self, session, labels: list[str], blank: int, sample_rate: int, source: str):
        self.session, self.labels, self.blank = session, labels, blank
        self.sample_rate, self.source = sample_rate, source
        self.index = {label: n for n, label in enumerate(labels) if n != blank}
        # a letter in either case where the labels have one case only (wav2vec2's A-Z)
        for label, n in list(self.index.items()):
            self.index.setdefault(label.lower(), n)

    @classmethod
    def load(cls, source: str | Path) -> CtcAligner:
        """From a local folder, else a Hub repo with ``CTC_FILES``; ``ArtifactError`` naming
        what is missing."""
        import onnxruntime as ort

        from omnivoice_rt.artifacts.hub import download

        folder = Path(source)
        if not folder.is_dir():
            folder = download(str(source), CTC_FILES, hint=CTC_HINT)
        missing = [name for name in CTC_FILES if not (folder / name).is_file()]
        if missing:
            raise ArtifactError(f"aligner {source}: {', '.join(missing)} missing; {CTC_HINT}")
        try:
            config = json.loads((folder / "aligner.json").read_text(encoding="utf-8"))
            labels, blank = [str(x) for x in config["labels"]], int(config.get("blank", 0))
            rate = int(config.get("sample_rate", 16000))
        except (ValueError, KeyError, TypeError) as exc:
            raise ArtifactError(
                f"aligner {source}: aligner.json is not readable ({exc}); {CTC_HINT}"
            ) from None
        if not 0 <= blank < len(labels) or rate <= 0:
            raise ArtifactError(
                f"aligner {source}: its blank must be a label's index and its sample_rate above "
                f"0; {CTC_HINT}"
            )
        options = ort.SessionOptions()
        options.log_severity_level = 3
        try:
            session = ort.InferenceSession(
                str(folder / "model.onnx"), options, ["CPUExecutionProvider"]
            )
        except Exception as exc:  # noqa: BLE001 - ONNX Runtime's errors are not ValueErrors
            raise ArtifactError(
                f"aligner {source}: model.onnx is not a model ONNX Runtime loads "
                f"({str(exc)[:200]}); {CTC_HINT}"
            ) from None
        return cls(session, labels, blank, rate, str(source))

    def spelled(self, word: str) -> list[int]:
        """``word``'s labels: lower-cased, an accent taken off where the labels lack the letter
        with it, characters the labels lack left out, and so are punctuation marks but the
        apostrophe (labels such as MMS-FA's ``*``, any sound, or wav2vec2's ``|``, a word's end,
        are the model's own tokens, not the text's)."""
        ids = []
        for char in word.lower():
            if not (char.isalnum() or char == "'"):
                continue
            if char not in self.index:
                char = unicodedata.normalize("NFKD", char)[:1]
            if char in self.index:
                ids.append(self.index[char])
        return ids

    def emissions(self, waveform: np.ndarray, sample_rate: int) -> tuple[np.ndarray, float]:
        """The model's log-probabilities ``[frames, labels]`` and the seconds a frame covers
        (no frame where the recording is too short for the model)."""
        from omnivoice_rt.audio.formats import resampled

        audio = resampled(waveform, sample_rate, self.sample_rate).astype(np.float32)
        if audio.size < self.sample_rate // 20:  # under 50 ms: no word to find
            return np.zeros((0, len(self.labels)), np.float32), 0.0
        audio = (audio - audio.mean()) / (audio.std() + 1e-7)  # as wav2vec2's feature extractor
        name = self.session.get_inputs()[0].name
        try:
            output = self.session.run(None, {name: audio[None]})[0]
        except Exception as exc:  # noqa: BLE001 - ONNX Runtime's errors are not ValueErrors
            raise AlignError(f"the aligner's model could not run: {str(exc)[:200]}") from None
        if output.ndim != 3 or output.shape[-1] != len(self.labels):
            raise ArtifactError(
                f"aligner {self.source}: model.onnx gives shape {output.shape}, not [1, frames, "
                f"{len(self.labels)}] for aligner.json's {len(self.labels)} labels; {CTC_HINT}"
            )
        logits = output[0].astype(np.float32)
        shifted = logits - logits.max(1, keepdims=True)
        log_probs = shifted - np.log(np.exp(shifted).sum(1, keepdims=True))
        return log_probs, audio.size / self.sample_rate / max(len(log_probs), 1)

    def align(self, waveform: np.ndarray, sample_rate: int, words: list[str]) -> list:
        """Each word's (start, end) in seconds, None where it has no label, the model hears it
        nowhere (``UNSAID``) or the recording is too short for the labels."""
        spelled = [self.spelled(word) for word in words]
        said = [ids for ids in spelled if ids]
        if not said:
            return [None] * len(words)
        log_probs, hop = self.emissions(waveform, sample_rate)
        spans = forced_align(log_probs, said, self.blank, UNSAID) if len(log_probs) else None
        if spans is None:
            return [None] * len(words)
        found = iter(spans)
        return [
            None if not ids or (span := next(found)) is None
            else (round(span[0] * hop, 3), round((span[1] + 1) * hop, 3))
            for ids in spelled
        ]  # fmt: skip


def forced_align(
    log_probs: np.ndarray, words: list[list[int]], blank: int, unsaid: float | None = None
) -> list | None:
    """CTC forced alignment: for each word (its tokens), the first and last frame of its
    tokens on the most likely path through the words' tokens with blanks between (a token
    repeated needs a blank between its two); None for a word the path leaves out, and None for
    all where the frames are too few. ``log_probs``: ``[frames, labels]``; ``unsaid``: what a
    path pays, in log-probability, to leave a word out (None: every word is on it)."""
    tokens = [t for ids in words for t in ids]
    n, states = len(log_probs), 2 * len(tokens) + 1
    if n * states > MAX_CTC_CELLS:
        raise AlignError(
            f"{n} frames by {len(tokens)} letters is too large to align at once; align it in parts"
        )
    labels = np.full(states, blank, np.int64)
    labels[1::2] = tokens
    moves = _moves(labels, [len(ids) for ids in words], unsaid)
    score = log_probs[0, labels] + moves.enter
    back = np.zeros((n, states), np.int8)  # which move reached each state: a row of moves.source
    across = np.arange(states)
    for t in range(1, n):
        came = score[moves.source] + moves.cost
        back[t] = np.argmax(came, 0)
        score = came[back[t], across] + log_probs[t, labels]
    end = int(np.argmax(score + moves.leave))
    if not np.isfinite(score[end] + moves.leave[end]):
        return None
    path = np.empty(n, np.int64)
    for t in range(n - 1, -1, -1):
        path[t] = end
        end = moves.source[back[t, end], end]
    spans, at = [], 0
    for ids in words:
        on = np.flatnonzero((path >= 2 * at + 1) & (path <= 2 * (at + len(ids)) - 1))
        spans.append((int(on[0]), int(on[-1])) if len(on) else None)
        at += len(ids)
    return spans


class _Moves:
    """The CTC trellis's moves into each state: ``source`` ``[moves, states]`` (the state each
    move comes from) and ``cost`` (what it costs: 0, -inf where the move cannot reach the
    state); ``enter`` and ``leave``: what a path pays to start and to end at each state."""

    def __init__(self, source: np.ndarray, cost: np.ndarray, enter: np.ndarray, leave: np.ndarray):
        self.source, self.cost, self.enter, self.leave = source, cost, enter, leave


def _moves(labels: np.ndarray, lengths: list[int], unsaid: float | None) -> _Moves:
    """A path stays, goes on one state, or two onto a token unlike the one before (past a
    blank); it starts at the first blank or token and ends at the last token or the blank after
    it. Where ``unsaid`` is given, a path may also leave a word out, for ``unsaid`` each: from
    the blank before it, or the token before that, onto the blank after it; or by starting
    after it or ending before it."""
    states, inf = len(labels), -np.inf
    at = np.arange(states)
    source = np.stack([at, np.maximum(at - 1, 0), np.maximum(at - 2, 0)])
    cost = np.zeros((3, states))
    cost[1, 0] = cost[2, :2] = inf
    cost[2, 2:] = np.where((at[2:] % 2 == 1) & (labels[2:] != labels[:-2]), 0, inf)
    enter, leave = np.full(states, inf), np.full(states, inf)
    enter[:2] = leave[-2:] = 0
    if unsaid is None:
        return _Moves(source, cost, enter, leave)
    bounds = 2 * np.cumsum([0, *lengths])  # the blank before each word, and the last one
    over = np.stack([at, at])  # over a word: from the blank before it, from the token before
    over_cost = np.full((2, states), inf)
    over[0, bounds[1:]] = bounds[:-1]
    over_cost[0, bounds[1:]] = -unsaid
    over[1, bounds[2:]] = bounds[1:-1] - 1
    over_cost[1, bounds[2:]] = -unsaid
    words = len(lengths)
    for k in range(words):  # start after the first k + 1 words; end before the last words - k
        enter[bounds[k + 1]] = -unsaid * (k + 1)
        leave[max(bounds[k] - 1, 0) : bounds[k] + 1] = -unsaid * (words - k)
    return _Moves(np.vstack([source, over]), np.vstack([cost, over_cost]), enter, leave)


@functools.lru_cache(maxsize=2)
def loaded(source: str) -> CtcAligner:
    """The aligner of ``source``, loaded once a process."""
    return CtcAligner.load(source)
