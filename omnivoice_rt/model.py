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
  Whisper large-v3-turbo through transformers; see :mod:`omnivoice_rt.audio.asr`), an unknown language
  is an error rather than a warning, and bad input raises ``ValueError`` with a hint.

A call goes: a :class:`~omnivoice_rt.request.Request` (checked) -> a plan of pieces
(:mod:`omnivoice_rt.engine.plan`) -> for each piece, the prompt (:mod:`omnivoice_rt.engine.prompt`) and the
unmasking loop (:mod:`omnivoice_rt.engine.unmask`) over the guided forward (:mod:`omnivoice_rt.engine.forward`)
-> the codec -> post-processing -> :class:`~omnivoice_rt.speech.Speech`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from omnivoice_rt import dialogue
from omnivoice_rt.artifacts.bidirectional import position_table
from omnivoice_rt.artifacts.manifest import ArtifactError, Manifest
from omnivoice_rt.audio import ops as audio_ops
from omnivoice_rt.audio.asr import Transcriber
from omnivoice_rt.audio.formats import Resampler
from omnivoice_rt.audio.reference import encode_reference
from omnivoice_rt.captions import Caption
from omnivoice_rt.engine.forward import Backbone, GuidedForward
from omnivoice_rt.engine.kernels import KERNELS
from omnivoice_rt.engine.matmul import fallback as fallback_matmul
from omnivoice_rt.engine.matmul import resolve as resolve_matmul
from omnivoice_rt.engine.plan import Piece, RowLimits, check_row, plan_parts
from omnivoice_rt.engine.prompt import Prompt, TextTokenizer, build_prompt
from omnivoice_rt.engine.qgemm import RewriteError
from omnivoice_rt.engine.rewritten import integer_graphs
from omnivoice_rt.engine.sessions import graph_path, load_graphs
from omnivoice_rt.engine.unmask import unmask
from omnivoice_rt.errors import Cancelled
from omnivoice_rt.limits import max_row

# PRESETS, GenerationSettings, check_text and Speech are importable from here too.
from omnivoice_rt.request import (
    PRESETS,  # noqa: F401
    GenerationSettings,
    Request,
    check_text,  # noqa: F401
    options_signature,
)
from omnivoice_rt.speech import Speech
from omnivoice_rt.text.script import has_tags
from omnivoice_rt.voice_prompt import VoicePrompt

logger = logging.getLogger(__name__)

Progress = Callable[[int, int], None]
# stream(sentences=True): pieces of about a sentence, sentences joined up to this length
SENTENCE_SECONDS = 4.0


