"""``OmniVoiceONNX``: load an artifact folder once, then turn text into speech.

    voice = OmniVoiceONNX.load("artifacts", precision="int4")
    speech = voice.generate("Hello world.", language="en", seed=0)
    soundfile.write("hello.wav", speech.waveform, speech.sample_rate)

Everything follows upstream ``OmniVoice.generate`` (omnivoice 0.2.1). Differences, on purpose:
- the unconditional rows run without padding (trimmed CFG: the same numbers, less work), and
  the embeddings of the fixed prompt are computed once rather than every step;
- random draws come from numpy's ``Generator`` (``seed``), so sampled output is reproducible
  here but not bit-equal to torch's; at zero temperatures the codes equal upstream's;
- without ``ref_text`` the reference is transcribed by Whisper through onnx-asr (upstream uses
  Whisper large-v3-turbo through transformers; see :mod:`omnivoice_rt.asr`), an unknown language
  is an error rather than a warning, and bad input raises ``ValueError`` with a hint.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from omnivoice_rt import audio as audio_ops
from omnivoice_rt.asr import Transcriber
from omnivoice_rt.bidirectional import llm_feeds, position_table, present_names
from omnivoice_rt.errors import ArtifactError, Cancelled
from omnivoice_rt.limits import (
    MAX_REFERENCE_S,
    MAX_TRANSCRIPT_CHARS,
    MIN_REFERENCE_S,
    max_row,
)
from omnivoice_rt.prompt import Prompt, TextTokenizer, build_prompt, text_ids
from omnivoice_rt.request import (  # PRESETS, GenerationSettings, check_text: importable from here too
    PRESETS,  # noqa: F401
    GenerationSettings,
    Request,
    check_text,  # noqa: F401
    options_signature,
)
from omnivoice_rt.sessions import load_graphs
from omnivoice_rt.text import (
    add_punctuation,
    check_string,
    chunk_text_punctuation,
    estimate_frames,
)
from omnivoice_rt.unmask import unmask
from omnivoice_rt.voice_prompt import VoicePrompt

logger = logging.getLogger(__name__)

Progress = Callable[[int, int], None]
# stream(sentences=True): pieces of about a sentence, sentences joined up to this length
SENTENCE_SECONDS = 4.0


@dataclass
class Speech:
    """A synthesis result: float32 mono waveform at ``sample_rate`` and what it took."""

    waveform: np.ndarray
    sample_rate: int
    codes: list[np.ndarray]  # (C, T) codes of each chunk
    metadata: dict = field(default_factory=dict)

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
        codes = [c for part in parts for c in part.codes]
        metadata = {
            **parts[-1].metadata,
            "frames": int(sum(c.shape[1] for c in codes)),
            "chunks": len(codes),
            "steps": sum(part.metadata.get("steps", 0) for part in parts),
        }
        metadata["seconds"] = waveform.shape[-1] / parts[0].sample_rate
        metadata["rtf"] = metadata.get("timings", {}).get("total", 0.0) / max(
            metadata["seconds"], 1e-9
        )
        return cls(waveform, parts[0].sample_rate, codes, metadata)


class OmniVoiceONNX:
    """OmniVoice text-to-speech on ONNX Runtime. Build with :meth:`load`."""

    def __init__(self, root: Path, precision: str, graphs: dict, codec, manifest: dict):
        self.root = root
        self.precision = precision
        self.repaired_llm: Path | None = None  # set when the folder's causal LLM was repaired
        self.graphs = graphs
        self.codec = codec
        self.manifest = manifest
        self.config = manifest["model"]
        self.num_codebooks = int(self.config["num_audio_codebook"])
        self.mask_id = int(self.config["audio_mask_id"])
        # Rates come from the codec's graphs (measured at load), not from a manifest.
        self.sample_rate = codec.sample_rate
        self.frame_rate = codec.frame_rate
        self.tokenizer = TextTokenizer(root / "tokenizer.json")
        llm_input = graphs["llm_decoder"].input("inputs_embeds")
        self._llm_dtype = np.float16 if llm_input.dtype == "float16" else np.float32
        self._call = threading.local()  # what one generate call measures
        # for the prompt K/V cache
        self._presents = present_names(graphs["llm_decoder"].session) or {}
        heads = int(self.config.get("num_attention_heads") or 16)
        table = position_table(graphs["llm_decoder"].path) or self.config.get(
            "max_position_embeddings"
        )
        self.max_row, self.max_row_reason = max_row(heads, table)
        # rows of the text embedding table
        self.text_vocab = int(self.config.get("text_vocab_size") or 0)
        # The speech recogniser for references without a transcript: set one, or the default loads
        # on first need (see transcriber()).
        self.asr: Transcriber | None = None
        self._asr_lock = threading.Lock()

    @classmethod
    def load(
        cls,
        source: str | Path | None = None,
        precision: str = "int4",
        providers: list[str] | None = None,
        threads: int | None = None,
        verify: bool = False,
        download_progress: Callable[[float, str], None] | None = None,
    ) -> OmniVoiceONNX:
        """Open every graph of ``precision`` (int4, fp16, fp32 or cuda).

        ``source`` is an artifact folder or a Hub repo id; None means ``$OMNIVOICE_REPO`` or
        onnx-community/OmniVoice-Onnx (see :mod:`omnivoice_rt.hub`)."""
        from omnivoice_rt.hub import resolve_artifacts

        root, manifest, overrides = resolve_artifacts(source, precision, download_progress)
        graphs, codec = load_graphs(
            root, precision, providers, verify, threads, overrides, manifest
        )
        voice = cls(root, precision, graphs, codec, manifest)
        voice.repaired_llm = overrides.get("llm_decoder")
        return voice

    # ------------------------------------------------------------------ model calls

    def _run(self, name: str, feeds: dict, outputs: list[str] | None = None) -> list[np.ndarray]:
        started = time.perf_counter()
        result = self.graphs[name].run(outputs, feeds)
        timings = self._call.__dict__.setdefault("timings", {})  # the request's, set by _unmask
        timings[name] = timings.get(name, 0.0) + time.perf_counter() - started
        return result

    def _embed(self, ids: np.ndarray, audio_mask: np.ndarray) -> np.ndarray:
        feeds = {"input_ids": ids[None], "audio_mask": audio_mask[None]}
        return self._run("audio_embeddings_encoder", feeds)[0].astype(self._llm_dtype)

    def _llm(
        self, embeds: np.ndarray, past: dict | None = None, keep: int = 0
    ) -> tuple[np.ndarray, dict]:
        """Hidden states for ``embeds`` after the ``past`` keys and values (None: none), and the
        keys and values of the first ``keep`` positions, for later calls."""
        session = self.graphs["llm_decoder"].session
        feeds = llm_feeds(session, embeds, None, int(self.config["head_dim"]), past)
        presents = self._presents if keep else {}
        result = self._run("llm_decoder", feeds, ["hidden_states", *presents.values()])
        kept = {
            name: np.ascontiguousarray(value[:, :, :keep])
            for name, value in zip(presents, result[1:], strict=True)
        }
        return result[0], kept

    def _forward_for(self, prompt: Prompt, settings: GenerationSettings):
        """The model as the unmasking loop needs it: target codes -> (cond, uncond) logits.

        Exact by default. With ``prompt_cache_refresh`` r, call 0, r, 2r... run the whole
        conditional row and keep its prompt positions' keys and values; the other calls run the
        target alone after them (attention both ways, positions continuing after the prompt), so
        the prompt's keys and values lag the target by up to r - 1 steps. With ``guidance_every``
        k, the unconditional logits are computed every k-th call and reused between; at guidance 0
        the unconditional row is never run."""
        prefix = self._embed(
            prompt.ids[:, : prompt.prefix_len], prompt.audio_mask[: prompt.prefix_len]
        )
        target_mask = np.ones(prompt.target_len, dtype=bool)
        refresh = settings.prompt_cache_refresh if self._presents else 0
        state = {"call": 0, "cache": None, "uncond": None}

        def forward(tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
            call = state["call"]
            state["call"] += 1
            target = self._embed(tokens, target_mask)  # the uncond row is the target alone
            if refresh and call % refresh:
                cond, _ = self._llm(target, past=state["cache"])
            else:
                whole = np.concatenate([prefix, target], axis=1)
                cond, state["cache"] = self._llm(whole, keep=prompt.prefix_len if refresh else 0)
                cond = cond[:, -prompt.target_len :]
            rows = [cond]
            if settings.guidance_scale != 0 and call % settings.guidance_every == 0:
                rows.append(self._llm(target)[0])
            logits = self._run(
                "audio_heads_decoder",
                {"hidden_states": np.concatenate(rows, axis=0).astype(np.float32)},
            )[0]
            if len(rows) == 2:
                state["uncond"] = logits[1]
            return logits[0], state["uncond"]

        return forward

    # ------------------------------------------------------------------ voice prompts

    def transcriber(self) -> Transcriber:
        """The speech recogniser: ``self.asr``, or the default one (``OMNIVOICE_ASR_MODEL``, else
        onnx-community/whisper-base), loaded on first need and kept. ``OMNIVOICE_ASR_MODEL=none``: none."""
        with self._asr_lock:
            if self.asr is None:
                self.asr = Transcriber.load()
            return self.asr

    def create_voice_prompt(
        self,
        ref_audio,
        ref_text: str | None = None,
        preprocess_prompt: bool = True,
        language: str | None = None,
    ) -> VoicePrompt:
        """Encode a reference recording (path, bytes or (array, sample_rate)) and its transcript;
        without ``ref_text``, the speech recogniser writes it (``language`` helps it), as upstream."""
        transcribe = ref_text is None or (isinstance(ref_text, str) and not ref_text.strip())
        if not transcribe:
            check_string(ref_text, "ref_text (the reference's transcript)")
        if not transcribe and len(ref_text) > MAX_TRANSCRIPT_CHARS:
            raise ValueError(
                f"the reference's transcript is {len(ref_text)} characters long; the limit is "
                f"{MAX_TRANSCRIPT_CHARS}: use 3-10 s of speech and what is said in it"
            )
        wav = audio_ops.load_audio(ref_audio, self.sample_rate)
        rms = float(np.sqrt(np.mean(wav.astype(np.float64) ** 2)))
        if rms < 1e-5:
            raise ValueError("the reference audio is silent; record 3-10 s of clear speech")
        if rms < 0.1:
            wav = wav * np.float32(0.1 / rms)
        if preprocess_prompt:
            # upstream: a long reference is cut at a silence, unless its transcript is given
            if transcribe:
                wav = audio_ops.trim_long_audio(wav, self.sample_rate, trim_threshold=20.0)
            wav = audio_ops.remove_silence(
                wav, self.sample_rate, mid_sil=200, lead_sil=100, trail_sil=200
            )
        seconds = wav.shape[-1] / self.sample_rate
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
            logger.warning(
                "the reference is %.1f s long; 3-10 s is faster and clones better", seconds
            )
        if transcribe:
            started = time.perf_counter()
            ref_text = self.transcriber().transcribe((wav[0], self.sample_rate), language=language)
            logger.info(
                "transcribed a %.1f s reference in %.2f s: %r",
                seconds,
                time.perf_counter() - started,
                ref_text,
            )
        hop = self.codec.hop_length
        wav = wav[:, : wav.shape[-1] - wav.shape[-1] % hop]
        started = time.perf_counter()
        codes = self.codec.encode(wav)
        logger.debug("encoded a %.2f s reference in %.2f s", seconds, time.perf_counter() - started)
        text = add_punctuation(ref_text) if preprocess_prompt else ref_text
        return VoicePrompt(codes=codes, text=text, rms=rms)

    # ------------------------------------------------------------------ synthesis

    @options_signature
    def generate(
        self, text: str | Request, *, progress=None, should_stop=None, **options
    ) -> Speech:
        """Speech for ``text``: a :class:`Request`, or a text with the options of ``OPTIONS`` as keyword
        arguments (``language``, ``instruct``, ``ref_audio`` with ``ref_text`` or ``voice_prompt``,
        ``duration``, ``speed``, ``seed``, ``preset`` (``best`` here) and the settings of
        :class:`GenerationSettings`). ``progress(done, total)`` is told each unmasking step.

        ``should_stop()`` is asked after every unmasking step; when it says yes, :class:`Cancelled`
        is raised there (a server stops the work of a client that went away). Long texts are made
        in ~15 s pieces, joined and post-processed as one waveform, as upstream does."""
        job = self._prepare(as_request(text, options), progress, should_stop)
        chunks = [codes for _piece, codes in self._unmask(job)]
        unmasked = time.perf_counter()
        waveform = audio_ops.cross_fade(
            [self.codec.decode(codes) for codes in chunks], self.sample_rate
        )
        decoded = time.perf_counter()
        waveform = self._post_process(waveform, job.ref_rms, job.settings)
        timings = {
            "unmask": unmasked - job.started,
            "decode": decoded - unmasked,
            "postprocess": time.perf_counter() - decoded,
        }
        return self._speech(waveform[0], chunks, job, timings)

    @options_signature
    def stream(
        self,
        text: str | Request,
        *,
        sentences: bool = False,
        progress=None,
        should_stop=None,
        **options,
    ) -> Iterator[Speech]:
        """Speech for ``text`` (or a :class:`Request`) as it is made: one :class:`Speech` per piece, ready to play, each
        as soon as its piece is decoded. The pieces joined (:meth:`Speech.join`) are the whole
        result. Takes :meth:`generate`'s arguments.

        The codes are :meth:`generate`'s; the post-processing is done per piece (silence trimmed
        and, without a reference, the loudness normalised piece by piece, where ``generate`` does
        it over the whole waveform), so the waveform can differ slightly from ``generate``'s. One
        piece (a short text) is ``generate``'s result exactly. ``sentences=True`` makes pieces of
        about a sentence (about ``SENTENCE_SECONDS``) so the first audio comes sooner; the pieces
        after the first take it as their reference, as long texts do upstream, and prosody can
        break where they join."""
        # Bad input fails here, not at the first piece.
        job = self._prepare(as_request(text, options), progress, should_stop, sentences)
        return self._stream(job)

    def _stream(self, request: _Job) -> Iterator[Speech]:
        count = len(request.plan)
        seam = audio_ops.seam_length(self.sample_rate)  # cross_fade's silence between pieces
        pad = int(request.settings.pad_duration * self.sample_rate)
        for index, (piece, codes) in enumerate(self._unmask(request)):
            unmasked = time.perf_counter()
            waveform = self.codec.decode(codes)
            decoded = time.perf_counter()
            waveform = self._post_process(waveform, request.ref_rms, request.settings)[0]
            if index > 0:  # the seam's silence instead of the leading pad
                waveform = np.concatenate([np.zeros(seam, np.float32), waveform[pad:]])
            if index < count - 1:  # the trailing pad only after the last piece
                waveform = waveform[: waveform.shape[-1] - pad]
            timings = {"decode": decoded - unmasked, "postprocess": time.perf_counter() - decoded}
            speech = self._speech(waveform, [codes], request, timings)
            speech.metadata.update(piece=index, pieces=count, text=piece.text)
            yield speech

    def _prepare(self, request: Request, progress, should_stop, sentences=False) -> _Job:
        """Plan a checked request: every piece's size is known, and checked, before the model runs."""
        started = time.perf_counter()
        settings, language, instruct = request.settings, request.language, request.instruct
        voice_prompt = request.voice_prompt
        if isinstance(voice_prompt, (str, Path)):
            voice_prompt = VoicePrompt.load(voice_prompt, self.num_codebooks)
        if voice_prompt is None and request.ref_audio is not None:
            voice_prompt = self.create_voice_prompt(
                request.ref_audio, request.ref_text, settings.preprocess_prompt, language
            )
        ref_codes = voice_prompt.codes if voice_prompt is not None else None
        ref_text = voice_prompt.text if voice_prompt is not None else None
        ref_frames = ref_codes.shape[1] if ref_codes is not None else None

        # Target length: duration overrides the estimate; speed scales it.
        text, duration, speed = request.text, request.duration, request.speed
        estimate = estimate_frames(text, ref_text, ref_frames, 1.0 if duration else (speed or 1.0))
        target_len = max(1, int(duration * self.frame_rate)) if duration else estimate
        chunk_speed = estimate / target_len if duration else (speed or 1.0)
        piece_seconds = SENTENCE_SECONDS if sentences else None
        plan = self._plan(
            text, target_len, ref_text, ref_frames, chunk_speed, settings, piece_seconds
        )
        for piece in plan:
            self._check_row(piece, language, instruct, settings.denoise)
        return _Job(
            plan=plan,
            settings=settings,
            language=language,
            instruct=instruct,
            ref_codes=ref_codes,
            ref_rms=voice_prompt.rms if voice_prompt is not None else None,
            rng=np.random.default_rng(request.seed),
            steps=_StepCounter(progress, settings.num_step * len(plan), should_stop),
            started=started,
            timings={},
        )

    def _unmask(self, request: _Job) -> Iterator[tuple[_Piece, np.ndarray]]:
        """Each piece of the plan and its codes, in order (a piece may take the first one's codes as its reference)."""
        first = None
        for piece in request.plan:
            # The graphs' times go to this request's table through the thread that runs this piece
            # (one voice serves several requests at once, and a stream may move between threads).
            self._call.timings = request.timings
            prompt = build_prompt(
                self.tokenizer,
                piece.text,
                piece.frames,
                num_codebooks=self.num_codebooks,
                mask_id=self.mask_id,
                ref_text=piece.ref_text,
                ref_codes=first if piece.ref_from_first else request.ref_codes,
                language=request.language,
                instruct=request.instruct,
                denoise=request.settings.denoise,
            )
            forward = self._forward_for(prompt, request.settings)
            codes = unmask(
                forward,
                self.num_codebooks,
                piece.frames,
                self.mask_id,
                request.settings,
                request.rng,
                request.steps.step,
            )
            first = codes if first is None else first
            yield piece, codes

    def _speech(
        self, waveform: np.ndarray, chunks: list[np.ndarray], request: _Job, timings: dict
    ) -> Speech:
        """A result with what it took: this part's timings, the model's so far, the time since the request."""
        speech = Speech(waveform=waveform, sample_rate=self.sample_rate, codes=chunks)
        total = time.perf_counter() - request.started
        speech.metadata = {
            "frames": int(sum(c.shape[1] for c in chunks)),
            "chunks": len(chunks),
            "steps": request.settings.num_step * len(chunks),
            "seconds": speech.seconds,
            "precision": self.precision,
            "timings": {
                **timings,
                "total": total,
                **{f"model.{k}": v for k, v in request.timings.items()},
            },
            "rtf": total / max(speech.seconds, 1e-9),
        }
        return speech

    def _plan(
        self, text, target_len, ref_text, ref_frames, speed, settings, piece_seconds=None
    ) -> list[_Piece]:
        """The pieces to generate: the whole text, or upstream's ``_generate_chunked``: ~15 s pieces
        (``piece_seconds``: pieces of that length) split at punctuation, where without a reference
        the first piece becomes the reference for the rest."""
        if piece_seconds is None:
            if target_len <= int(settings.audio_chunk_threshold * self.frame_rate):
                return [_Piece(text, target_len, ref_text, ref_frames)]
            piece_seconds = settings.audio_chunk_duration
        chars_per_piece = int(piece_seconds * self.frame_rate / (target_len / len(text)))
        plan: list[_Piece] = []
        for index, piece in enumerate(
            chunk_text_punctuation(text, chars_per_piece, min_chunk_len=3)
        ):
            if ref_frames is None and index > 0:
                first = plan[0]
                plan.append(
                    _Piece(
                        piece,
                        estimate_frames(piece, first.text, first.frames, speed),
                        first.text,
                        first.frames,
                        True,
                    )
                )
            else:
                plan.append(
                    _Piece(
                        piece,
                        estimate_frames(piece, ref_text, ref_frames, speed),
                        ref_text,
                        ref_frames,
                    )
                )
        return plan

    def _check_row(self, piece: _Piece, language, instruct, denoise: bool) -> None:
        """Refuse a piece whose conditional row the LLM cannot take (its position table) or should
        not (the attention memory budget), or whose text ids lie past the embedding table (a
        tokenizer of another model), before anything runs."""
        ids = text_ids(
            self.tokenizer,
            piece.text,
            ref_text=piece.ref_text,
            language=language,
            instruct=instruct,
            denoise=denoise and piece.ref_frames is not None,
        )
        if self.text_vocab and max(ids) >= self.text_vocab:
            raise ArtifactError(
                f"the tokenizer gives token id {max(ids)} but the model's embedding table has {self.text_vocab} rows: "
                f"tokenizer.json does not belong to these graphs; re-download or rebuild {self.root}"
            )
        prompt = len(ids)
        row = prompt + (piece.ref_frames or 0) + piece.frames
        if row > self.max_row:
            reference = f", {piece.ref_frames} for the reference" if piece.ref_frames else ""
            raise ValueError(
                f"this request needs a row of {row} positions ({prompt} for the text{reference}, {piece.frames} for "
                f"the speech); the model takes at most {self.max_row}, set by {self.max_row_reason}. Shorten the text "
                "or add punctuation so that it can be split, use a shorter reference, or ask for a shorter duration"
            )

    def _post_process(
        self, waveform: np.ndarray, ref_rms: float | None, settings: GenerationSettings
    ) -> np.ndarray:
        """Upstream's ``_post_process_audio``: silence removal, loudness, fades and padding."""
        if settings.postprocess_output:
            waveform = audio_ops.remove_silence(
                waveform, self.sample_rate, mid_sil=500, lead_sil=100, trail_sil=100
            )
        if ref_rms is not None and ref_rms < 0.1:
            waveform = waveform * ref_rms / 0.1
        elif ref_rms is None and waveform.size:
            peak = np.abs(waveform).max()
            if peak > 1e-6:
                waveform = waveform / peak * 0.5
        return audio_ops.fade_and_pad(
            waveform.astype(np.float32),
            settings.pad_duration,
            settings.fade_duration,
            self.sample_rate,
        )


