"""Planning a request: how many frames to make, in which pieces, each checked before any model runs.

Upstream's rules: the target length is estimated from the text and the reference's characters
per frame (``duration`` overrides it, ``speed`` scales it); over ``audio_chunk_threshold`` (30 s)
the text is made in ~15 s pieces split at punctuation, and without a reference the first piece
becomes the reference of the rest (``_generate_chunked``). ``stream(sentences=True)`` asks for
pieces of about a sentence instead, and ``stream(first_seconds=4)`` for a first piece of about
that length and the next ones growing to upstream's (a long text's first audio sooner; the
server's streams, docs/design.md section 6).

A text with pauses or SSML (:mod:`omnivoice_rt.text.markup`) is planned segment by segment, each
with its own language and speed, and a ``duration`` shared among them by their estimates after
the pauses; without a reference, every segment after the first takes the first piece as its
reference, as a long text's pieces do.

Each piece's conditional row (prompt, reference, target) must fit the LLM's position table and
the attention memory budget (``limits.max_row``), and its text ids the embedding table.
"""

from __future__ import annotations

from dataclasses import dataclass

from omnivoice_rt.engine.prompt import TextTokenizer, text_ids
from omnivoice_rt.errors import ArtifactError
from omnivoice_rt.request import GenerationSettings
from omnivoice_rt.text.chunks import chunk_text_punctuation
from omnivoice_rt.text.durations import estimate_frames
from omnivoice_rt.text.markup import Silence, pause_seconds
from omnivoice_rt.text.written import written_pieces

# ``growing``: each piece after a short first one this many times the one before
PIECE_GROWTH = 1.3


@dataclass
class Piece:
    """One generation of a request: its text and length, and its reference (the given one, or
    with ``ref_from_first`` the first piece's codes)."""

    text: str
    frames: int
    ref_text: str | None
    ref_frames: int | None
    ref_from_first: bool = False
    segment: int = 0  # the index of its segment (a text without markup is one)
    language: str | None = None  # its segment's, else the request's
    written: str | None = None  # its text as written, where known (captions show it)


@dataclass
class Plan:
    """A request's pieces in order, and the silence before each segment and after the last
    (``silences[k]``: before segment k; None where none was asked: the pieces' own pad or seam)."""

    pieces: list[Piece]
    silences: list[float | None]


def plan_parts(
    parts,
    ref_text: str | None,
    ref_frames: int | None,
    duration: float | None,
    speed: float | None,
    settings: GenerationSettings,
    frame_rate: float,
    piece_seconds: float | None = None,
    first_seconds: float | None = None,
) -> Plan:
    """The pieces of a request's parts (its segments and silences, ``Request.parts``)."""
    segments, silences = [], [None]  # silences[k]: the silence before segment k
    for part in parts:
        if isinstance(part, Silence):
            silences[-1] = part.seconds
        else:
            segments.append(part)
            silences.append(None)
    shares = [duration] * len(segments)
    if duration and len(segments) > 1:  # the speech's length after the pauses, by the estimates
        speech = duration - pause_seconds(parts)
        weights = [estimate_frames(s.spoken, ref_text, ref_frames) for s in segments]
        shares = [speech * w / sum(weights) for w in weights]
    pieces: list[Piece] = []
    for index, (segment, share) in enumerate(zip(segments, shares, strict=True)):
        rate = (speed or 1.0) * segment.rate if segment.rate != 1.0 else speed
        from_first = index > 0 and ref_frames is None
        first = pieces[0] if from_first else None
        planned = plan_pieces(
            segment.spoken,
            first.text if first else ref_text,
            first.frames if first else ref_frames,
            share,
            rate,
            settings,
            frame_rate,
            piece_seconds,
            first_seconds if index == 0 else None,
        )
        for piece, written in zip(planned, _written(segment, planned), strict=True):
            piece.segment, piece.language = index, segment.language
            piece.ref_from_first = piece.ref_from_first or from_first
            piece.written = written
        pieces += planned
    return Plan(pieces, silences)


def _written(segment, planned: list[Piece]) -> list[str | None]:
    """Each piece of a segment as written (None where unknown): the segment's text where it is
    one piece or was read as written, else the written words read as each piece's."""
    if len(planned) == 1:
        return [segment.text]
    if segment.text == segment.spoken:
        return [piece.text for piece in planned]
    cut = written_pieces(segment.text, segment.spoken, [piece.text for piece in planned])
    return cut or [None] * len(planned)