class OmniVoiceONNX:
    """OmniVoice text-to-speech on ONNX Runtime. Build with :meth:`load`."""

    def __init__(self, root: Path, precision: str, graphs: dict, codec, manifest: Manifest):
        self.root = root
        self.precision = precision
        self.repaired_llm: Path | None = None  # set when the folder's causal LLM was repaired
        self.matmul = ("fp32", "asked for")  # the kernel of the LLM's products, and why
        self.graphs = graphs
        self.codec = codec
        self.manifest = manifest
        self.config = config = manifest.model
        self.num_codebooks = config.num_audio_codebook
        self.mask_id = config.audio_mask_id
        # Rates come from the codec's graphs (measured at load), not from a manifest.
        self.sample_rate = codec.sample_rate
        self.frame_rate = codec.frame_rate
        self.tokenizer = TextTokenizer(root / "tokenizer.json")
        self.backbone = Backbone(graphs, config.head_dim)
        table = position_table(graphs["llm_decoder"].path)
        row, reason = max_row(
            config.num_attention_heads or 16, table or config.max_position_embeddings
        )
        vocab = config.text_vocab_size or 0  # rows of the text embedding table
        self.limits = RowLimits(row, reason, vocab, root)
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
        matmul: str | None = None,
    ) -> OmniVoiceONNX:
        """Open every graph of ``precision`` (int4, fp16, fp32 or cuda).

        ``source`` is an artifact folder or a Hub repo id; None means ``$OMNIVOICE_REPO`` or
        onnx-community/OmniVoice-Onnx (see :mod:`omnivoice_rt.artifacts.hub`). ``matmul``: the kernel of the
        LLM's products on the CPU, ``auto`` (measured here), ``fp32``, ``int8``, ``qgemm-row`` or
        ``qgemm`` (None: ``$OMNIVOICE_MATMUL``, else auto; :mod:`omnivoice_rt.engine.matmul`). The
        integer GEMM's graphs are made at the first load and kept (:mod:`omnivoice_rt.engine.qgemm`); when
        they cannot be had, MatMulNBits multiplies, with a warning."""
        from omnivoice_rt.artifacts.hub import resolve_artifacts

        root, manifest, overrides = resolve_artifacts(source, precision, download_progress)
        llm = graph_path(root, manifest, precision, "llm_decoder", overrides)
        kernel, why = (
            ("fp32", "not on the CPU")
            if precision == "cuda"
            else resolve_matmul(matmul, llm, threads)
        )

        def load(kernel: str, overrides: dict) -> tuple[dict, object]:
            return load_graphs(
                root, precision, providers, verify, threads, overrides, manifest, kernel
            )

        if KERNELS[kernel].rounding is None:
            graphs, codec = load(kernel, overrides)
        else:
            try:
                rewritten = integer_graphs(root, manifest, precision, overrides, kernel)
                graphs, codec = load(kernel, {**overrides, **rewritten})
            except (ArtifactError, RewriteError) as exc:
                fallback = fallback_matmul(llm, threads)
                # what is wrong beyond the rewrite (a missing codec...) is raised here, as it is
                graphs, codec = load(fallback, overrides)
                kernel, why = fallback, f"{kernel} could not be had: {exc}"
                logger.warning("the LLM multiplies with MatMulNBits (%s): %s", kernel, why)
        voice = cls(root, precision, graphs, codec, manifest)
        voice.repaired_llm = overrides.get("llm_decoder")
        voice.matmul = (kernel, why)
        return voice

    @property
    def max_row(self) -> int:
        """The longest conditional row this model runs (see :mod:`omnivoice_rt.engine.plan`)."""
        return self.limits.max_row

    @property
    def max_row_reason(self) -> str:
        return self.limits.reason

    def forward_for(self, prompt: Prompt, settings: GenerationSettings, timings=None):
        """The model as the unmasking loop needs it for ``prompt``: target codes -> (cond,
        uncond) logits (:class:`~omnivoice_rt.engine.forward.GuidedForward`)."""
        return GuidedForward(self.backbone, prompt, settings, timings)

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
        boundary=None,
    ) -> VoicePrompt:
        """Encode a reference recording (path, bytes or (array, sample_rate)) and its transcript;
        without ``ref_text``, the speech recogniser writes it (``language`` helps it), as upstream.
        ``boundary()``: called between the stages, as ``generate``'s is between steps."""
        return encode_reference(
            self.codec, ref_audio, ref_text, preprocess_prompt, language, self.transcriber, boundary
        )

    # ------------------------------------------------------------------ synthesis

    @options_signature
    def generate(
        self,
        text: str | Request,
        *,
        progress=None,
        should_stop=None,
        boundary=None,
        speakers: dict[str, dict] | None = None,
        script: bool = False,
        turn_pause: float = dialogue.TURN_PAUSE_S,
        **options,
    ) -> Speech:
        """Speech for ``text``: a :class:`Request`, or a text with the options of ``OPTIONS`` as keyword
        arguments (``language``, ``instruct``, ``ref_audio`` with ``ref_text`` or ``voice_prompt``,
        ``duration``, ``speed``, ``seed``, ``preset`` (``best`` here) and the settings of
        :class:`GenerationSettings`). ``progress(done, total)`` is told each unmasking step.

        ``should_stop()`` is asked after every unmasking step; when it says yes, :class:`Cancelled`
        is raised there (a server stops the work of a client that went away). ``boundary(left)``
        is called at every point where the work may pause, none much more than a step apart:
        after each step, before each piece's prompt, before each piece's decode and each
        segment's post-processing (a server's scheduler gives the CPU to another request there;
        it may block, and raise to stop the work); ``left`` is the work left before the call's
        next result (the next piece of ``stream``, the whole of ``generate``) in frame-steps,
        each unmasking step counting the target frames it runs over. Long texts are made
        in ~15 s pieces, joined and post-processed as one waveform, as upstream does; a text's
        pauses (``[pause:1s]``, SSML) split it into segments, each post-processed so, with the
        silences between them exact to the sample. ``Speech.captions`` says where each piece is.

        A dialogue script (:mod:`omnivoice_rt.dialogue`): a text with ``[voice:NAME]`` tags, or
        ``script=True`` for lines starting ``Name:``, spoken turn by turn in the voices of
        ``speakers`` (a name -> options table: ``{"Ann": {"instruct": "female"}}``), with
        ``turn_pause`` seconds between turns; ``progress`` is then told each turn, and each
        caption names its ``speaker``."""
        if isinstance(text, str) and (speakers is not None or script or has_tags(text)):
            made = dialogue.prepare(text, options, speakers, script, turn_pause)
            return dialogue.speak(self, made, progress, should_stop)
        job = self._prepare(as_request(text, options), progress, should_stop, boundary=boundary)
        job.steps.whole = True  # the work left before a result is all of it
        made = list(self._unmask(job))
        unmasked = time.perf_counter()
        waves = []
        for _piece, codes in made:
            job.steps.between(0.0)
            waves.append(self.codec.decode(codes, boundary=lambda: job.steps.between(0.0)))
        decoded = time.perf_counter()
        placed = []  # each segment's waveform and captions
        for segment in range(len(job.silences) - 1):
            job.steps.between(0.0)
            mine = [i for i, (piece, _codes) in enumerate(made) if piece.segment == segment]
            joined = audio_ops.cross_fade([waves[i] for i in mine], self.sample_rate)
            waveform, where = self._post_process(joined, job.ref_rms, job.settings)
            at, spans = 0, []  # where each piece lies in the joined waveform
            for i in mine:
                spans.append((at, at + waves[i].shape[-1]))
                at += waves[i].shape[-1] + self._seam  # cross_fade's silence between them
            pieces = [made[i][0] for i in mine]
            placed.append((waveform[0], self._captions(pieces, spans, where)))
        waveform, captions = self._joined(placed, job)
        timings = {
            "unmask": unmasked - job.started,
            "decode": decoded - unmasked,
            "postprocess": time.perf_counter() - decoded,
        }
        speech = self._speech(
            waveform, [codes for _p, codes in made], job, timings, captions, last=True
        )
        speech.texts = [piece.text for piece, _codes in made]
        return speech

    @options_signature
    def stream(
        self,
        text: str | Request,
        *,
        sentences: bool = False,
        first_seconds: float | None = None,
        progress=None,
        should_stop=None,
        boundary=None,
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
        break where they join. ``first_seconds`` (a server's streams: ``--first-piece``)
        makes a long text's first piece about that long, its sentences whole, and the next ones
        each 1.3 times the one before up to upstream's ~15 s: its first audio sooner, with the
        same caveats."""
        # Bad input fails here, not at the first piece.
        request = as_request(text, options)
        job = self._prepare(request, progress, should_stop, sentences, boundary, first_seconds)
        return self._stream(job)

    def _stream(self, job: _Job) -> Iterator[Speech]:
        count = len(job.plan)
        segment = -1
        for index, (piece, codes) in enumerate(self._unmask(job)):
            unmasked = time.perf_counter()
            raw = self.codec.decode(codes, boundary=lambda: job.steps.between(0.0))
            decoded = time.perf_counter()
            job.steps.between(0.0)
            waveform, where = self._post_process(raw, job.ref_rms, job.settings)
            captions = self._captions([piece], [(0, raw.shape[-1])], where)
            # the seam's silence (or a pause) instead of the leading pad; the trailing pad only
            # after the last piece (or the pause asked there)
            before = self._gap(job, piece.segment) if piece.segment != segment else None
            before = self._seam if before is None and index > 0 else before
            after = self._gap(job, -1) if index == count - 1 else 0
            waveform, captions = self._between(waveform[0], captions, before, after, job)
            segment = piece.segment
            timings = {"decode": decoded - unmasked, "postprocess": time.perf_counter() - decoded}
            speech = self._speech(
                waveform, [codes], job, timings, captions, last=index == count - 1
            )
            speech.texts = [piece.text]
            # "pieces": the older name of "pieces_in_request", kept for those who read it
            speech.metadata.update(
                piece=index, pieces_in_request=count, pieces=count, text=piece.text
            )
            yield speech

    # ------------------------------------------------------------------ placing the pieces

    @property
    def _seam(self) -> int:
        return audio_ops.seam_length(self.sample_rate)  # cross_fade's silence between pieces

    def _gap(self, job: _Job, segment: int) -> int | None:
        """Samples of silence asked before ``segment`` (-1: after the last), None if none was:
        the first segment keeps its pad then, the others the seam between pieces."""
        seconds = job.silences[segment]
        if seconds is not None:
            return round(seconds * self.sample_rate)
        return None if segment in (0, -1, len(job.silences) - 1) else self._seam

    def _between(self, waveform, captions, before: int | None, after: int | None, job: _Job):
        """``waveform`` (post-processed: a pad each side) with its leading pad replaced by
        ``before`` samples of silence and its trailing one by ``after`` (None: kept)."""
        pad = int(job.settings.pad_duration * self.sample_rate)
        if waveform.shape[-1] < 2 * pad:  # nothing was left to fade and pad
            pad = 0
        if after is not None:
            kept = waveform[: waveform.shape[-1] - pad]
            waveform = np.concatenate([kept, np.zeros(after, np.float32)])
        if before is not None:
            waveform = np.concatenate([np.zeros(before, np.float32), waveform[pad:]])
            captions = [caption.moved(before - pad) for caption in captions]
        return waveform, captions

    def _joined(self, placed: list, job: _Job) -> tuple[np.ndarray, list[Caption]]:
        """The segments' waveforms in order, the silences asked between them (or the seam), and
        their captions where they now lie. One segment without pauses: its waveform as it is."""
        waves, captions, at = [], [], 0
        last = len(placed) - 1
        for segment, (waveform, mine) in enumerate(placed):
            after = self._gap(job, -1) if segment == last else 0
            waveform, mine = self._between(waveform, mine, self._gap(job, segment), after, job)
            waves.append(waveform)
            captions += [caption.moved(at) for caption in mine]
            at += waveform.shape[-1]
        return np.concatenate(waves), captions

    def _captions(self, pieces: list[Piece], spans: list, where: np.ndarray) -> list[Caption]:
        """Each piece's caption: the samples of the post-processed waveform that came from its
        span of the waveform before (``where``: :meth:`_post_process`'s map)."""
        kept = np.flatnonzero(where >= 0)  # the samples that came from the waveform before
        sources = where[kept]  # increasing
        captions = []
        for piece, (start, end) in zip(pieces, spans, strict=True):
            first, last = np.searchsorted(sources, [start, end], side="left")
            if last > first:  # a piece trimmed away entirely has none
                start_sample, end_sample = int(kept[first]), int(kept[last - 1]) + 1
                captions.append(
                    Caption(start_sample, end_sample, self.sample_rate, piece.text, piece.written)
                )
        return captions

    def _prepare(
        self,
        request: Request,
        progress,
        should_stop,
        sentences=False,
        boundary=None,
        first_seconds=None,
    ) -> _Job:
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

        piece_seconds = SENTENCE_SECONDS if sentences else None
        plan = plan_parts(
            request.parts,
            ref_text,
            ref_frames,
            request.duration,
            request.speed,
            settings,
            self.frame_rate,
            piece_seconds,
            first_seconds,
        )
        for piece in plan.pieces:
            check_row(
                self.tokenizer, piece, piece.language, instruct, settings.denoise, self.limits
            )
        return _Job(
            plan=plan.pieces,
            silences=plan.silences,
            settings=settings,
            instruct=instruct,
            ref_codes=ref_codes,
            ref_rms=voice_prompt.rms if voice_prompt is not None else None,
            rng=np.random.default_rng(request.seed),
            steps=_StepCounter(
                progress,
                settings.num_step,
                [piece.frames for piece in plan.pieces],
                should_stop,
                boundary,
            ),
            started=started,
            timings={},
            normalized_text=request.spoken_text if request.normalized else None,
            sample_rate=request.sample_rate,
        )

    def _unmask(self, job: _Job) -> Iterator[tuple[Piece, np.ndarray]]:
        """Each piece of the plan and its codes, in order (a piece may take the first one's codes as its reference)."""
        first = None
        for index, piece in enumerate(job.plan):
            job.steps.start(index)
            prompt = build_prompt(
                self.tokenizer,
                piece.text,
                piece.frames,
                num_codebooks=self.num_codebooks,
                mask_id=self.mask_id,
                ref_text=piece.ref_text,
                ref_codes=first if piece.ref_from_first else job.ref_codes,
                language=piece.language,
                instruct=job.instruct,
                denoise=job.settings.denoise,
            )
            forward = self.forward_for(prompt, job.settings, job.timings)
            codes = unmask(
                forward,
                self.num_codebooks,
                piece.frames,
                self.mask_id,
                job.settings,
                job.rng,
                job.steps.step,
            )
            first = codes if first is None else first
            yield piece, codes

    def _speech(
        self,
        waveform: np.ndarray,
        chunks: list[np.ndarray],
        job: _Job,
        timings: dict,
        captions: list[Caption],
        last: bool,
    ) -> Speech:
        """A result with what it took: this part's timings, the model's so far, the time since
        the request; at the rate asked (``last``: the request's last result)."""
        waveform, captions, rate = self._at_rate(waveform, captions, job, last)
        speech = Speech(waveform, rate, chunks, captions=captions)
        total = time.perf_counter() - job.started
        speech.metadata = {
            "frames": int(sum(c.shape[1] for c in chunks)),
            "pieces_in_result": len(chunks),
            "chunks": len(chunks),  # the older name of "pieces_in_result"
            "steps": job.settings.num_step * len(chunks),
            "seconds": speech.seconds,
            "precision": self.precision,
            "timings": {
                **timings,
                "total": total,
                **{f"model.{k}": v for k, v in job.timings.items()},
            },
            "rtf": total / max(speech.seconds, 1e-9),
        }
        if job.normalized_text is not None:
            speech.metadata["normalized_text"] = job.normalized_text
        return speech

    def _at_rate(self, waveform: np.ndarray, captions: list[Caption], job: _Job, last: bool):
        """``waveform`` and its captions at the rate the request asked (``sample_rate``): every
        result of a request through one streaming resampler, flushed with the last, so that a
        stream's pieces joined are the whole resampled at once; captions keep their seconds."""
        rate = job.sample_rate or self.sample_rate
        if rate == self.sample_rate:
            return waveform, captions, rate
        if job.resampler is None:
            job.resampler = Resampler(self.sample_rate, rate)
        return *job.resampler.placed(waveform, captions, last), rate

    def _post_process(
        self, waveform: np.ndarray, ref_rms: float | None, settings: GenerationSettings
    ) -> tuple[np.ndarray, np.ndarray]:
        """Upstream's ``_post_process_audio``: silence removal, loudness, fades and padding; and
        where each sample came from (the index in ``waveform``, -1 for silence added)."""
        where = np.arange(waveform.shape[-1])
        if settings.postprocess_output:
            waveform, where = audio_ops.remove_silence_placed(
                waveform, self.sample_rate, mid_sil=500, lead_sil=100, trail_sil=100
            )
        if ref_rms is not None and ref_rms < 0.1:
            waveform = waveform * ref_rms / 0.1
        elif ref_rms is None and waveform.size:
            peak = np.abs(waveform).max()
            if peak > 1e-6:
                waveform = waveform / peak * 0.5
        padded = audio_ops.fade_and_pad(
            waveform.astype(np.float32),
            settings.pad_duration,
            settings.fade_duration,
            self.sample_rate,
        )
        pad = (padded.shape[-1] - waveform.shape[-1]) // 2
        return padded, np.concatenate([np.full(pad, -1), where, np.full(pad, -1)])


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

    plan: list[Piece]
    silences: list[float | None]  # before each segment and after the last (plan.Plan)
    settings: GenerationSettings
    instruct: str | None
    ref_codes: np.ndarray | None
    ref_rms: float | None
    rng: np.random.Generator
    steps: _StepCounter
    started: float
    timings: dict[str, float]  # seconds in each graph so far
    normalized_text: str | None = None  # what the model read, where normalization changed the text
    sample_rate: int | None = None  # the rate asked for (None: the model's)
    resampler: Resampler | None = None  # the one resampler of all its pieces, where one is asked


class _StepCounter:
    """Counts unmasking steps across pieces, reports them to the caller's progress callback,
    stops the work when the caller says so, and calls the caller's ``boundary(left)`` between
    steps and the other stages (``between``), with the work left before the next result."""

    def __init__(
        self,
        progress: Progress | None,
        num_step: int,
        frames: list[int],
        should_stop: Callable[[], bool] | None = None,
        boundary: Callable[[float], None] | None = None,
    ):
        self.progress, self.total, self.done = progress, num_step * len(frames), 0
        self.num_step, self.frames, self.should_stop = num_step, frames, should_stop
        self.boundary = boundary
        self.piece = 0  # the piece being unmasked
        self.whole = False  # generate: the next result is the whole; stream: the next piece

    def start(self, piece: int) -> None:
        """Piece ``piece`` is about to be unmasked: a boundary before its prompt."""
        self.piece = piece
        self.between()

    def step(self, _step: int, _num_step: int) -> None:
        self.done += 1
        self._stop_if_asked()
        if self.progress is not None:
            self.progress(self.done, self.total)
        if self.boundary is not None:
            self.boundary(self.left())

    def between(self, left: float | None = None) -> None:
        """A boundary between two stages of the work (a piece's prompt, a decode, a
        post-processing; ``left``: the work left, where not the unmasking's): the caller may
        stop it or pause it here."""
        self._stop_if_asked()
        if self.boundary is not None:
            self.boundary(self.left() if left is None else left)

    def left(self) -> float:
        """Frame-steps left before the next result: the current piece's remaining steps over
        its frames, and with ``whole`` every later piece's."""
        in_piece = self.done - self.piece * self.num_step
        left = (self.num_step - in_piece) * self.frames[self.piece]
        if self.whole:
            left += self.num_step * sum(self.frames[self.piece + 1 :])
        return float(left)

    def _stop_if_asked(self) -> None:
        if self.should_stop is not None and self.should_stop():
            logger.info("stopped an abandoned synthesis after step %d of %d", self.done, self.total)
            raise Cancelled(
                f"stopped after step {self.done} of {self.total}: the request was abandoned"
            )
