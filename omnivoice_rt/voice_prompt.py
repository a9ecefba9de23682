"""A reusable voice: the reference's codes, its transcript and loudness, saved as ``.npz``.

Encode a reference once with ``OmniVoiceONNX.create_voice_prompt`` and reuse it for every
synthesis in that voice. The file holds plain arrays only (no pickle) and a format version.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

FORMAT_VERSION = 1


@dataclass
class VoicePrompt:
    codes: np.ndarray  # (C, frames) int64
    text: str
    rms: float

    def save(self, path: str | Path) -> None:
        np.savez(
            path,
            format_version=np.int64(FORMAT_VERSION),
            codes=np.asarray(self.codes, dtype=np.int64),
            text=np.str_(self.text),
            rms=np.float64(self.rms),
        )

    @classmethod
    def load(cls, path: str | Path, num_codebooks: int = 8, codebook_size: int = 1024) -> VoicePrompt:
        """Read and validate a prompt file; ``ValueError`` says what is wrong with it."""
        try:
            with np.load(path, allow_pickle=False) as data:
                fields = {name: data[name] for name in data.files}
        except (OSError, ValueError, EOFError) as exc:
            raise ValueError(f"{path} is not a voice prompt file (.npz): {exc}") from exc
        version = fields.get("format_version")
        if version is None or int(version) != FORMAT_VERSION:
            raise ValueError(
                f"{path} is a voice prompt of format version {None if version is None else int(version)}; "
                f"this runtime reads version {FORMAT_VERSION}. Create it again from the reference audio."
            )
        missing = {"codes", "text", "rms"} - set(fields)
        if missing:
            raise ValueError(f"{path} lacks {sorted(missing)}; create the voice prompt again")
        codes = fields["codes"]
        if codes.dtype.kind not in "iu" or codes.ndim != 2 or codes.shape[0] != num_codebooks or codes.shape[1] == 0:
            raise ValueError(f"{path}: codes must be integers of shape ({num_codebooks}, frames), got {codes.shape}")
        if codes.min() < 0 or codes.max() >= codebook_size:
            raise ValueError(f"{path}: codes must lie in [0, {codebook_size}); the file is corrupt")
        rms = float(fields["rms"])
        if not np.isfinite(rms) or rms < 0:
            raise ValueError(f"{path}: invalid loudness {rms}")
        return cls(codes=codes.astype(np.int64), text=str(fields["text"]), rms=rms)
