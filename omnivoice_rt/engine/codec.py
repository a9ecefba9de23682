"""The Higgs Audio V2 codec from its four ONNX graphs: 24 kHz audio <-> (8, frames) codes.

Each graph is fed by the names and shapes of the signature it was bound by
(:mod:`omnivoice_rt.artifacts.signatures`): a waveform input gets the rank its graph declares, a semantic
encoder that asks for ``waveform_16k`` gets the audio resampled to 16 kHz here (with torchaudio's
kernel, so the codes equal upstream's), the two feature streams are cut to the shorter one, and
codes are laid out as (C,1,T) or (1,C,T).

On load the decoder turns two frames into audio once: that measures the hop (samples per frame)
from the graph itself, not from any manifest, and refuses a decoder that gives NaN (reported for
the published fp16 one on arm64). It then measures the decoder's reach: how many frames either
side of a frame its codes change the audio (10 for Higgs Audio V2's convolutions). Long codes
are decoded in windows of ``DECODE_FRAMES`` frames with that reach of context either side, all
of one length, so that a 15 s piece takes the working memory of a 5 s one and its samples are
the whole decode's, equal to the sample (docs/performance.md "Decoding in windows"). Encoding
needs a length that is a multiple of the hop; callers trim to it, as upstream does for
references.
"""

from __future__ import annotations

import numpy as np

from omnivoice_rt.audio.ops import SAMPLE_RATE, resample
from omnivoice_rt.errors import ArtifactError

# Frames of audio one decoder call makes at most (5 s at 25 frames a second), its reach of
# context either side added. One call's working memory grows with its length: a 15 s piece
# took 328 MB over the loaded model in one call, 215 MB in windows of 125 frames (full-size
# codec, AMD EPYC Zen 5), 3-7% slower to decode, which is under 1% of a synthesis.
DECODE_FRAMES = 125
REACH_PROBE = 32  # frames either side of the changed frame when the reach is measured


class Codec:
    def __init__(self, graphs: dict, num_codebooks: int = 8, sample_rate: int = SAMPLE_RATE):
        self.graphs = graphs
        self.sample_rate = sample_rate
        self.num_codebooks = num_codebooks
        probe = self._decode(np.zeros((self.num_codebooks, 2), dtype=np.int64))
        if not np.all(np.isfinite(probe)):
            raise ArtifactError(
                f"{graphs['higgs_decoder'].path} decodes to NaN or infinite samples on this machine"
            )
        if probe.shape[-1] % 2 or probe.shape[-1] == 0:
            raise ArtifactError(
                f"{graphs['higgs_decoder'].path} turned 2 frames into {probe.shape[-1]} samples"
            )
        self.hop_length = probe.shape[-1] // 2
        self.reach = self._measure_reach()

    @property
    def frame_rate(self) -> float:
        return self.sample_rate / self.hop_length

    def _waveform(self, role: str, waveform: np.ndarray) -> dict:
        """``{input name: waveform}`` at the rate and rank the role's graph asks for."""
        graph = self.graphs[role]
        name = graph.signature.inputs[0]
        if graph.signature.sample_rate != self.sample_rate:
            waveform = resample(waveform, self.sample_rate, graph.signature.sample_rate)
        rank = len(graph.input(name).shape)
        return {
            name: np.ascontiguousarray(
                waveform.reshape((1,) * (rank - 1) + (-1,)), dtype=np.float32
            )
        }

    def encode(self, waveform: np.ndarray, boundary=None) -> np.ndarray:
        """(1, N) float32 at 24 kHz, N a multiple of the hop -> (C, N / hop) int64 codes.
        ``boundary()`` is called between the three graphs (a server's turns, ``server/turns.py``)."""
        boundary = boundary or (lambda: None)
        if waveform.shape[-1] % self.hop_length or waveform.shape[-1] == 0:
            raise ValueError(
                f"codec input must be a non-zero multiple of {self.hop_length} samples"
            )
        acoustic = self.graphs["acoustic_encoder"].run(
            None, self._waveform("acoustic_encoder", waveform)
        )[0]
        boundary()
        semantic = self.graphs["semantic_encoder"].run(
            None, self._waveform("semantic_encoder", waveform)
        )[0]
        boundary()
        frames = min(acoustic.shape[-1], semantic.shape[-1])
        quantizer = self.graphs["quantizer_encoder"]
        feeds = dict(
            zip(
                quantizer.signature.inputs,
                (acoustic[..., :frames], semantic[..., :frames]),
                strict=True,
            )
        )
        codes = quantizer.run(None, feeds)[0]
        return codes[:, 0] if quantizer.signature.codes_layout == "CBT" else codes[0]

    def _measure_reach(self) -> int | None:
        """Frames either side of a frame whose codes change the decoder's audio, one more for
        safety; None (decode in one call) where it reaches past ``REACH_PROBE``."""
        silent = np.zeros((self.num_codebooks, 2 * REACH_PROBE + 1), dtype=np.int64)
        changed = silent.copy()
        changed[:, REACH_PROBE] = 1
        moved = np.flatnonzero(self._decode(silent)[0] != self._decode(changed)[0])
        if moved.size == 0:
            return 1
        first, last = moved[0] // self.hop_length, moved[-1] // self.hop_length
        reach = max(REACH_PROBE - first, last - REACH_PROBE) + 1
        return reach if reach < REACH_PROBE else None

    def decode(self, codes: np.ndarray, boundary=None) -> np.ndarray:
        """(C, T) codes -> (1, T * hop) float32 waveform at 24 kHz: in windows of
        ``DECODE_FRAMES`` frames and the reach either side, every window of the same length (the
        last one moved back), ``boundary()`` called between them."""
        codes = np.asarray(codes, dtype=np.int64)
        frames = codes.shape[-1]
        if self.reach is None or frames <= DECODE_FRAMES + 2 * self.reach:
            return self._decode(codes)
        window = DECODE_FRAMES + 2 * self.reach
        waves, start = [], 0
        while start < frames:
            if start:
                (boundary or (lambda: None))()
            end = min(frames, start + DECODE_FRAMES + (self.reach if start == 0 else 0))
            at = min(max(0, start - self.reach), frames - window)
            wave = self._decode(codes[:, at : at + window])
            waves.append(wave[:, (start - at) * self.hop_length : (end - at) * self.hop_length])
            start = end
        return np.concatenate(waves, axis=1)

    def _decode(self, codes: np.ndarray) -> np.ndarray:
        """(C, T) codes -> (1, T * hop) waveform, in one call of the decoder."""
        decoder = self.graphs["higgs_decoder"]
        codes = codes[:, None] if decoder.signature.codes_layout == "CBT" else codes[None]
        out = decoder.run(None, {decoder.signature.inputs[0]: np.ascontiguousarray(codes)})[0]
        return out.reshape(1, -1).astype(np.float32)
