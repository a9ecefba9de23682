"""Command line: ``python -m omnivoice_rt {synthesize,dub,batch,roundtrip,prompt,eval,inspect,align} --help``.

python -m omnivoice_rt synthesize --model-dir artifacts --text "Hello." --output hello.wav
python -m omnivoice_rt prompt --model-dir artifacts --ref-audio me.wav --ref-text "..." --output me.npz
python -m omnivoice_rt synthesize --model-dir artifacts --voice-prompt me.npz --text "..." --output out.wav
python -m omnivoice_rt dub --model-dir artifacts --subtitles film.srt --output film.wav --voice-prompt me.npz
python -m omnivoice_rt batch --model-dir artifacts --input items.jsonl --output-dir out/ --workers 2
python -m omnivoice_rt roundtrip --model-dir artifacts --input in.wav --output out.wav
python -m omnivoice_rt eval --mode rtf --model-dir artifacts
python -m omnivoice_rt eval --mode quality --model-dir artifacts --presets best,balanced,fast,turbo
python -m omnivoice_rt inspect onnx-community/OmniVoice-Onnx --precision int4
python -m omnivoice_rt align --audio speech.wav --text "What it says." --output words.json
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

from omnivoice_rt import captions
from omnivoice_rt.artifacts.manifest import PROFILE_DIRS
from omnivoice_rt.errors import REPORTED

logger = logging.getLogger("omnivoice_rt")


def _load(args, matmul: str | None = None):
    from omnivoice_rt.model import OmniVoiceONNX

    voice = OmniVoiceONNX.load(
        args.model_dir, args.precision, threads=args.threads, matmul=matmul or args.matmul
    )
    if getattr(args, "asr_model", None) and getattr(args, "ref_audio", None) and not args.ref_text:
        from omnivoice_rt.audio.asr import Transcriber

        voice.asr = Transcriber.load(args.asr_model)
    return voice


# output files whose suffix names a format of their own (others: what libsndfile makes of it)
SUFFIXES = {".mp3": "mp3", ".opus": "opus", ".ogg": "opus", ".aac": "aac"}


def _output_format(path: str, given: str | None) -> str | None:
    """The format an output is written in: ``--format``'s, else its suffix's (``SUFFIXES``);
    None: what libsndfile makes of the suffix (wav, flac)."""
    return given or SUFFIXES.get(Path(path).suffix.lower())


def _write(path: str, waveform, rate: int, given: str | None = None) -> None:
    """``waveform`` (at ``rate``) into ``path`` in its format (:func:`_output_format`; ``given``:
    ``--format``); aac as ADTS (FFmpeg's encoder through PyAV)."""
    import soundfile as sf

    from omnivoice_rt.audio.formats import AudioWriter

    kind = _output_format(path, given)
    if kind is None:
        sf.write(path, waveform.reshape(-1), rate)
        return
    writer = AudioWriter(kind, rate, streamed=False)
    Path(path).write_bytes(writer.write(waveform) + writer.close())


def _writable(path, flag: str) -> None:
    """A file the command will write, checked before any work: a file's name (not a folder's)
    in a folder that exists."""
    if path is None:
        return
    target = Path(path)
    if target.is_dir():
        raise ValueError(f"{flag} {path} is a folder; name a file in it")
    if not target.parent.is_dir():
        raise ValueError(
            f"{flag} {path}: the folder {target.parent} does not exist; create it or write "
            "elsewhere"
        )
    if not os.access(target.parent, os.W_OK) or (
        target.exists() and not os.access(target, os.W_OK)
    ):
        raise ValueError(f"{flag} {path}: not writable here; write elsewhere")


def _check_output(args) -> None:
    """The output's folder, format (``--format``, else its suffix's) and ``--sample-rate``,
    checked (an encoder the format needs present, a rate it takes) before any model loads."""
    import soundfile as sf

    from omnivoice_rt.audio.formats import check_rate, missing_encoder

    _writable(args.output, "--output")
    kind = _output_format(args.output, args.format)
    if kind is None and Path(args.output).suffix[1:].upper() not in sf.available_formats():
        raise ValueError(
            f"{args.output}: no audio format is named by its suffix; end it .wav, .flac, .mp3, "
            ".opus, .ogg or .aac, or give --format"
        )
    kind = kind or "wav"  # libsndfile's wav or flac: the same rates
    missing = missing_encoder(kind)
    if missing:
        raise ValueError(f"{args.output}: {missing}")
    if getattr(args, "sample_rate", None) is not None:
        check_rate(kind, args.sample_rate)


def format_flag(p) -> None:
    from omnivoice_rt.audio.formats import FORMATS

    p.add_argument(
        "--format",
        choices=list(FORMATS),
        help="the audio's format (default: the output's suffix: .mp3, .opus or .ogg, .aac, else "
        "wav; flac by .flac; pcm: raw 16-bit samples)",
    )


def cmd_synthesize(args) -> int:
    from omnivoice_rt.request import OPTIONS, door_request

    options = {name: getattr(args, name) for name in OPTIONS}
    if args.text is not None and args.script is not None:
        raise ValueError("give --text TEXT or --script FILE, not both")
    if args.text is None and args.script is None:
        raise ValueError("give the text to say: --text TEXT, or --script FILE for a dialogue")
    from omnivoice_rt.text.script import has_tags

    scripted = args.script is not None or has_tags(args.text)  # [voice:NAME] tags: a script
    if not scripted and (args.speaker or args.voices):
        raise ValueError("--speaker and --voices name a script's voices: give --script FILE")
    if not scripted:
        request = door_request(options)
    else:
        speak = _script(args, options)  # checked before the model loads
    kind = captions.format_of(args.captions) if args.captions else None  # before the model
    word_kind = _word_captions(args.word_captions, args.align_model)
    _writable(args.captions, "--captions")
    _writable(args.word_captions, "--word-captions")
    _check_output(args)
    voice = _load(args)

    def progress(done: int, total: int) -> None:
        what = "turn" if scripted else "step"
        print(f"\r{what} {done}/{total}", end="", file=sys.stderr, flush=True)

    if not scripted:
        speech = voice.generate(request, progress=progress)
    else:
        speech = speak(voice, progress)
    print(file=sys.stderr)
    _write(args.output, speech.waveform, speech.sample_rate, args.format)
    if kind:
        Path(args.captions).write_text(captions.write(speech.captions, kind), encoding="utf-8")
    if word_kind:
        from omnivoice_rt.text.languages import resolve_language

        language = resolve_language(options.get("language"))
        words = speech.align_words(language, args.align_model)
        document = captions.write_words(speech.captions, words, word_kind)
        Path(args.word_captions).write_text(document, encoding="utf-8")
    meta = speech.metadata
    if "normalized_text" in meta:
        print(f"read as: {meta['normalized_text']}", file=sys.stderr)
    print(
        f"{args.output}: {meta['frames']} frames, {meta['seconds']:.2f} s of audio in "
        f"{meta['timings']['total']:.2f} s, real-time factor {meta['rtf']:.3f} ({meta['precision']})"
    )
    return 0


def _script(args, options: dict):
    """``--script FILE``'s dialogue (its "Name:" lines and tags), or ``--text`` with
    ``[voice:NAME]`` tags (its tags alone), checked (its turns, each speaker's voice:
    ``--speaker``, ``--voices``); returns ``speak(voice, progress) -> Speech``."""
    from omnivoice_rt import dialogue
    from omnivoice_rt.limits import MAX_SCRIPT_CHARS
    from omnivoice_rt.request import door_request
    from omnivoice_rt.text import script
    from omnivoice_rt.voices import VoiceLibrary

    text = args.text
    if args.script is not None:
        path = Path(args.script)
        if path.stat().st_size > 4 * MAX_SCRIPT_CHARS:  # UTF-8: at most 4 bytes a character
            raise ValueError(
                f"--script {path}: a script is at most {MAX_SCRIPT_CHARS:,} characters"
            )
        text = path.read_text(encoding="utf-8")
    given = dialogue.given_voices(args.speaker or [], "--speaker")
    speakers = dialogue.library_speakers(VoiceLibrary(args.voices), given)
    options = {name: value for name, value in options.items() if value is not None}
    options.pop("text", None)
    named_lines = args.script is not None
    made = dialogue.prepare(text, options, speakers, named_lines, args.turn_pause, door_request)
    named = {name.casefold() for name in script.speakers_of(made.turns)}
    for name in given:
        if name.casefold() not in named:  # a typo in either, most likely
            print(f"note: --speaker {name}: the script has no speaker {name!r}", file=sys.stderr)
    return lambda voice, progress: dialogue.speak(voice, made, progress)


def cmd_dub(args) -> int:
    import json

    from omnivoice_rt.dubbing import DubError, dub
    from omnivoice_rt.request import OPTIONS, door_request
    from omnivoice_rt.text import subtitles

    cues = subtitles.read(args.subtitles)  # before the model: a bad file costs nothing
    output = Path(args.output)
    captions_path = Path(args.captions or output.with_suffix(".srt"))
    if not args.captions and _same_file(captions_path, args.subtitles):  # film.srt -> film.wav
        captions_path = output.with_suffix(".dubbed.srt")
    report_path = Path(args.report or output.with_suffix(".json"))
    for flag, path in (
        ("--output", output),
        ("--captions", captions_path),
        ("--report", report_path),
    ):
        if _same_file(path, args.subtitles):
            raise ValueError(
                f"{flag} {path} is the subtitle file being dubbed; write the result elsewhere"
            )
    kind = captions.format_of(captions_path)
    _check_output(args)  # --output first: the others' default paths are beside it
    _writable(captions_path, "--captions")
    _writable(report_path, "--report")
    options = {name: getattr(args, name) for name in OPTIONS if hasattr(args, name)}
    options = {name: value for name, value in options.items() if value is not None}
    library, speakers = None, None
    if args.voices or args.voice:
        from omnivoice_rt.voices import VoiceLibrary

        library = VoiceLibrary(args.voices)
    if args.voice:
        options.update({k: v for k, v in library.options(args.voice).items() if v is not None})
    if args.voices:
        speakers = {entry.name: library.options(entry.name) for entry in library.entries()}
    voice = _load(args)

    def progress(done: int, total: int) -> None:
        print(f"\rcue {done}/{total}", end="", file=sys.stderr, flush=True)

    try:
        dubbed = dub(voice, cues, options, speakers, args.max_speed, door_request, progress)
    except DubError as exc:
        report_path.write_text(json.dumps(exc.report, indent=1, ensure_ascii=False) + "\n")
        print(f"error: {exc} (the report: {report_path})", file=sys.stderr)
        return 2
    print(file=sys.stderr)
    _write(str(output), dubbed.waveform, dubbed.sample_rate, args.format)
    captions_path.write_text(captions.write(dubbed.captions, kind), encoding="utf-8")
    report_path.write_text(json.dumps(dubbed.report, indent=1, ensure_ascii=False) + "\n")
    for warning in dubbed.report["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    print(
        f"{output}: {len(dubbed.captions)} cues in {dubbed.seconds:.2f} s; captions "
        f"{captions_path}, report {report_path}"
    )
    return 0


def _same_file(path, other) -> bool:
    """Whether ``path`` names the file ``other`` (an existing one, by any spelling of its path)."""
    return Path(path).resolve() == Path(other).resolve()


def cmd_batch(args) -> int:
    from omnivoice_rt.tools.batch import RESULTS, run_batch

    if args.matmul:  # the workers (processes, Ray actors) read it from their environment
        os.environ["OMNIVOICE_MATMUL"] = args.matmul
    counts = run_batch(
        args.input,
        args.output_dir,
        args.model_dir,
        args.precision,
        workers=args.workers,
        ray=args.ray,
        threads=args.threads,
        show_progress=not args.quiet,
    )
    print(
        f"made {counts['made']}, skipped {counts['skipped']}, failed {counts['failed']}: "
        f"{Path(args.output_dir) / RESULTS}"
    )
    return 1 if counts["failed"] else 0


def cmd_roundtrip(args) -> int:
    from omnivoice_rt.audio.ops import load_audio

    voice = _load(args)
    wav = load_audio(args.input, voice.sample_rate)
    wav = wav[:, : wav.shape[-1] - wav.shape[-1] % voice.codec.hop_length]
    codes = voice.codec.encode(wav)
    out = voice.codec.decode(codes)
    _write(args.output, out[0], voice.sample_rate)
    print(
        f"{args.output}: {codes.shape[1]} frames of {codes.shape[0]} codebooks, {out.shape[-1] / voice.sample_rate:.2f} s"
    )
    return 0


def cmd_align(args) -> int:
    """Each word of a text placed in a recording of it (``omnivoice_rt.align``), as JSON."""
    import json

    import soundfile as sf

    from omnivoice_rt.align import AlignError, align, features, load_aligner, words_of
    from omnivoice_rt.audio.formats import decoded
    from omnivoice_rt.audio.ops import load_audio
    from omnivoice_rt.limits import MAX_ALIGN_S, MAX_SCRIPT_CHARS
    from omnivoice_rt.text.languages import resolve_language

    language = resolve_language(args.language)  # a bad one is told before anything is read
    text = args.text if args.text is not None else _read_text(args.text_file, MAX_SCRIPT_CHARS)
    if not words_of(text):
        raise ValueError("the text has no words to place; give the recording's text (--text)")
    _writable(args.output, "--output")
    if not Path(args.audio).is_file():
        raise ValueError(f"--audio {args.audio}: no such file")

    def too_long(length: str) -> AlignError:
        return AlignError(
            f"{args.audio} is {length}; one alignment takes at most {MAX_ALIGN_S:.0f} s: cut it "
            "into parts (a paragraph at a time) and align each with its text"
        )

    try:
        seconds = sf.info(args.audio).duration
    except RuntimeError:  # not libsndfile's: AAC, M4A... through FFmpeg
        try:
            waveform = decoded(args.audio, features.RATE, MAX_ALIGN_S)
        except ValueError as exc:
            raise (too_long("longer") if "longer than" in str(exc) else exc) from None
        seconds = waveform.size / features.RATE
    else:
        if seconds > MAX_ALIGN_S:
            raise too_long(f"{seconds:.0f} s")
        waveform = load_audio(args.audio, features.RATE, MAX_ALIGN_S + 1)[0]  # the aligner's rate
    words = align(waveform, features.RATE, text, language, load_aligner(args.align_model))
    document = json.dumps({"words": [w.as_dict() for w in words]}, ensure_ascii=False, indent=1)
    if args.output:
        Path(args.output).write_text(document + "\n", encoding="utf-8")
        placed = sum(w.start is not None for w in words)
        print(f"{args.output}: {placed} of {len(words)} words placed in {seconds:.2f} s")
    else:
        print(document)
    return 0


def _word_captions(path: str | None, model: str | None) -> str | None:
    """The format of ``--word-captions`` (checked, with the aligner, before the model loads),
    or None."""
    if path is None:
        return None
    from omnivoice_rt.align import load_aligner

    kind = captions.format_of(path)
    load_aligner(model)
    return kind


def _read_text(path: str | None, limit: int) -> str:
    if path is None:
        raise ValueError("say what the recording says: --text TEXT or --text-file FILE")
    with open(path, encoding="utf-8") as file:
        text = file.read(limit + 1)
    if len(text) > limit:
        raise ValueError(f"{path} holds over {limit:,} characters: align it in parts")
    return text


def cmd_prompt(args) -> int:
    voice = _load(args)
    prompt = voice.create_voice_prompt(args.ref_audio, args.ref_text)
    prompt.save(args.output)
    print(f"{args.output}: {prompt.codes.shape[1]} frames, text {prompt.text!r}")
    return 0


def cmd_eval(args) -> int:
    """Real-time factor on this machine (equivalence with PyTorch is the build side's:
    ``python -m omnivoice_build.equivalence``), or the quality of presets against ``best``."""
    if args.mode == "quality":
        return eval_quality(args)
    voice = _load(args)
    text = (
        args.text or "This is a short sentence to measure how fast speech is made on this machine."
    )
    for run in range(args.runs):
        started = time.perf_counter()
        speech = voice.generate(text, num_step=args.num_step, seed=run)
        took = time.perf_counter() - started
        print(
            f"run {run}: {speech.seconds:.2f} s of audio in {took:.2f} s, real-time factor {took / speech.seconds:.3f}"
        )
    return 0


def eval_quality(args) -> int:
    from omnivoice_rt.audio.asr import Transcriber, asr_source
    from omnivoice_rt.engine.kernels import CHOICES
    from omnivoice_rt.errors import ArtifactError
    from omnivoice_rt.request import PRESETS
    from omnivoice_rt.tools import quality

    presets = [p.strip() for p in args.presets.split(",") if p.strip()]
    unknown = [p for p in presets if p not in PRESETS]
    if unknown or not presets:
        raise ValueError(
            f"--presets: unknown {', '.join(unknown) or '(none given)'}; use some of {', '.join(PRESETS)}"
        )
    if args.ref_audio and not args.ref_text:
        raise ValueError("--ref-audio needs --ref-text: what the reference recording says")
    sentences = quality.read_sentences(args.sentences) if args.sentences else quality.SENTENCES
    kernels = [k.strip().lower() for k in (args.matmul or "").split(",") if k.strip()]
    unknown = [k for k in kernels if k not in CHOICES]
    if unknown:
        raise ValueError(
            f"--matmul: unknown {', '.join(unknown)}; use some of {', '.join(CHOICES)}"
        )
    voice = {kernel: _load(args, kernel) for kernel in kernels} if len(kernels) > 1 else _load(args)
    hear = None  # --asr-model none: the error rate is not measured
    if (args.asr_model or asr_source()).strip().lower() != "none":
        try:
            recogniser = Transcriber.load(args.asr_model)
        except ArtifactError as exc:
            raise ArtifactError(
                f"{exc}; or pass --asr-model none to leave the error rate out"
            ) from exc

        def hear(audio, language):
            try:
                return recogniser.transcribe(audio, language)
            except ValueError:  # nothing recognised
                return ""

    speaker = (
        None
        if args.speaker_model.lower() == "none"
        else quality.SpeakerEncoder.load(args.speaker_model, args.threads)
    )
    output = Path(args.output)
    options = {"ref_audio": args.ref_audio, "ref_text": args.ref_text} if args.ref_audio else {}
    if args.instruct:
        options["instruct"] = args.instruct
    samples = quality.evaluate(
        voice, presets, sentences, hear, speaker, output, seed=args.seed, **options
    )
    print(quality.report(samples, output))
    first = samples[0].preset
    against = "the reference" if args.ref_audio else f"{first}'s audio of each sentence"
    heard = "error rate: not measured (--asr-model none); " if hear is None else ""
    print(
        f"{heard}similarity: to {against}; duration: against {first}'s; "
        f"{len(sentences)} sentences; {output}/quality.json, quality.svg, PRESET/N.wav"
    )
    return 0


def cmd_inspect(args) -> int:
    from omnivoice_rt.artifacts.inspect import inspect

    print("\n".join(inspect(args.source, args.precision)))
    return 0


def _steps(value: str):
    from omnivoice_rt.request import PRESETS

    return value if value in PRESETS else int(value)


def request_flags(parser, leave: tuple[str, ...] = ()) -> None:
    """A flag for each option of a request (``OPTIONS``) but those in ``leave``: ``--ref-audio``,
    ``--num-step``, ..., ``--denoise/--no-denoise``; one left out takes the preset's value
    (``balanced`` by default)."""
    from omnivoice_rt.request import DOOR_PRESET, OPTIONS

    for name, option in OPTIONS.items():
        if name in leave:
            continue
        flag, meaning = "--" + name.replace("_", "-"), option.help
        if option.kind == "bool":
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, help=meaning)
            continue
        kind = {"text": str, "file": str, "whole": int}.get(option.kind, float)
        if name == "num_step":
            kind = _steps  # a preset's name too: the older spelling of --preset
        if name == "preset":
            meaning += f" (default {DOOR_PRESET}; best: upstream's generation, exactly)"
        parser.add_argument(flag, type=kind, help=meaning)


