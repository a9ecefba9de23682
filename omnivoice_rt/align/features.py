"""What the aligner compares: log-mel spectra of a recording and of eSpeak NG's template, the
template given the recording's level and noise, and cepstra normalised per signal.

Frames of 25 ms every 10 ms at 16 kHz (``HOP_S``), 40 mel bands; the cepstra are c0-c12 and
their deltas, each normalised to zero mean and unit variance over its own signal (a speaker's
and a channel's colour taken out). c0 is a frame's level: without it a stretch of silence in
the recording matched a faint consonant of the template as well as the template's silence, and
a word after a pause could start in the pause (docs/design.md section 10)."""

from __future__ import annotations

import numpy as np
import soxr

RATE = 16_000
HOP, WINDOW, FFT = 160, 400, 512
HOP_S = HOP / RATE  # seconds a frame
BANDS, CEPSTRA = 40, 13


def _mel_bank(low: float = 60.0, high: float = 7600.0) -> np.ndarray:
    def mel(f):
        return 2595.0 * np.log10(1.0 + f / 700.0)

    edges = 700.0 * (10 ** (np.linspace(mel(low), mel(high), BANDS + 2) / 2595.0) - 1.0)
    bins = np.fft.rfftfreq(FFT, 1.0 / RATE)
    bank = np.zeros((BANDS, bins.size), np.float32)
    for k in range(BANDS):
        left, centre, right = edges[k : k + 3]
        rising, falling = (bins - left) / (centre - left), (right - bins) / (right - centre)
        bank[k] = np.clip(np.minimum(rising, falling), 0.0, None)
    return bank


MEL_BANK = _mel_bank()
DCT = np.cos(
    np.pi / BANDS * (np.arange(BANDS)[None, :] + 0.5) * np.arange(CEPSTRA)[:, None]
).astype(np.float32)


def log_mel(samples: np.ndarray, sample_rate: int) -> np.ndarray:
    """(frames, BANDS): the natural log of each band's power, a frame every ``HOP_S``."""
    x = np.asarray(samples, np.float32)
    if sample_rate != RATE:
        x = soxr.resample(x, sample_rate, RATE)
    if x.size == 0:
        return np.zeros((0, BANDS), np.float32)
    x = np.append(x[0], x[1:] - 0.97 * x[:-1])  # pre-emphasis
    count = 1 + max(0, x.size - WINDOW) // HOP
    x = np.pad(x, (0, WINDOW))
    frames = np.lib.stride_tricks.sliding_window_view(x, WINDOW)[::HOP][:count]
    power = np.abs(np.fft.rfft(frames * np.hanning(WINDOW).astype(np.float32), FFT)) ** 2
    return np.log(power @ MEL_BANK.T + 1e-10).astype(np.float32)


def noise_floor(recording: np.ndarray, quietest: float = 10.0) -> np.ndarray:
    """Each band's power in the recording's quietest ``quietest`` percent of frames."""
    power = np.exp(recording)
    total = power.sum(1)
    return power[total <= np.percentile(total, quietest)].mean(0)


def matched(template: np.ndarray, recording: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """The template at the recording's level (the medians of their louder halves) with the
    recording's noise added, so that its silences and faint sounds look like the recording's."""
    t_power = np.exp(template)
    gain = _loud_half(np.exp(recording).sum(1)) / max(_loud_half(t_power.sum(1)), 1e-20)
    return np.log(t_power * gain + noise).astype(np.float32)


def _loud_half(total: np.ndarray) -> float:
    """The median of the louder half of frames' powers."""
    return float(np.median(total[total >= np.median(total)]))


def cepstra(spectra: np.ndarray) -> np.ndarray:
    """c0-c12 and their deltas, each normalised to zero mean and unit variance over the signal."""
    c = spectra @ DCT.T
    deltas = np.gradient(c, axis=0) if len(c) > 1 else np.zeros_like(c)
    features = np.hstack([c, deltas])
    return ((features - features.mean(0)) / (features.std(0) + 1e-6)).astype(np.float32)
