"""A reference recording as a voice prompt: upstream's preprocessing, then the codec's codes.

Upstream's ``create_voice_clone_prompt``: the recording at 24 kHz mono, raised to an RMS of 0.1
when quieter, a long one cut at a silence near 20 s when it is to be transcribed, silences
trimmed, cut to a multiple of the codec's hop, and encoded; its transcript typed, or written by the
speech recogniser, and punctuated.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import numpy as np

from omnivoice_rt.audio import ops as audio_ops
from omnivoice_rt.audio.asr import Transcriber
from omnivoice_rt.limits import MAX_REFERENCE_S, MAX_TRANSCRIPT_CHARS, MIN_REFERENCE_S
from omnivoice_rt.text.chunks import add_punctuation
from omnivoice_rt.text.languages import check_string
from omnivoice_rt.voice_prompt import VoicePrompt

logger = logging.getLogger(__name__)


def encode_reference(
    codec,
    ref_audio,
    ref_text: str | None,
    preprocess_prompt: bool,
    language: str | None,
    transcriber: Callable[[], Transcriber],
    boundary: Callable[[], None] | None = None,
) -> VoicePrompt:
    """Encode ``ref_audio`` (path, bytes or (array, sample_rate)) and its transcript; without
    ``ref_text``, ``transcriber()`` writes it (``language`` helps it). ``boundary()`` is called
    between the stages (the transcription, each graph of the codec's encoder): a server's turns."""
    rate = codec.sample_rate
    transcribe = ref_text is None or (isinstance(ref_text, str) and not ref_text.strip())
    if not transcribe:
        check_string(ref_text, "ref_text (the reference's transcript)")
    if not transcribe and len(ref_text) > MAX_TRANSCRIPT_CHARS:
        raise ValueError(
            f"the reference's transcript is {len(ref_text)} characters long; the limit is "
            f"{MAX_TRANSCRIPT_CHARS}: use 3-10 s of speech and what is said in it"
        )
    wav = audio_ops.load_audio(ref_audio, rate)
    rms = float(np.sqrt(np.mean(wav.astype(np.float64) ** 2)))
    if rms < 1e-5:
        raise ValueError("the reference audio is silent; record 3-10 s of clear speech")
    if rms < 0.1:
        wav = wav * np.float32(0.1 / rms)
    if preprocess_prompt:
        # upstream: a long reference is cut at a silence, unless its transcript is given
        if transcribe:
            wav = audio_ops.trim_long_audio(wav, rate, trim_threshold=20.0)
        wav = audio_ops.remove_silence(wav, rate, mid_sil=200, lead_sil=100, trail_sil=200)
    seconds = wav.shape[-1] / rate
    if seconds < MIN_REFERENCE_S:
        raise ValueError(
            f"the reference has {seconds:.2f} s of sound after silence removal; it needs at least "
            f"{MIN_REFERENCE_S} s (3-10 s of clear speech works best)"
        )
    if seconds > MAX_REFERENCE_S:
        raise ValueError(
            f"the reference has {seconds:.1f} s of sound; use 3-10 s of speech (at most {MAX_REFERENCE_S:.0f} s), "
            "cut to match its transcript"
        )
    if seconds > 20:
        logger.warning("the reference is %.1f s long; 3-10 s is faster and clones better", seconds)
    if transcribe:
        started = time.perf_counter()
        ref_text = transcriber().transcribe((wav[0], rate), language=language)
        logger.info(
            "transcribed a %.1f s reference in %.2f s: %r",
            seconds,
            time.perf_counter() - started,
            ref_text,
        )
        if boundary is not None:
            boundary()
    hop = codec.hop_length
    wav = wav[:, : wav.shape[-1] - wav.shape[-1] % hop]
    started = time.perf_counter()
    codes = codec.encode(wav, boundary)
    logger.debug("encoded a %.2f s reference in %.2f s", seconds, time.perf_counter() - started)
    text = add_punctuation(ref_text) if preprocess_prompt else ref_text
    return VoicePrompt(codes=codes, text=text, rms=rms)