def common_flags(p) -> None:
    """The flags every command that loads the model takes."""
    p.add_argument(
        "--model-dir",
        default=os.environ.get("OMNIVOICE_ARTIFACTS"),
        help="artifact folder or Hub repo id (default: $OMNIVOICE_ARTIFACTS, else the Hub repo "
        "$OMNIVOICE_REPO or onnx-community/OmniVoice-Onnx)",
    )
    p.add_argument("--precision", default="int4", choices=list(PROFILE_DIRS))
    p.add_argument("--threads", type=int, default=None, help="ONNX Runtime intra-op threads")
    p.add_argument(
        "--matmul",
        default=None,
        help="the LLM's kernel: auto, fp32, int8, qgemm-row, qgemm (default $OMNIVOICE_MATMUL, "
        "else auto); eval --mode quality takes several, comma-separated, and runs every "
        "preset on each",
    )
    p.add_argument("-v", "--verbose", action="store_true")


def align_model_flag(p) -> None:
    p.add_argument(
        "--align-model",
        default=os.environ.get("OMNIVOICE_ALIGN_MODEL"),
        help="the word aligner: espeak (the default: eSpeak NG, the align extra), or a CTC "
        "acoustic model's folder or Hub repo (model.onnx and aligner.json; docs/design.md "
        "section 10)",
    )


