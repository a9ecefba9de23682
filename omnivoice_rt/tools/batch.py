"""Batch synthesis: the items of a JSONL file to ``OUT/<id>.wav`` and its captions
``OUT/<id>.srt``, in one process, a local pool of processes, or Ray actors, with the same audio
in each.

    python -m omnivoice_rt batch --input items.jsonl --output-dir out/ [--workers N] [--ray auto|ADDRESS]

Each line is an object with ``id``, ``text`` and any option of a request (``omnivoice_rt.request.OPTIONS``); relative paths
(``voice_prompt``, ``ref_audio``) are relative to the input file. An item with ``subtitles``
(an ``.srt`` or ``.vtt`` file) instead of ``text`` is a dub (``omnivoice_rt.dubbing``): its cues
spoken in their windows as one wav, ``max_speed`` its fastest pace, its report in its record. An item
with ``"words": true`` also gets ``OUT/<id>.words.json``, each word's start and end in its wav
(``omnivoice_rt.align``: the align extra, or the CTC model of ``OMNIVOICE_ALIGN_MODEL``), and its
record ``words``. An item without a ``seed`` gets
one from its id, so every run makes the same audio. A run is resumable: each wav is written under
a temporary name and renamed, and carries the digest of what made it (text, options, the files'
contents, precision) in its comment, so a rerun skips the items whose wav has the same digest and
redoes the others. ``OUT/results.jsonl`` gets a line per item as it finishes and, at the end, one
line per item of the input (made, skipped or failed, with its settings and timings, its
captions, or the error).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import soundfile as sf

from omnivoice_rt import captions
from omnivoice_rt.audio.formats import pcm16
from omnivoice_rt.errors import REPORTED
from omnivoice_rt.limits import DUB_MAX_SPEED, MAX_SPEED
from omnivoice_rt.request import FILE_OPTIONS, OPTIONS, Request, door_request
from omnivoice_rt.speech import Speech
from omnivoice_rt.text import subtitles

logger = logging.getLogger(__name__)

ITEM_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")  # becomes a file name
RESULTS = "results.jsonl"
DUB_FIELDS = ("subtitles", "max_speed")  # a dub item's own, besides a request's options
ITEM_FIELDS = (*DUB_FIELDS, "words")  # an item's own, besides a request's options


@dataclass
class Item:
    line: int  # in the input file
    id: str
    request: Request  # a dub's: its first spoken cue's
    options: dict  # as given (files as absolute paths), the seed included: the record's settings
    digest: str = ""  # what made it: a wav with this digest in its comment is this item's
    cues: list | None = None  # a dub's (its subtitles' cues), else None
    words: bool = False  # each word placed in the wav: OUT/<id>.words.json

    @property
    def size(self) -> int:
        """Characters to say: the longest items go first."""
        return sum(len(cue.text) for cue in self.cues) if self.cues else len(self.request.text)


@dataclass
class Record:
    line: int  # in the input file
    id: str
    status: str  # made, skipped or failed
    file: str | None = None
    digest: str | None = None  # of what made the file
    seconds: float | None = None  # of audio
    time: float | None = None  # of work, in this run (or the run that made it)
    rtf: float | None = None
    settings: dict = field(default_factory=dict)
    error: str | None = None
    normalized_text: str | None = None  # what the model read, where normalization changed the text
    captions: list | None = (
        None  # where each piece lies in the wav (captions.as_json), also <id>.srt
    )
    report: dict | None = None  # a dub's: each cue's window, duration, speed, placing; warnings
    words: list | None = (
        None  # with "words": each word's start and end in seconds (null: not found)
    )


# ----------------------------------------------------------------------------- items


def read_items(
    path: str | Path, precision: str, model: str = ""
) -> tuple[list[Item], list[Record]]:
    """The input's items, checked line by line; a bad line becomes a failed record, the rest go on.
    ``model`` identifies the artifacts (see :func:`model_identity`); it is part of every digest."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such input file; give a JSONL file, one item per line")
    items, failed, seen = [], [], set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        name = f"line-{number}"
        try:
            raw = json.loads(line)
            if not isinstance(raw, dict):
                raise ValueError("an item is a JSON object with 'id' and 'text'")
            name = str(raw.get("id", name))
            items.append(check_item(number, raw, seen, path.parent, f"{model}:{precision}"))
        except (ValueError, FileNotFoundError) as exc:
            failed.append(Record(number, name, "failed", error=f"line {number}: {exc}"))
    return items, failed


