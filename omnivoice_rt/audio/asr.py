"""What a reference recording says, for cloning without a typed transcript.

    transcriber = Transcriber.load()                      # onnx-community/whisper-base, int8
    text = transcriber.transcribe("me.wav", language="en")

Whisper through ``onnx-asr`` (ONNX Runtime and numpy, like the rest of the runtime; measured
against faster-whisper in docs/performance.md). The model is an onnx-community Whisper export (the
``onnx/encoder_model*.onnx`` and ``onnx/decoder_model_merged*.onnx`` graphs, ``vocab.json``,
``added_tokens.json``), from a local folder or downloaded through the Hugging Face cache like the
artifacts (``OMNIVOICE_ASR_MODEL`` picks another one). Whisper knows 99 languages: for another of
OmniVoice's 600+ it is asked to detect the language itself, and the transcript should be checked.
Upstream transcribes with Whisper too (large-v3-turbo, through transformers).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from omnivoice_rt.artifacts.hub import Progress, download
from omnivoice_rt.audio import ops as audio_ops
from omnivoice_rt.errors import ArtifactError
from omnivoice_rt.limits import MAX_REFERENCE_S
from omnivoice_rt.text.languages import TAG_ALIASES, resolve_language

logger = logging.getLogger(__name__)

DEFAULT_ASR_MODEL = "onnx-community/whisper-base"
# Without the recogniser, the simplest fix: say what the reference says.
ASR_HINT = "give the transcript (ref_text; --ref-text on the command line), or set OMNIVOICE_ASR_MODEL to a local Whisper folder"
ASR_RATE = 16000
# What onnx-asr reads of an onnx-community Whisper export; the quantized graphs only for int8.
ASR_FILES = [
    "config.json",
    "vocab.json",
    "added_tokens.json",
    "onnx/encoder_model{q}.onnx",
    "onnx/decoder_model_merged{q}.onnx",
]
# Each quantization's graph suffixes, in the order tried: onnx-community repos name their 8-bit
# graphs "_int8", "_quantized" or "_uint8" depending on the conversion that made them.
QUANTIZATIONS = {"int8": ["int8", "quantized", "uint8"], "fp32": [""]}


# Whisper's codes are two-letter where one exists: Standard Arabic (arb) is its "ar".
WHISPER_CODES = {code: tag for tag, code in TAG_ALIASES.items() if len(code) == 3}


def asr_source() -> str:
    return os.environ.get("OMNIVOICE_ASR_MODEL") or DEFAULT_ASR_MODEL


class Transcriber:
    """One loaded Whisper: ``transcribe(audio, language)`` gives the text it hears."""

    def __init__(self, model, folder: Path, languages: set[str]):
        self.model, self.folder, self.languages = model, folder, languages

    @classmethod
    def load(
        cls,
        source: str | Path | None = None,
        quantization: str = "int8",
        progress: Progress | None = None,
    ) -> Transcriber:
        """Whisper from a local folder or a Hub repo (None: ``OMNIVOICE_ASR_MODEL``, else
        ``DEFAULT_ASR_MODEL``); ``quantization`` int8 (the default) or fp32."""
        if quantization not in QUANTIZATIONS:
            raise ValueError(
                f"unknown quantization {quantization!r}; use one of {', '.join(QUANTIZATIONS)}"
            )
        try:
            import onnx_asr
        except ImportError as exc:
            raise ArtifactError(
                "transcribing the reference needs the 'asr' extra: pip install "
                "'omnivoice-onnx[asr]' (or pass ref_text, what the reference says)"
            ) from exc
        source = source or asr_source()
        if str(source).lower() == "none":
            raise ValueError(
                "transcription is off (OMNIVOICE_ASR_MODEL=none), so ref_text is required: type what "
                "the reference recording says"
            )
        first_missing: list[str] = []
        for variant in QUANTIZATIONS[quantization]:  # the first whose graphs the folder or repo has
            files = [name.format(q=f"_{variant}" if variant else "") for name in ASR_FILES]
            try:
                folder = (
                    Path(source)
                    if Path(source).is_dir()
                    else download(str(source), files, progress, hint=ASR_HINT)
                )
            except ArtifactError as exc:
                raise ArtifactError(
                    f"the speech recogniser (it transcribes references given without a "
                    f"transcript, and hears the quality check's samples): {exc}"
                ) from exc
            missing = [name for name in files if not (folder / name).is_file()]
            if not missing:
                break
            first_missing = first_missing or missing
        else:
            raise ArtifactError(
                f"the speech recogniser in {folder} lacks {', '.join(first_missing)}: it must be an "
                f"onnx-community Whisper export (see omnivoice_rt/audio/asr.py); or {ASR_HINT}"
            )
        try:
            model = onnx_asr.load_model("whisper", folder, quantization=variant or None)
        except Exception as exc:  # onnx-asr and onnxruntime raise their own types
            detail = " ".join(str(exc).split())[:300]
            raise ArtifactError(
                f"the speech recogniser in {folder} could not be loaded ({detail}); {ASR_HINT}"
            ) from exc
        tokens = json.loads((folder / "added_tokens.json").read_text(encoding="utf-8"))
        languages = {
            t[2:-2]
            for t in tokens
            if t.startswith("<|") and t.endswith("|>") and 2 <= len(t) - 4 <= 3
        }
        logger.info(
            "loaded the speech recogniser from %s (%s, %d languages)",
            folder,
            quantization,
            len(languages),
        )
        return cls(model, folder, languages)

    def transcribe(self, audio, language: str | None = None) -> str:
        """The text spoken in ``audio`` (a path, bytes, or (array, sample_rate); at most
        ``MAX_REFERENCE_S`` seconds). ``language``: a language OmniVoice knows (id or name); passed
        on when Whisper knows it too, else Whisper detects the language."""
        language = resolve_language(language)
        wav = audio_ops.load_audio(audio, ASR_RATE)
        seconds = wav.shape[-1] / ASR_RATE
        if seconds > MAX_REFERENCE_S:
            raise ValueError(
                f"the reference is {seconds:.1f} s long; transcription takes at most "
                f"{MAX_REFERENCE_S:.0f} s: use 3-10 s of speech"
            )
        code = next(
            (c for c in (language, WHISPER_CODES.get(language)) if c in self.languages), None
        )
        if language and code is None:
            logger.info(
                "Whisper does not know language %r; it detects the language itself", language
            )
        try:
            text = self.model.recognize(wav[0], sample_rate=ASR_RATE, language=code)
        except Exception as exc:  # noqa: BLE001 - onnxruntime errors, a token the vocabulary lacks
            detail = " ".join(str(exc).split())[:300]
            raise ArtifactError(
                f"transcribing the reference failed ({type(exc).__name__}: {detail}); "
                "type what it says instead"
            ) from exc
        text = " ".join(str(text).split())
        if not text:
            raise ValueError(
                "no speech was recognised in the reference: record 3-10 s of clear speech, "
                "or type what it says"
            )
        return text