def plan_pieces(
    text: str,
    ref_text: str | None,
    ref_frames: int | None,
    duration: float | None,
    speed: float | None,
    settings: GenerationSettings,
    frame_rate: float,
    piece_seconds: float | None = None,
    first_seconds: float | None = None,
) -> list[Piece]:
    """The pieces to generate: the whole text, or ~15 s pieces (``piece_seconds``: pieces of that
    length) split at punctuation; where it is cut, ``first_seconds`` makes the first piece about
    that long (its sentences whole) and the next ones grow to that length (``growing``)."""
    if first_seconds is not None and not first_seconds > 0:
        raise ValueError(f"first_seconds takes a number of seconds above 0, not {first_seconds}")
    estimate = estimate_frames(text, ref_text, ref_frames, 1.0 if duration else (speed or 1.0))
    target_len = max(1, int(duration * frame_rate)) if duration else estimate
    speed = estimate / target_len if duration else (speed or 1.0)
    if piece_seconds is None:
        if target_len <= int(settings.audio_chunk_threshold * frame_rate):
            return [Piece(text, target_len, ref_text, ref_frames)]
        piece_seconds = settings.audio_chunk_duration

    def chars(seconds: float) -> int:  # upstream's characters per piece of ``seconds``
        return int(seconds * frame_rate / (target_len / len(text)))

    parts = chunk_text_punctuation(text, chars(piece_seconds), min_chunk_len=3)
    if first_seconds is not None and first_seconds < piece_seconds and len(parts) > 1:
        parts = growing(text, first_seconds, piece_seconds, chars)
    plan: list[Piece] = []
    for index, part in enumerate(parts):
        if ref_frames is None and index > 0:
            first = plan[0]
            frames = estimate_frames(part, first.text, first.frames, speed)
            plan.append(Piece(part, frames, first.text, first.frames, True))
        else:
            frames = estimate_frames(part, ref_text, ref_frames, speed)
            plan.append(Piece(part, frames, ref_text, ref_frames))
    return plan


def growing(text: str, first: float, most: float, chars) -> list[str]:
    """``text`` cut at punctuation into pieces of about ``first`` seconds, then each
    ``PIECE_GROWTH`` times the one before, up to ``most`` (``chars(seconds)``: the characters of
    so many seconds). A piece that takes at most the time its predecessor plays leaves no gap:
    one that is ``PIECE_GROWTH`` times as long does where the CPU makes speech at least
    ``PIECE_GROWTH`` times as fast as it plays (docs/design.md section 6)."""
    parts, rest, seconds = [], text.strip(), first
    while rest and seconds < most:
        piece = chunk_text_punctuation(rest, chars(seconds), min_chunk_len=3)[0]
        if not rest.startswith(piece):  # not a prefix (cannot happen: pieces are the text's)
            break
        parts.append(piece)
        rest, seconds = rest[len(piece) :].strip(), seconds * PIECE_GROWTH
    return parts + (chunk_text_punctuation(rest, chars(most), min_chunk_len=3) if rest else [])


@dataclass
class RowLimits:
    """What a loaded model can take: the longest conditional row and what sets it, the rows of
    its text embedding table (0: unknown), and where its files are (for the message)."""

    max_row: int
    reason: str
    text_vocab: int
    root: object


def check_row(
    tokenizer: TextTokenizer, piece: Piece, language, instruct, denoise: bool, limits: RowLimits
) -> None:
    """Refuse a piece whose conditional row the LLM cannot take (its position table) or should
    not (the attention memory budget), or whose text ids lie past the embedding table (a
    tokenizer of another model), before anything runs."""
    ids = text_ids(
        tokenizer,
        piece.text,
        ref_text=piece.ref_text,
        language=language,
        instruct=instruct,
        denoise=denoise and piece.ref_frames is not None,
    )
    if limits.text_vocab and max(ids) >= limits.text_vocab:
        raise ArtifactError(
            f"the tokenizer gives token id {max(ids)} but the model's embedding table has "
            f"{limits.text_vocab} rows: tokenizer.json does not belong to these graphs; "
            f"re-download or rebuild {limits.root}"
        )
    prompt = len(ids)
    row = prompt + (piece.ref_frames or 0) + piece.frames
    if row > limits.max_row:
        reference = f", {piece.ref_frames} for the reference" if piece.ref_frames else ""
        raise ValueError(
            f"this request needs a row of {row} positions ({prompt} for the text{reference}, "
            f"{piece.frames} for the speech); the model takes at most {limits.max_row}, set by "
            f"{limits.reason}. Shorten the text or add punctuation so that it can be split, use a "
            "shorter reference, or ask for a shorter duration"
        )
