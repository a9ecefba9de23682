"""Audio in and out: loading, resampling, silence removal, fades, cross-fades.

Arrays are float32 ``(channels, samples)``, as in upstream's ``omnivoice/utils/audio.py``, whose
functions these follow. Resampling reproduces ``torchaudio.functional.resample`` (windowed sinc,
Hann window, width 6, rolloff 0.99) in numpy, because a different resampler changes samples and
so codec codes. Silence detection uses pydub, as upstream does.
"""

from __future__ import annotations

import io
import math
import warnings
from functools import lru_cache
from pathlib import Path

import numpy as np

from omnivoice_rt.limits import MAX_SOURCE_CHANNELS, MAX_SOURCE_RATE, MAX_SOURCE_S

SAMPLE_RATE = 24000


# ----------------------------------------------------------------------------- loading


def load_audio(
    source, sample_rate: int = SAMPLE_RATE, max_seconds: float = MAX_SOURCE_S
) -> np.ndarray:
    """A mono (1, T) float32 waveform at ``sample_rate`` from a path, bytes, or (array, rate).

    A file is measured from its header first (length, rate, channels) and refused, undecoded, when
    over ``max_seconds``; it is then read in blocks, mixed to mono as it goes, so memory follows
    the cap rather than the file. Raises ``ValueError`` for anything that is not usable audio.
    """
    if isinstance(source, tuple):
        data, rate = source
        data = np.asarray(data, dtype=np.float32)
        if data.ndim == 1:
            data = data[None, :]
        elif data.ndim == 2 and data.shape[0] > data.shape[1]:
            data = data.T  # (T, C) as soundfile and Gradio give it
        elif data.ndim != 2:
            raise ValueError(f"reference audio must be 1-D or 2-D, got shape {data.shape}")
        _check_format(data.shape[-1], rate, data.shape[0], max_seconds, sample_rate)
        if data.shape[0] > 1:
            data = data.mean(axis=0, keepdims=True)
    else:
        data, rate = _read_mono(source, max_seconds, sample_rate)
    if data.shape[-1] == 0:
        raise ValueError("the reference audio is empty")
    if not np.all(np.isfinite(data)):
        raise ValueError("the reference audio contains NaN or infinite samples")
    return resample(data, int(rate), sample_rate)


def _check_format(frames: int, rate, channels: int, max_seconds: float, target_rate: int) -> None:
    if not isinstance(rate, (int, np.integer)) or not 0 < rate <= MAX_SOURCE_RATE:
        raise ValueError(
            f"invalid sample rate {rate!r}; a reference needs 1 to {MAX_SOURCE_RATE} samples per second"
        )
    gcd = math.gcd(int(rate), target_rate)
    if (rate // gcd) * (
        target_rate // gcd
    ) > 10_000_000:  # the resampling kernel would take gigabytes
        raise ValueError(
            f"the reference's sample rate {rate} Hz is unusual; save it at 16, 24, 44.1 or 48 kHz"
        )
    if not 0 < channels <= MAX_SOURCE_CHANNELS:
        raise ValueError(
            f"the reference has {channels} channels; at most {MAX_SOURCE_CHANNELS} are read"
        )
    if frames / rate > max_seconds:
        raise ValueError(
            f"the reference is {frames / rate:.0f} s long; use 3-10 s of speech (files over {max_seconds:.0f} s "
            "are not read)"
        )