def as_request(text: str | Request, options: dict) -> Request:
    """``generate``'s first argument and keyword options as one :class:`Request`."""
    if isinstance(text, Request):
        if options:
            raise ValueError(
                f"a Request carries its options: give {', '.join(options)} in it, not beside it"
            )
        return text
    return Request.from_options({"text": text, **options})


@dataclass
class _Job:
    """A checked request, planned: its pieces, settings, conditioning, random draws and progress."""

    plan: list[_Piece]
    settings: GenerationSettings
    language: str | None
    instruct: str | None
    ref_codes: np.ndarray | None
    ref_rms: float | None
    rng: np.random.Generator
    steps: _StepCounter
    started: float
    timings: dict[str, float]  # seconds in each graph so far


@dataclass
class _Piece:
    """One generation of a request: its text and length, and its reference (the given one, or
    with ``ref_from_first`` the first piece's codes)."""

    text: str
    frames: int
    ref_text: str | None
    ref_frames: int | None
    ref_from_first: bool = False


class _StepCounter:
    """Counts unmasking steps across pieces, reports them to the caller's progress callback, and
    stops the work when the caller says so."""

    def __init__(
        self, progress: Progress | None, total: int, should_stop: Callable[[], bool] | None = None
    ):
        self.progress, self.total, self.done, self.should_stop = progress, total, 0, should_stop

    def step(self, _step: int, _num_step: int) -> None:
        self.done += 1
        if self.should_stop is not None and self.should_stop():
            logger.info("stopped an abandoned synthesis after step %d of %d", self.done, self.total)
            raise Cancelled(
                f"stopped after step {self.done} of {self.total}: the request was abandoned"
            )
        if self.progress is not None:
            self.progress(self.done, self.total)