def check_item(line: int, raw: dict, seen: set, folder: Path, model: str) -> Item:
    item_id, text = raw.get("id"), raw.get("text")
    if not isinstance(item_id, str) or not ITEM_ID.fullmatch(item_id):
        raise ValueError(
            f"'id' must be 1-128 letters, digits, '_', '.' or '-' (it names the wav), got {item_id!r}"
        )
    if item_id.casefold() in seen:  # a.wav and A.wav are one file on some file systems
        raise ValueError(
            f"the id {item_id!r} is used by an earlier line (ids must be unique, whatever their case)"
        )
    seen.add(item_id.casefold())
    options = {k: v for k, v in raw.items() if k != "id" and v is not None}
    options.setdefault("seed", int(hashlib.sha256(item_id.encode()).hexdigest()[:8], 16) % 2**31)
    cues, contents = None, {}
    if "subtitles" in options:
        cues, text = dub_cues(options, folder, contents)
    elif not isinstance(text, str) or not text.strip():
        raise ValueError("'text' is required: what to say (or 'subtitles': a file to dub)")
    # every option checked, before any model (a dub's with each of its cues' texts)
    words = options.get("words", False)
    if not isinstance(words, bool):
        raise ValueError(
            f"'words' must be true or false (each word's place in the wav), got {words!r}"
        )
    if words:  # the aligner, before the item is made
        from omnivoice_rt.align import load_aligner

        load_aligner()
    asked = {k: v for k, v in options.items() if k not in ITEM_FIELDS}
    request = door_request({**asked, "text": text})
    for cue in cues or ():
        if cue.text.strip():
            try:
                door_request({**asked, "text": cue.text})
            except ValueError as exc:
                raise ValueError(f"subtitles, cue {cue.number}: {exc}") from None
    for key in FILE_OPTIONS:
        if key in options:
            file = (folder / options[key]).resolve()
            if not file.is_file():
                raise FileNotFoundError(
                    f"{key} {options[key]!r}: no such file (relative paths start at the input's folder)"
                )
            options[key] = str(file)
            contents[key] = hashlib.sha256(file.read_bytes()).hexdigest()
    request = replace(request, **{key: options[key] for key in contents if key in FILE_OPTIONS})
    # What makes the audio: the checked request (its preset expanded) and the files' contents.
    made_of = {"request": request.options(), "model": model, "files": contents}
    if cues is not None:
        made_of["max_speed"] = options["max_speed"]
    if words:  # an item asking for words is remade once to place them (its digest changes)
        made_of["words"] = True
    digest = hashlib.sha256(json.dumps(made_of, sort_keys=True).encode()).hexdigest()
    settings = {k: v for k, v in options.items() if k != "text"}
    return Item(line, item_id, request, settings, digest, cues, words)


def dub_cues(options: dict, folder: Path, contents: dict) -> tuple[list, str]:
    """A dub item's cues and the first text they say; its subtitles' path made absolute, their
    digest in ``contents``, its ``max_speed`` checked (the default where left out)."""
    for name in ("text", "duration"):
        if name in options:
            raise ValueError(
                f"a dub takes its texts and durations from its subtitles; leave out {name!r}"
            )
    speed = options.setdefault("max_speed", DUB_MAX_SPEED)
    if isinstance(speed, bool) or not isinstance(speed, int | float) or not 1 <= speed <= MAX_SPEED:
        raise ValueError(f"'max_speed' must be a number from 1 to {MAX_SPEED:g}, got {speed!r}")
    file = (folder / str(options["subtitles"])).resolve()
    if not file.is_file():
        raise FileNotFoundError(
            f"subtitles {options['subtitles']!r}: no such file (relative paths start at the input's folder)"
        )
    cues = subtitles.read(file)
    spoken = [cue.text for cue in cues if cue.text.strip()]
    if not spoken:
        raise ValueError(f"subtitles {options['subtitles']!r}: no cue has anything to say")
    options["subtitles"] = str(file)
    contents["subtitles"] = hashlib.sha256(file.read_bytes()).hexdigest()
    return cues, spoken[0]