def _read_mono(source, max_seconds: float, target_rate: int) -> tuple[np.ndarray, int]:
    """Header checks, then a bounded, blockwise read mixed to mono."""
    import soundfile as sf

    try:
        handle = io.BytesIO(source) if isinstance(source, bytes) else str(Path(source))
        with sf.SoundFile(handle) as f:
            _check_format(f.frames, f.samplerate, f.channels, max_seconds, target_rate)
            limit = int(max_seconds * f.samplerate)
            block = max(1024, (1 << 20) // f.channels)  # about 4 MB of float32 per block
            pieces, total = [], 0
            for chunk in f.blocks(blocksize=block, dtype="float32", always_2d=True):
                total += chunk.shape[0]
                if total > limit:  # the header understated the length
                    raise ValueError(
                        f"the reference is longer than {max_seconds:.0f} s; use 3-10 s of speech"
                    )
                pieces.append(chunk.mean(axis=1) if f.channels > 1 else chunk[:, 0].copy())
            rate = f.samplerate
    except (RuntimeError, sf.LibsndfileError, TypeError, OSError, EOFError) as exc:
        detail = without_path(exc, source)  # a server's messages name no file of its own
        raise ValueError(
            f"could not read the reference audio ({detail}); use a WAV, FLAC or OGG file"
        ) from exc
    data = np.concatenate(pieces) if pieces else np.zeros(0, np.float32)
    return data[None, :], rate


def without_path(exc: BaseException, path) -> str:
    """An error's message with the file it names left out: what a server may tell its clients."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    message = str(exc)
    if isinstance(path, (str, Path)) and str(path):
        message = message.replace(f"'{path}'", "the file").replace(str(path), "the file")
    return message


# ----------------------------------------------------------------------------- resampling


@lru_cache(maxsize=16)
def _sinc_kernel(
    orig: int, new: int, width_zeros: int = 6, rolloff: float = 0.99
) -> tuple[np.ndarray, int]:
    """torchaudio's ``_get_sinc_resample_kernel`` (sinc_interp_hann), for rates already divided by their gcd."""
    base = min(orig, new) * rolloff
    width = math.ceil(width_zeros * orig / base)
    idx = np.arange(-width, width + orig, dtype=np.float64)[None, :] / orig
    t = (np.arange(0, -new, -1, dtype=np.float32)[:, None] / np.float32(new)).astype(
        np.float64
    ) + idx
    t = np.clip(t * base, -width_zeros, width_zeros)
    window = np.cos(t * math.pi / width_zeros / 2) ** 2
    t = t * math.pi
    with np.errstate(invalid="ignore", divide="ignore"):
        kernels = np.where(t == 0, 1.0, np.sin(t) / t)
    kernels = kernels * window * (base / orig)
    return kernels.astype(np.float32), width


_RESAMPLE_STEPS = 8192  # output steps per piece: windows of at most a few MB


def resample(audio: np.ndarray, orig_rate: int, new_rate: int) -> np.ndarray:
    """Resample ``(..., T)`` from ``orig_rate`` to ``new_rate`` exactly as torchaudio does."""
    if orig_rate == new_rate:
        return np.ascontiguousarray(audio, dtype=np.float32)
    gcd = math.gcd(orig_rate, new_rate)
    orig, new = orig_rate // gcd, new_rate // gcd
    kernels, width = _sinc_kernel(orig, new)
    shape = audio.shape
    flat = audio.reshape(-1, shape[-1]).astype(np.float32)
    length = flat.shape[-1]
    padded = np.pad(flat, ((0, 0), (width, width + orig)))
    taps = kernels.shape[-1]
    steps = (padded.shape[-1] - taps) // orig + 1
    windows = np.lib.stride_tricks.sliding_window_view(padded, taps, axis=-1)[:, ::orig][:, :steps]
    out = np.empty((flat.shape[0], steps, new), dtype=np.float32)
    # in pieces: the windows overlap, a copy of all would not fit
    for start in range(0, steps, _RESAMPLE_STEPS):
        out[:, start : start + _RESAMPLE_STEPS] = np.einsum(
            "bsk,nk->bsn", windows[:, start : start + _RESAMPLE_STEPS], kernels
        )
    out = out.reshape(flat.shape[0], -1)
    target = math.ceil(new * length / orig)
    return np.ascontiguousarray(out[:, :target]).reshape(*shape[:-1], -1)


# ----------------------------------------------------------------------------- silence (pydub, as upstream)

# pydub looks for ffmpeg on import; we only hand it raw PCM, so ffmpeg is never needed.
warnings.filterwarnings("ignore", message="Couldn't find ffmpeg", category=RuntimeWarning)


def _to_segment(audio: np.ndarray, rate: int):
    from pydub import AudioSegment

    pcm = (audio * 32768.0).clip(-32768, 32767).astype(np.int16)
    if pcm.shape[0] > 1:
        pcm = pcm.T.flatten()
    return AudioSegment(
        data=pcm.tobytes(), sample_width=2, frame_rate=rate, channels=audio.shape[0]
    )


def _from_segment(segment) -> np.ndarray:
    data = np.array(segment.get_array_of_samples()).astype(np.float32) / 32768.0
    return data[None, :] if segment.channels == 1 else data.reshape(-1, segment.channels).T


def remove_silence(
    audio: np.ndarray, rate: int, mid_sil: int = 300, lead_sil: int = 100, trail_sil: int = 300
) -> np.ndarray:
    """Shorten inner silences over ``mid_sil`` ms and trim the edges to ``lead_sil``/``trail_sil`` ms."""
    return remove_silence_placed(audio, rate, mid_sil, lead_sil, trail_sil)[0]


def remove_silence_placed(
    audio: np.ndarray, rate: int, mid_sil: int = 300, lead_sil: int = 100, trail_sil: int = 300
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`remove_silence`, and where each sample of its result came from: ``placed[j]`` is
    the index in ``audio`` of the result's sample ``j`` (-1 for the zeros pydub adds when a cut
    in milliseconds passes the end). pydub cuts the audio; the same cuts, in the same
    milliseconds, are made of a second segment whose samples are their own indices."""
    from pydub import AudioSegment
    from pydub.silence import detect_leading_silence

    wave = _to_segment(audio, rate)
    index = np.arange(1, audio.shape[-1] + 1, dtype=np.int32)  # 0: a sample pydub added
    where = AudioSegment(data=index.tobytes(), sample_width=4, frame_rate=rate, channels=1)

    def cuts(segment, ranges):
        joined = AudioSegment.silent(duration=0)
        for start, end in ranges:
            joined += segment[max(start, 0) : min(end, len(segment))]
        return joined

    if mid_sil > 0:
        ranges = _split_ranges(wave, mid_sil)
        wave, where = cuts(wave, ranges), cuts(where, ranges)
    start = max(0, detect_leading_silence(wave, silence_threshold=-50) - lead_sil)
    wave, where = wave[start:].reverse(), where[start:].reverse()
    start = max(0, detect_leading_silence(wave, silence_threshold=-50) - trail_sil)
    wave, where = wave[start:].reverse(), where[start:].reverse()
    placed = np.array(where.get_array_of_samples(), dtype=np.int64) - 1
    return _from_segment(wave), placed


def _split_ranges(wave, mid_sil: int) -> list[tuple[int, int]]:
    """The milliseconds ``split_on_silence(wave, mid_sil, -50, keep_silence=mid_sil, 10)``
    keeps, as it computes them (pydub 0.25; tests/runtime/test_text.py checks the result
    against pydub's and upstream's)."""
    from pydub.silence import detect_nonsilent

    ranges = [
        [start - mid_sil, end + mid_sil]
        for start, end in detect_nonsilent(wave, mid_sil, -50, seek_step=10)
    ]
    for first, second in zip(ranges, ranges[1:], strict=False):
        if second[0] < first[1]:
            first[1] = (first[1] + second[0]) // 2
            second[0] = first[1]
    return [(start, end) for start, end in ranges]


def trim_long_audio(
    audio: np.ndarray,
    rate: int,
    max_duration: float = 15.0,
    min_duration: float = 3.0,
    trim_threshold: float = 20.0,
) -> np.ndarray:
    """Cut audio longer than ``trim_threshold`` s at the latest silence gap before ``max_duration``."""
    from pydub.silence import detect_nonsilent

    if audio.shape[-1] / rate <= trim_threshold:
        return audio
    segment = _to_segment(audio, rate)
    spans = detect_nonsilent(segment, min_silence_len=100, silence_thresh=-40, seek_step=10)
    if not spans:
        return audio
    max_ms, min_ms = int(max_duration * 1000), int(min_duration * 1000)
    split = 0
    for start, end in spans:
        if split < start <= max_ms:
            split = start
        if end > max_ms:
            break
    if split < min_ms:
        split = min(max_ms, len(segment))
    return _from_segment(segment[:split])


# ----------------------------------------------------------------------------- fades


def fade_and_pad(
    audio: np.ndarray,
    pad_duration: float = 0.1,
    fade_duration: float = 0.1,
    rate: int = SAMPLE_RATE,
) -> np.ndarray:
    """Linear fade-in/out of ``fade_duration`` s, then ``pad_duration`` s of silence each side."""
    if audio.shape[-1] == 0:
        return audio
    out = audio.copy()
    k = min(int(fade_duration * rate), out.shape[-1] // 2)
    if k > 0:
        out[..., :k] *= np.linspace(0, 1, k, dtype=np.float32)[None, :]
        out[..., -k:] *= np.linspace(1, 0, k, dtype=np.float32)[None, :]
    pad = int(pad_duration * rate)
    if pad > 0:
        silence = np.zeros((out.shape[0], pad), dtype=out.dtype)
        out = np.concatenate([silence, out, silence], axis=-1)
    return out


def seam_length(rate: int = SAMPLE_RATE, silence_duration: float = 0.3) -> int:
    """Samples of each part of a seam (fade-out, silence, fade-in) that ``cross_fade`` makes."""
    return int(silence_duration * rate) // 3


def cross_fade(
    chunks: list[np.ndarray], rate: int = SAMPLE_RATE, silence_duration: float = 0.3
) -> np.ndarray:
    """Join chunks with a 0.1 s fade-out, 0.1 s of silence and a 0.1 s fade-in at each seam."""
    if len(chunks) == 1:
        return chunks[0]
    fade = seam_length(rate, silence_duration)
    merged = chunks[0].copy()
    for chunk in chunks[1:]:
        n_out = min(fade, merged.shape[-1])
        if n_out > 0:
            merged[..., -n_out:] *= np.linspace(1, 0, n_out, dtype=np.float32)[None, :]
        incoming = chunk.copy()
        n_in = min(fade, incoming.shape[-1])
        if n_in > 0:
            incoming[..., :n_in] *= np.linspace(0, 1, n_in, dtype=np.float32)[None, :]
        merged = np.concatenate(
            [merged, np.zeros((chunks[0].shape[0], fade), np.float32), incoming], axis=-1
        )
    return merged
