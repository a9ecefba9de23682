"""A reusable voice: the reference's codes, its transcript and loudness, saved as ``.npz``.

Encode a reference once with ``OmniVoiceONNX.create_voice_prompt`` and reuse it for every
synthesis in that voice. The file holds plain arrays only (no pickle) and a format version, and
is bounded like a reference: at most 30 s of codes and a transcript of bounded length.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from omnivoice_rt.audio.ops import without_path
from omnivoice_rt.limits import MAX_PROMPT_FILE_BYTES, MAX_REFERENCE_S, MAX_TRANSCRIPT_CHARS

FORMAT_VERSION = 1
MAX_PROMPT_FRAMES = int(MAX_REFERENCE_S * 25)  # 25 codec frames per second
_HEADER_READERS = {
    (1, 0): np.lib.format.read_array_header_1_0,
    (2, 0): np.lib.format.read_array_header_2_0,
}


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
    def load(
        cls,
        path: str | Path,
        num_codebooks: int = 8,
        codebook_size: int = 1024,
        max_frames: int = MAX_PROMPT_FRAMES,
    ) -> VoicePrompt:
        """Read and validate a prompt file; ``ValueError`` says what is wrong with it.

        Every member's header (shape and type) is checked against the bounds before any array is
        decompressed, so a small file that would expand to gigabytes is refused unread."""
        try:
            if Path(path).stat().st_size > MAX_PROMPT_FILE_BYTES:
                raise ValueError(
                    f"the file is {Path(path).stat().st_size >> 10} kB; a voice prompt is a few kB"
                )
            _check_members(path, num_codebooks, max_frames)
            with np.load(path, allow_pickle=False) as data:
                fields = {name: data[name] for name in data.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError) as exc:
            raise ValueError(
                f"the file is not a usable voice prompt file (.npz): {without_path(exc, path)}"
            ) from exc
        version = fields.get("format_version")
        if version is None or int(version) != FORMAT_VERSION:
            raise ValueError(
                f"the file is a voice prompt of format version {None if version is None else int(version)}; "
                f"this runtime reads version {FORMAT_VERSION}. Create it again from the reference audio."
            )
        codes = fields["codes"]
        if codes.min() < 0 or codes.max() >= codebook_size:
            raise ValueError(
                f"the voice prompt's codes must lie in [0, {codebook_size}); the file is corrupt"
            )
        rms = float(fields["rms"])
        if not np.isfinite(rms) or rms < 0:
            raise ValueError(f"the voice prompt's loudness is invalid ({rms}); the file is corrupt")
        return cls(codes=codes.astype(np.int64), text=str(fields["text"]), rms=rms)


def _check_members(path, num_codebooks: int, max_frames: int) -> None:
    """Read each ``.npy`` member's header only, and refuse what the bounds do not allow."""
    expected = {  # member: (allowed dtype kinds, is its shape valid?)
        "format_version": ("iu", lambda shape: shape == ()),
        "codes": (
            "iu",
            lambda shape: (
                len(shape) == 2 and shape[0] == num_codebooks and 0 < shape[1] <= max_frames
            ),
        ),
        "text": ("U", lambda shape: shape == ()),
        "rms": ("f", lambda shape: shape == ()),
    }
    with zipfile.ZipFile(path) as archive:
        members = {info.filename.removesuffix(".npy"): info for info in archive.infolist()}
        if set(members) != set(expected):
            raise ValueError(f"it holds {sorted(members)[:8]}, not {sorted(expected)}")
        for name, info in members.items():
            with archive.open(info) as member:
                version = np.lib.format.read_magic(member)
                if version not in _HEADER_READERS:
                    raise ValueError(f"{name} has .npy format {version}")
                shape, _, dtype = _HEADER_READERS[version](member, max_header_size=4096)
            kinds, shape_ok = expected[name]
            if dtype.hasobject or dtype.kind not in kinds or not shape_ok(shape):
                hint = (
                    f" (codes: ({num_codebooks}, 1..{max_frames}) integers, at most {MAX_REFERENCE_S:.0f} s)"
                    if name == "codes"
                    else ""
                )
                raise ValueError(f"{name} is {dtype} of shape {shape}{hint}")
            if name == "text" and dtype.itemsize // 4 > MAX_TRANSCRIPT_CHARS:
                raise ValueError(
                    f"its transcript is {dtype.itemsize // 4} characters; the limit is {MAX_TRANSCRIPT_CHARS}"
                )
            # more bytes than the header says
            if info.file_size > 1024 + dtype.itemsize * int(np.prod(shape)):
                raise ValueError(
                    f"{name} holds {info.file_size} bytes, more than its header declares"
                )