def model_identity(source, precision: str) -> str:
    """What names the model in a digest: a folder's manifest (its files' sizes and hashes) or a
    Hub repo's id (a new upload of the same repo is not noticed: pass --model-dir REPO@REVISION's
    folder, or delete the outputs, to redo)."""
    from omnivoice_rt.artifacts.hub import repo_of
    from omnivoice_rt.artifacts.manifest import MANIFEST_NAME

    if source and Path(source).is_dir():
        manifest = Path(source) / MANIFEST_NAME
        listing = (
            manifest.read_bytes() if manifest.is_file() else str(Path(source).resolve()).encode()
        )
        return hashlib.sha256(listing).hexdigest()
    return str(repo_of(source))


def made_by(path: Path) -> str | None:
    """The digest in a finished wav's comment (None if there is no such wav)."""
    try:
        with sf.SoundFile(path) as wav:
            return wav.comment or None
    except (OSError, RuntimeError, sf.LibsndfileError):
        return None


# ----------------------------------------------------------------------------- one synthesizer


class Synthesizer:
    """One loaded model; turns an item into (record, wav bytes). Every mode runs items through one."""

    def __init__(self, source, precision: str = "int4", threads: int | None = None):
        from omnivoice_rt.model import OmniVoiceONNX

        self.precision = precision
        self.voice = OmniVoiceONNX.load(source, precision, threads=threads)

    def __call__(self, item: Item) -> tuple[Record, bytes | None]:
        settings = {**item.options, "precision": self.precision}
        started = time.perf_counter()
        try:
            speech = self.dub(item) if item.cues is not None else self.voice.generate(item.request)
            if item.words:
                speech.align_words(item.request.language)
        except REPORTED as exc:
            report = getattr(exc, "report", None)  # a dub's: the cues that cannot fit
            return Record(
                item.line, item.id, "failed", settings=settings, error=str(exc), report=report
            ), None
        except Exception as exc:  # noqa: BLE001 - one item's failure must not end the batch; the log has the trace
            logger.exception("item %s failed", item.id)
            return Record(
                item.line,
                item.id,
                "failed",
                settings=settings,
                error=f"{type(exc).__name__}: {exc}",
            ), None
        took = time.perf_counter() - started
        buffer = io.BytesIO()
        with sf.SoundFile(buffer, "w", speech.sample_rate, 1, "PCM_16", format="WAV") as wav:
            wav.comment = item.digest
            wav.write(pcm16(speech.waveform))  # as every door writes 16-bit samples
        record = Record(
            item.line,
            item.id,
            "made",
            f"{item.id}.wav",
            item.digest,
            round(speech.seconds, 3),
            round(took, 3),
            round(took / max(speech.seconds, 1e-9), 3),
            settings,
            normalized_text=speech.metadata.get("normalized_text"),
            captions=captions.as_json(speech.captions),
            report=speech.metadata.get("report"),
            words=[word.as_dict() for word in speech.words] if item.words else None,
        )
        return record, buffer.getvalue()

    def dub(self, item: Item) -> Speech:
        """A dub item's track as a result: its cues' captions, its report in the metadata."""
        from omnivoice_rt.dubbing import dub

        asked = {k: v for k, v in item.options.items() if k in OPTIONS}
        dubbed = dub(self.voice, item.cues, asked, None, item.options["max_speed"], door_request)
        return Speech(
            dubbed.waveform,
            dubbed.sample_rate,
            [],
            captions=dubbed.captions,
            metadata={"report": dubbed.report},
        )


_worker: Synthesizer | None = None  # a pool process's own model


def _start_worker(source, precision, threads) -> None:
    global _worker
    _worker = Synthesizer(source, precision, threads)


def _run_in_worker(item: Item):
    return _worker(item)


# ----------------------------------------------------------------------------- the run


def run_batch(
    input_path,
    output_dir,
    source=None,
    precision: str = "int4",
    workers: int = 1,
    ray: str | None = None,
    threads: int | None = None,
    show_progress: bool = True,
) -> dict:
    """Make every item of ``input_path`` not already made; returns the counts {made, skipped, failed}."""
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    with exclusive(out):
        return _run_batch(input_path, out, source, precision, workers, ray, threads, show_progress)