def asr_flag(p, help: str = "speech recogniser when --ref-text is left out") -> None:
    p.add_argument(
        "--asr-model",
        default=os.environ.get("OMNIVOICE_ASR_MODEL"),
        help=f"{help} (default onnx-community/whisper-base)",
    )


def synthesize_flags(p) -> None:
    from omnivoice_rt.dialogue import TURN_PAUSE_S
    from omnivoice_rt.limits import MAX_TURN_PAUSE_S

    p.add_argument("--output", required=True)
    format_flag(p)
    p.add_argument(
        "--script",
        metavar="FILE",
        help="say a dialogue script instead of --text: a UTF-8 file whose lines 'Name: text' "
        "(or [voice:Name] tags) are spoken turn by turn in each speaker's voice "
        "(docs/long-texts.md); the other flags are every turn's",
    )
    p.add_argument(
        "--speaker",
        action="append",
        metavar="NAME=VOICE",
        help="a script speaker's voice: a voice of --voices or a built-in one, else a voice "
        "design ('Ann=female, low pitch'); a name that is a voice's needs none; repeat it",
    )
    p.add_argument("--voices", metavar="DIR", help="a voice library: its voices by their names")
    p.add_argument(
        "--turn-pause",
        type=float,
        default=TURN_PAUSE_S,
        metavar="SECONDS",
        help=f"silence between two turns of a script (default {TURN_PAUSE_S:g}; at most "
        f"{MAX_TURN_PAUSE_S:g})",
    )
    p.add_argument(
        "--captions",
        metavar="FILE",
        help="also write where each piece was spoken, and its text: FILE.srt, .vtt or .json",
    )
    p.add_argument(
        "--word-captions",
        metavar="FILE",
        help="also write where each word was spoken (the align extra: eSpeak NG): FILE.srt (a cue "
        "a word), .vtt (a cue a piece, each word after its timestamp tag) or .json "
        '({"words": [{"word", "start", "end"}]}, null for a word not found)',
    )
    align_model_flag(p)
    request_flags(p)
    asr_flag(
        p,
        "speech recogniser when --ref-text is left out: a Whisper folder or Hub repo "
        "(onnx-community format)",
    )


