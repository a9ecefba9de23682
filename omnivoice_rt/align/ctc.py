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
        """Each word's (start, end) in seconds, None where it has no label or the recording is
        too short for the labels."""
        spelled = [self.spelled(word) for word in words]
        tokens = [t for ids in spelled for t in ids]
        if not tokens:
            return [None] * len(words)
        log_probs, hop = self.emissions(waveform, sample_rate)
        frames = forced_align(log_probs, tokens, self.blank) if len(log_probs) else None
        if frames is None:
            return [None] * len(words)
        spans, at = [], 0
        for ids in spelled:
            if not ids:
                spans.append(None)
                continue
            first, last = frames[at], frames[at + len(ids) - 1]
            spans.append((round(first[0] * hop, 3), round((last[1] + 1) * hop, 3)))
            at += len(ids)
        return spans


def forced_align(log_probs: np.ndarray, tokens: list[int], blank: int) -> list | None:
    """CTC forced alignment: for each token, the first and last frame of the most likely path
    through ``tokens`` with blanks between (a token repeated needs a blank between its two);
    None where the frames are too few. ``log_probs``: ``[frames, labels]``."""
    n, states = len(log_probs), 2 * len(tokens) + 1
    if n * states > MAX_CTC_CELLS:
        raise AlignError(
            f"{n} frames by {len(tokens)} letters is too large to align at once; align it in parts"
        )
    labels = np.full(states, blank, np.int64)
    labels[1::2] = tokens
    skip = np.zeros(states, bool)  # a token state reachable from the token before, past a blank
    skip[3::2] = labels[3::2] != labels[1:-2:2]
    inf = -np.inf
    score = np.full(states, inf)
    score[:2] = log_probs[0, labels[:2]]
    back = np.zeros((n, states), np.int8)
    for t in range(1, n):
        one = np.r_[inf, score[:-1]]
        two = np.where(skip, np.r_[inf, inf, score[:-2]], inf)
        moves = np.stack([score, one, two])
        back[t] = np.argmax(moves, 0)
        score = moves.max(0) + log_probs[t, labels]
    end = states - 1 if score[-1] >= score[-2] else states - 2
    if not np.isfinite(score[end]):
        return None
    path = np.empty(n, np.int64)
    for t in range(n - 1, -1, -1):
        path[t] = end
        end -= back[t, end]
    spans = []
    for k in range(len(tokens)):
        at = np.flatnonzero(path == 2 * k + 1)
        spans.append((int(at[0]), int(at[-1])))
    return spans


@functools.lru_cache(maxsize=2)
def loaded(source: str) -> CtcAligner:
    """The aligner of ``source``, loaded once a process."""
    return CtcAligner.load(source)
