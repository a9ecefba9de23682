"""The Higgs Audio V2 codec from its four ONNX graphs: 24 kHz audio <-> (8, frames) codes.

Encoding needs a length that is a multiple of the hop (960 samples, one 25 Hz frame); callers
trim to it, as upstream does for references.
"""

from __future__ import annotations

import numpy as np


class Codec:
    def __init__(self, sessions: dict, hop_length: int = 960, sample_rate: int = 24000):
        missing = [n for n in ("acoustic_encoder", "semantic_encoder", "quantizer_encoder", "higgs_decoder") if n not in sessions]
        if missing:
            raise ValueError(
                f"the artifact folder has no codec graphs {missing}; build them with "
                "`python build_artifacts.py --include-higgs` or download the audio_tokenizer/ folder"
            )
        self.sessions = sessions
        self.hop_length = hop_length
        self.sample_rate = sample_rate

    def encode(self, waveform: np.ndarray) -> np.ndarray:
        """(1, N) float32 at 24 kHz, N a multiple of the hop -> (C, N / hop) int64 codes."""
        if waveform.shape[-1] % self.hop_length or waveform.shape[-1] == 0:
            raise ValueError(f"codec input must be a non-zero multiple of {self.hop_length} samples")
        wav = np.ascontiguousarray(waveform.reshape(1, 1, -1), dtype=np.float32)
        acoustic = self.sessions["acoustic_encoder"].run(None, {"waveform": wav})[0]
        semantic = self.sessions["semantic_encoder"].run(None, {"waveform": wav})[0]
        feeds = {"acoustic_features": acoustic, "semantic_features": semantic}
        return self.sessions["quantizer_encoder"].run(None, feeds)[0][0]

    def decode(self, codes: np.ndarray) -> np.ndarray:
        """(C, T) codes -> (1, T * hop) float32 waveform at 24 kHz."""
        codes = np.ascontiguousarray(codes[None], dtype=np.int64)
        return self.sessions["higgs_decoder"].run(None, {"audio_codes": codes})[0][0].astype(np.float32)