def dub_flags(p) -> None:
    from omnivoice_rt.limits import DUB_MAX_SPEED, MAX_SPEED

    p.add_argument("--subtitles", required=True, help="the cues: FILE.srt or FILE.vtt (UTF-8)")
    p.add_argument("--output", required=True, help="the track, as long as the last cue")
    format_flag(p)
    p.add_argument(
        "--captions",
        metavar="FILE",
        help="where each cue was placed (default OUTPUT.srt, or OUTPUT.dubbed.srt where that is "
        "the subtitle file itself; .vtt, .json)",
    )
    p.add_argument(
        "--report",
        metavar="FILE",
        help="each cue's duration, speed, placing, warnings (default OUTPUT.json)",
    )
    p.add_argument(
        "--voices",
        metavar="DIR",
        help="a voice library (the server's --voices): cues 'Name: text' speak in voice Name",
    )
    p.add_argument(
        "--voice", help="every other cue's voice: a voice of --voices, or a built-in one"
    )
    p.add_argument(
        "--max-speed",
        type=float,
        default=DUB_MAX_SPEED,
        help=f"the fastest a cue may be spoken to fit its window (1 to {MAX_SPEED:g}; default "
        f"{DUB_MAX_SPEED:g}); a cue that needs more is reported and nothing is made",
    )
    request_flags(p, leave=("text", "duration"))
    asr_flag(p)