def _run_batch(
    input_path, out: Path, source, precision, workers, ray, threads, show_progress
) -> dict:
    for stale in out.glob(".*.tmp"):  # what a killed run was writing
        stale.unlink(missing_ok=True)
    items, records = read_items(input_path, precision, model_identity(source, precision))
    for item in [item for item in items if item.cues is not None]:
        if Path(item.options["subtitles"]) == (out / f"{item.id}.srt").resolve():
            items.remove(item)
            records.append(
                Record(
                    item.line,
                    item.id,
                    "failed",
                    error=f"line {item.line}: its captions, {item.id}.srt in the output folder, "
                    "would overwrite its subtitles: give the item another id, or write elsewhere",
                )
            )
    earlier = previous_records(out / RESULTS)
    todo = []
    for item in items:
        if made_by(out / f"{item.id}.wav") == item.digest:
            kept = earlier.get((item.id, item.digest))
            kept = kept or Record(
                item.line, item.id, "made", f"{item.id}.wav", item.digest, settings=item.options
            )
            records.append(
                Record(**{**asdict(kept), "line": item.line, "status": "skipped", "error": None})
            )
        else:
            todo.append(item)
    # the longest first: the workers finish together
    todo.sort(key=lambda item: item.size, reverse=True)
    logger.info(
        "%d items: %d to make, %d already made, %d bad lines",
        len(items),
        len(todo),
        sum(r.status == "skipped" for r in records),
        sum(r.status == "failed" for r in records),
    )
    with open(out / RESULTS, "a", encoding="utf-8") as log:
        for record in records:
            log.write(json.dumps(asdict(record)) + "\n")
        for record, data in progress_bar(
            results(todo, source, precision, workers, ray, threads), len(todo), show_progress
        ):
            if data is not None:  # the captions first: a finished wav has its captions beside it
                srt = captions.write(captions.from_json(record.captions or []), "srt")
                write_atomically(out / f"{record.id}.srt", srt.encode())
                if record.words is not None:
                    words = json.dumps({"words": record.words}, ensure_ascii=False, indent=1)
                    write_atomically(out / f"{record.id}.words.json", words.encode())
                write_atomically(out / f"{record.id}.wav", data)
            log.write(json.dumps(asdict(record)) + "\n")
            log.flush()
            records.append(record)
    records.sort(key=lambda record: record.line)  # one line per input line, in the input's order
    write_atomically(out / RESULTS, "".join(json.dumps(asdict(r)) + "\n" for r in records).encode())
    return {
        status: sum(r.status == status for r in records) for status in ("made", "skipped", "failed")
    }


def results(
    items: list[Item], source, precision, workers: int, ray: str | None, threads
) -> Iterator:
    """(record, wav bytes) for each item, as they finish: here, in a process pool, or on Ray."""
    if not items:
        return iter(())
    if ray:
        from omnivoice_rt.tools.batch_ray import ray_results

        return ray_results(Synthesizer, items, source, precision, workers, ray, threads)
    if workers <= 1:
        synthesize = Synthesizer(source, precision, threads)
        return (synthesize(item) for item in items)
    return pool_results(items, source, precision, workers, threads)


def pool_results(items, source, precision, workers: int, threads) -> Iterator:
    """N processes, each with its model loaded once and cores / N threads."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    threads = threads or max(1, (os.cpu_count() or 1) // workers)
    context = multiprocessing.get_context("spawn")  # no model or ONNX Runtime state is forked
    with ProcessPoolExecutor(workers, context, _start_worker, (source, precision, threads)) as pool:
        futures = {pool.submit(_run_in_worker, item): item for item in items}
        for future in as_completed(futures):
            try:
                yield future.result()
            except (
                BrokenProcessPool
            ) as exc:  # a worker died (out of memory, killed): its items fail, and say why
                item = futures[future]
                yield (
                    Record(item.line, item.id, "failed", error=f"the worker process died ({exc})"),
                    None,
                )


def previous_records(path: Path) -> dict[tuple, Record]:
    """The last record of each (id, digest) made in an earlier run, from its results."""
    found = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = Record(**json.loads(line))
            except (ValueError, TypeError):
                continue  # a line cut short by a killed run
            if record.status in ("made", "skipped") and record.digest:
                found[(record.id, record.digest)] = record
    return found


@contextlib.contextmanager
def exclusive(out: Path):
    """One run per output folder at a time (an advisory lock on OUT/.lock)."""
    import fcntl

    with open(out / ".lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ValueError(
                f"another batch run is writing to {out}; wait for it, or use another --output-dir"
            ) from None
        yield


def write_atomically(path: Path, data: bytes) -> None:
    """A temporary file beside ``path``, then a rename: a killed run leaves no half-written file."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temporary, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)


def progress_bar(results: Iterable, total: int, show: bool) -> Iterable:
    if not show or total == 0:
        return results
    from tqdm import tqdm

    return tqdm(results, total=total, unit="item", desc="batch")
