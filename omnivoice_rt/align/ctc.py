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
# frames x states of one alignment: its back-pointers, one byte each (and where words may be left
# out, two bytes a frame and word, at most as much again; four past 16,383 words)
MAX_CTC_CELLS = 40_000_000
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
    repeated needs a blank between its two); None for all where the frames are too few.
    ``log_probs``: ``[frames, labels]``. With ``unsaid`` (a log-probability), words may be left
    out, each for ``unsaid``: the path is the most likely one of the words kept, over every
    choice of words to keep, and a word left out is None."""
    tokens = [t for ids in words for t in ids]
    n, states = len(log_probs), 2 * len(tokens) + 1
    if n * states > MAX_CTC_CELLS:
        raise AlignError(
            f"{n} frames by {len(tokens)} letters is too large to align at once; align it in parts"
        )
    labels = np.full(states, blank, np.int64)
    labels[1::2] = tokens
    trellis = _Trellis(labels, [len(ids) for ids in words], unsaid)
    score = log_probs[0, labels] + trellis.enter
    back = np.zeros((n, states), np.int8)  # which move reached each state: a row of source
    # where each word's first token was reached from over words left out (trellis.leap's)
    wide = np.int16 if 2 * len(words) < 2**15 else np.int32
    leaps = np.zeros((n, len(words) if unsaid is not None else 0), wide)
    across = np.arange(states)
    for t in range(1, n):
        came = score[trellis.source] + trellis.cost
        if unsaid is not None:
            landed, leaps[t] = trellis.leap(score)
            came = np.vstack([came, landed])
        back[t] = np.argmax(came, 0)
        score = came[back[t], across] + log_probs[t, labels]
    end = int(np.argmax(score + trellis.leave))
    if not np.isfinite(score[end] + trellis.leave[end]):
        return None
    path = np.empty(n, np.int64)
    for t in range(n - 1, -1, -1):
        path[t] = end
        move = back[t, end]
        end = trellis.origin(leaps[t], end) if move == LEAP else trellis.source[move, end]
    spans, at = [], 0
    for ids in words:
        on = np.flatnonzero((path >= 2 * at + 1) & (path <= 2 * (at + len(ids)) - 1))
        spans.append((int(on[0]), int(on[-1])) if len(on) else None)
        at += len(ids)
    return spans


LEAP = 3  # the move onto a word's first token over words left out (after the three below)


class _Trellis:
    """The CTC trellis's moves. Into each state: stay, go on one state, or two onto a token
    unlike the one before (past a blank): ``source`` ``[3, states]`` (where each comes from)
    and ``cost`` (0, -inf where it cannot reach the state); a path starts at the first blank
    or token and ends at the last token or the blank after it (``enter``, ``leave``: what it
    pays to start and end at each state). With ``unsaid``, also: start on a word's first
    token, or end on the blank or token before a word, leaving the words before or after it
    out; and ``leap``, onto a word's first token over words left out, from the blank or the
    token before them (a token only where unlike the one it reaches), ``unsaid`` a word."""

    def __init__(self, labels: np.ndarray, lengths: list[int], unsaid: float | None):
        states, inf = len(labels), -np.inf
        at = np.arange(states)
        self.source = np.stack([at, np.maximum(at - 1, 0), np.maximum(at - 2, 0)])
        self.cost = np.zeros((3, states))
        self.cost[1, 0] = self.cost[2, :2] = inf
        self.cost[2, 2:] = np.where((at[2:] % 2 == 1) & (labels[2:] != labels[:-2]), 0, inf)
        self.enter, self.leave = np.full(states, inf), np.full(states, inf)
        self.enter[:2] = self.leave[-2:] = 0
        self.states = states
        if unsaid is None:
            return
        count = len(lengths)
        self.blanks = 2 * np.cumsum([0, *lengths])[:-1]  # the blank before each word
        self.firsts = self.blanks + 1  # each word's first token
        self.scale = np.arange(count) * unsaid  # a word's index, in words left out
        self.enter[self.firsts] = -self.scale
        for k in range(count):  # end before word k: on the blank before it or the token before
            self.leave[max(self.blanks[k] - 1, 0) : self.blanks[k] + 1] = -(count - k) * unsaid
        # a token before a word (the last of the word before) may not leap onto a word's first
        # token with its label: one row for each such label, the token masked where alike
        lasts = np.r_[-1, labels[self.blanks[1:] - 1]]  # no token before the first word
        kinds, kind_of = np.unique(labels[self.firsts], return_inverse=True)
        self.alike = (lasts[None, :] == kinds[:, None])[:, :-1]
        self.rows = 1 + kind_of  # each word's row of what may leap onto it (row 0: blanks)
        # the arrivals' table: a row for the blanks and one for each label, a column for each
        # word reached, from the words before it (a column's value: its word less one's)
        self.table = np.full((1 + len(kinds), count), -np.inf)
        self.columns = np.broadcast_to(np.arange(count), self.table.shape)

    def leap(self, score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each state's best arrival over words left out from ``score`` (a frame's), -inf but on
        a word's first token; and for each word, where its first token's comes from: the word
        whose blank before it (k), or whose token before it (k + words), it leaves from."""
        table, words = self.table, np.arange(len(self.blanks))
        table[0, 1:] = score[self.blanks[:-1]] + self.scale[:-1]  # from the blank before word k
        before = np.r_[-np.inf, score[self.blanks[1:-1] - 1]] + self.scale[:-1]  # the token
        table[1:, 1:] = np.where(self.alike, -np.inf, before)
        best = np.maximum.accumulate(table, axis=1)  # each column: the best of those before it
        at = np.maximum.accumulate(np.where(table >= best, self.columns, 0), axis=1) - 1
        from_blank, from_token = best[0], best[self.rows, words]
        token_wins = from_token > from_blank
        landed = np.full(self.states, -np.inf)
        landed[self.firsts] = np.where(token_wins, from_token, from_blank) - self.scale
        return landed, np.where(token_wins, at[self.rows, words] + len(words), at[0])

    def origin(self, leaps: np.ndarray, state: int) -> int:
        """The state a word's first token ``state`` was reached from over words left out, by
        ``leaps`` (a frame's from ``leap``)."""
        k = int(leaps[np.searchsorted(self.firsts, state)])
        count = len(self.blanks)
        return int(self.blanks[k]) if k < count else int(self.blanks[k - count]) - 1


@functools.lru_cache(maxsize=2)
def loaded(source: str) -> CtcAligner:
    """The aligner of ``source``, loaded once a process."""
    return CtcAligner.load(source)
