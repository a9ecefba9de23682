"""``Speech``: what a synthesis gives back, a waveform, where its pieces lie, and what it took."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from omnivoice_rt.captions import Caption
from omnivoice_rt.voice_prompt import MAX_PROMPT_FRAMES, VoicePrompt


class NoVoiceError(ValueError):
    """A result whose voice cannot be kept (no codes, or a first piece too long for a prompt)."""


@dataclass
class Speech:
    """A synthesis result: float32 mono waveform at ``sample_rate``, the captions of its pieces
    (:mod:`omnivoice_rt.captions`: the samples each occupies, and its text) and what it took."""

    waveform: np.ndarray
    sample_rate: int
    codes: list[np.ndarray]  # (C, T) codes of each chunk
    metadata: dict = field(default_factory=dict)
    captions: list[Caption] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)  # what each chunk says, as the model read it
    # each word's place (``align.Word``), once :meth:`align_words` has found them; else None
    words: list | None = None

    @property
    def seconds(self) -> float:
        return self.waveform.shape[-1] / self.sample_rate

    def voice_prompt(self) -> VoicePrompt:
        """This result's voice, to speak in again (``voice_prompt=`` of a later call, or a voice
        of the library): its first piece's codes and what that piece says, as a long text's later
        pieces take the first one for their reference, and the loudness of that piece's audio.
        An auto voice or a designed one is then the same voice in every call."""
        if not self.codes or len(self.texts) != len(self.codes):
            raise NoVoiceError("this result has no codes of its own to keep a voice from")
        codes = self.codes[0]
        if codes.shape[1] > MAX_PROMPT_FRAMES:
            raise NoVoiceError(
                f"its first piece is {codes.shape[1] / 25:.1f} s; a voice is kept from a piece of "
                f"at most {MAX_PROMPT_FRAMES / 25:g} s (shorter pieces: a shorter duration)"
            )
        first = self.captions[0] if self.captions else None
        audio = self.waveform[first.start_sample : first.end_sample] if first else self.waveform
        rms = float(np.sqrt(np.mean(np.square(audio, dtype=np.float64)))) if audio.size else 0.1
        return VoicePrompt(np.asarray(codes, np.int64), self.texts[0], rms)

    def align_words(self, language: str | None = None, model: str | None = None) -> list:
        """Every word of this result placed in its audio, piece by piece (``omnivoice_rt.align``:
        the ``align`` extra, eSpeak NG, or ``model``, a CTC model's folder), kept in
        :attr:`words` and returned: start and end in seconds, None where a word was not found.
        ``language``: a code ('en'), else each text's script chooses."""
        from omnivoice_rt.align import speech_words

        self.words = speech_words(self.waveform, self.sample_rate, self.captions, language, model)
        return self.words

    @classmethod
    def join(cls, parts: list[Speech]) -> Speech:
        """The pieces of :meth:`OmniVoiceONNX.stream` as one result (the last piece's metadata,
        with the whole's frames, pieces and length)."""
        if not parts:
            raise ValueError("no pieces to join")
        waveform = np.concatenate([part.waveform for part in parts])
        captions, at = [], 0
        for part in parts:
            captions += [caption.moved(at) for caption in part.captions]
            at += part.waveform.shape[-1]
        codes = [c for part in parts for c in part.codes]
        texts = [t for part in parts for t in part.texts]
        metadata = {
            **parts[-1].metadata,
            "frames": int(sum(c.shape[1] for c in codes)),
            "pieces_in_result": len(codes),
            "chunks": len(codes),  # the older name of "pieces_in_result"
            "steps": sum(part.metadata.get("steps", 0) for part in parts),
        }
        metadata["seconds"] = waveform.shape[-1] / parts[0].sample_rate
        total = metadata.get("timings", {}).get("total", 0.0)
        metadata["rtf"] = total / max(metadata["seconds"], 1e-9)
        joined = cls(waveform, parts[0].sample_rate, codes, metadata, captions, texts)
        if all(part.words is not None for part in parts):  # each part's words, moved as its audio
            seconds = np.cumsum([0] + [part.seconds for part in parts[:-1]])
            joined.words = [
                w.moved(float(s))
                for part, s in zip(parts, seconds, strict=True)
                for w in part.words
            ]
        return joined
