"""``Speech``: what a synthesis gives back, a waveform, where its pieces lie, and what it took."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from omnivoice_rt.captions import Caption


@dataclass
class Speech:
    """A synthesis result: float32 mono waveform at ``sample_rate``, the captions of its pieces
    (:mod:`omnivoice_rt.captions`: the samples each occupies, and its text) and what it took."""

    waveform: np.ndarray
    sample_rate: int
    codes: list[np.ndarray]  # (C, T) codes of each chunk
    metadata: dict = field(default_factory=dict)
    captions: list[Caption] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return self.waveform.shape[-1] / self.sample_rate

    @classmethod
    def join(cls, parts: list[Speech]) -> Speech:
        """The pieces of :meth:`OmniVoiceONNX.stream` as one result (the last piece's metadata,
        with the whole's frames, chunks and length)."""
        if not parts:
            raise ValueError("no pieces to join")
        waveform = np.concatenate([part.waveform for part in parts])
        captions, at = [], 0
        for part in parts:
            captions += [caption.moved(at) for caption in part.captions]
            at += part.waveform.shape[-1]
        codes = [c for part in parts for c in part.codes]
        metadata = {
            **parts[-1].metadata,
            "frames": int(sum(c.shape[1] for c in codes)),
            "chunks": len(codes),
            "steps": sum(part.metadata.get("steps", 0) for part in parts),
        }
        metadata["seconds"] = waveform.shape[-1] / parts[0].sample_rate
        total = metadata.get("timings", {}).get("total", 0.0)
        metadata["rtf"] = total / max(metadata["seconds"], 1e-9)
        return cls(waveform, parts[0].sample_rate, codes, metadata, captions)