def batch_flags(p) -> None:
    p.add_argument(
        "--input", required=True, help="JSONL: one {id, text, options of synthesize...} per line"
    )
    p.add_argument("--output-dir", required=True, help="OUT/<id>.wav and OUT/results.jsonl")
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="processes, each with its own model and cores/N threads (with --ray: actors)",
    )
    p.add_argument(
        "--ray",
        metavar="auto|local|HOST:PORT",
        help="run on a Ray cluster: this machine's (auto), a new one on this machine (local), or another",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


def roundtrip_flags(p) -> None:
    p.add_argument("--input", required=True)
    p.add_argument("--output", required=True)


def align_flags(p) -> None:
    p.add_argument("--audio", required=True, help="the recording (wav, flac, ogg, mp3, ...)")
    said = p.add_mutually_exclusive_group(required=True)
    said.add_argument("--text", help="what the recording says")
    said.add_argument("--text-file", help="a UTF-8 file holding what it says")
    p.add_argument(
        "--language",
        help="its language, a code or a name ('en', 'Chinese'); left out, the text's script "
        "chooses eSpeak NG's voice",
    )
    p.add_argument(
        "--output",
        help='WORDS.json: {"words": [{"word", "start", "end"}]} in seconds, null for a word not '
        "found (default: printed)",
    )
    align_model_flag(p)
    p.add_argument("-v", "--verbose", action="store_true")


def prompt_flags(p) -> None:
    p.add_argument("--ref-audio", required=True)
    p.add_argument("--ref-text", help="what the reference recording says (left out: transcribed)")
    asr_flag(p)
    p.add_argument("--output", required=True)


def eval_flags(p) -> None:
    from omnivoice_rt.tools.quality import DEFAULT_SPEAKER_MODEL

    p.add_argument(
        "--mode",
        choices=["rtf", "quality"],
        default="rtf",
        help="rtf: how fast; quality: each preset against the first (error rate of what a "
        "recogniser hears, speaker similarity, duration, real-time factor)",
    )
    p.add_argument("--text", help="the text to speak (rtf)")
    p.add_argument("--runs", type=int, default=3, help="(rtf)")
    p.add_argument("--num-step", type=_steps, default="best", help="1-256 or a preset (rtf)")
    p.add_argument(
        "--presets", default="best,balanced,fast,turbo", help="(quality) the first is the baseline"
    )
    p.add_argument(
        "--sentences",
        help="(quality) a file, one LANGUAGE<TAB>TEXT per line (default: omnivoice_rt.tools.quality's "
        "sentences in six languages)",
    )
    p.add_argument("--ref-audio", help="(quality) clone this voice; similarity is to it")
    p.add_argument("--ref-text", help="(quality) what the reference says")
    p.add_argument("--instruct", help="(quality) a voice-design instruct instead")
    p.add_argument("--seed", type=int, default=0, help="(quality)")
    p.add_argument(
        "--asr-model",
        default=os.environ.get("OMNIVOICE_ASR_MODEL"),
        help="(quality) the recogniser: a Whisper folder or Hub repo in the onnx-community "
        "layout (default onnx-community/whisper-base; a larger one, e.g. "
        "onnx-community/whisper-large-v3-turbo, hears better); none: no error rate",
    )
    p.add_argument(
        "--speaker-model",
        default=DEFAULT_SPEAKER_MODEL,
        help="(quality) speaker embeddings: a local .onnx or REPO:FILE.onnx on the Hub, taking "
        "the 16 kHz waveform or WeSpeaker's fbank features; none: no similarity",
    )
    p.add_argument("--output", default="quality", help="(quality) folder for the results")


def inspect_flags(p) -> None:
    p.add_argument(
        "source",
        nargs="?",
        default=os.environ.get("OMNIVOICE_ARTIFACTS"),
        help="artifact folder or Hub repo id (default: $OMNIVOICE_ARTIFACTS, else $OMNIVOICE_REPO "
        "or onnx-community/OmniVoice-Onnx)",
    )
    p.add_argument("--precision", choices=list(PROFILE_DIRS), help="one profile only")
    p.add_argument("-v", "--verbose", action="store_true")


# The commands, in --help's order: (what it does, its own flags, what runs it, whether it takes
# common_flags: the model's).
COMMANDS = {
    "synthesize": ("text to a wav file", synthesize_flags, cmd_synthesize, True),
    "dub": (
        "a subtitle file (.srt, .vtt) spoken cue by cue in its windows, one wav",
        dub_flags,
        cmd_dub,
        True,
    ),
    "batch": (
        "the items of a JSONL file to wav files, resumable; a pool or Ray for many",
        batch_flags,
        cmd_batch,
        True,
    ),
    "roundtrip": ("codec only: wav -> codes -> wav", roundtrip_flags, cmd_roundtrip, True),
    "prompt": (
        "encode a reference voice once and save it (.npz)",
        prompt_flags,
        cmd_prompt,
        True,
    ),
    "eval": (
        "real-time factor (equivalence with PyTorch: python -m omnivoice_build.equivalence)",
        eval_flags,
        cmd_eval,
        True,
    ),
    "inspect": (
        "what an artifact folder or Hub repo holds, and how it would be used",
        inspect_flags,
        cmd_inspect,
        False,
    ),
    "align": (
        "each word of a text placed in a recording of it (needs the align extra: eSpeak NG)",
        align_flags,
        cmd_align,
        False,
    ),
}


def parse_args(argv):
    installed = Path(sys.argv[0]).name == "omnivoice-onnx"  # the console script
    parser = argparse.ArgumentParser(
        prog="omnivoice-onnx" if installed else "python -m omnivoice_rt",
        description="OmniVoice on ONNX Runtime",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (what, own_flags, run, loads) in COMMANDS.items():
        command = sub.add_parser(name, help=what)
        if loads:
            common_flags(command)
        own_flags(command)
        command.set_defaults(func=run)
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING, format="%(message)s"
    )
    try:
        return args.func(args)
    except REPORTED as exc:
        if args.verbose:
            logger.exception("failed")
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
