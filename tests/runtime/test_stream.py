"""``OmniVoiceONNX.stream``: the same codes as ``generate``, each piece handed over as soon as it is
made, and what is handed over joins into the whole result."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from omnivoice_build.equivalence import LONG_TEXT
from omnivoice_rt.model import Speech

SENTENCES = (
    "The first sentence is here. Then a second one follows it. And a third one ends the text."
)


def test_a_short_text_streams_as_one_piece_equal_to_generate(fp32_voice):
    whole = fp32_voice.generate("Hello world, this is a test.", seed=3, num_step=8)
    pieces = list(fp32_voice.stream("Hello world, this is a test.", seed=3, num_step=8))
    assert len(pieces) == 1 and pieces[0].metadata["pieces"] == 1
    np.testing.assert_array_equal(pieces[0].codes[0], whole.codes[0])
    np.testing.assert_array_equal(pieces[0].waveform, whole.waveform)


def test_a_long_text_streams_generate_codes_piece_by_piece(fp32_voice):
    steps: list[int] = []
    whole = fp32_voice.generate(LONG_TEXT, seed=0, num_step=4)
    stream = fp32_voice.stream(
        LONG_TEXT, seed=0, num_step=4, progress=lambda done, _total: steps.append(done)
    )
    pieces = []
    for piece in stream:
        # Handed over as soon as it is made: only this piece's steps (and those before) have run.
        assert steps[-1] == 4 * (len(pieces) + 1), steps
        pieces.append(piece)
    assert len(pieces) == len(whole.codes) > 1
    # each piece says what it speaks
    assert " ".join(p.metadata["text"].strip() for p in pieces) == LONG_TEXT
    for piece, codes in zip(pieces, whole.codes, strict=True):
        np.testing.assert_array_equal(piece.codes[0], codes)
    # Seams: the leading pad (0.1 s) before the first piece, cross_fade's 0.1 s of silence before
    # the others, the trailing pad after the last only.
    rate, pad = whole.sample_rate, int(0.1 * whole.sample_rate)
    assert not pieces[0].waveform[:pad].any() and pieces[0].waveform[pad : 2 * pad].any()
    for piece in pieces[1:]:
        assert not piece.waveform[:pad].any() and piece.waveform[pad : 2 * pad].any()
    for piece in pieces[:-1]:
        # faded out, no pad after it
        assert piece.waveform[-1] == 0 and piece.waveform[-pad:-1].any()
    assert not pieces[-1].waveform[-pad:].any()
    joined = Speech.join(pieces)
    assert joined.waveform.shape[-1] == sum(p.waveform.shape[-1] for p in pieces)
    # the result's pieces and the request's, by names that cannot be confused; the older
    # "chunks" and "pieces" kept as their aliases
    assert joined.metadata["pieces_in_result"] == joined.metadata["chunks"] == len(pieces)
    assert all(
        p.metadata["pieces_in_request"] == p.metadata["pieces"] == len(pieces) for p in pieces
    )
    assert all(p.metadata["pieces_in_result"] == 1 for p in pieces)
    assert joined.metadata["chunks"] == len(pieces) and joined.metadata["seconds"] == pytest.approx(
        joined.seconds
    )
    # Loudness is set piece by piece without a reference: each piece peaks at upstream's 0.5.
    for piece in pieces:
        assert np.abs(piece.waveform).max() == pytest.approx(0.5, abs=1e-6)
    # The whole waveform has the same length to within the silence trimmed at the seams.
    assert abs(joined.waveform.shape[-1] - whole.waveform.shape[-1]) < 0.5 * rate * len(pieces)


def test_sentence_mode_hands_over_the_first_sentence_first(fp32_voice):
    steps: list[int] = []
    stream = fp32_voice.stream(
        SENTENCES, sentences=True, seed=0, num_step=4, progress=lambda d, _t: steps.append(d)
    )
    first = next(stream)
    count = first.metadata["pieces"]
    # only the first piece was made (sentences join up to ~4 s)
    assert count >= 2 and steps[-1] == 4
    rest = list(stream)
    assert [p.metadata["piece"] for p in [first, *rest]] == list(range(count))
    # The same request without sentence mode is one piece: sentence mode is what split it.
    assert len(list(fp32_voice.stream(SENTENCES, seed=0, num_step=4))) == 1


def test_bad_input_fails_when_the_stream_is_asked_for(fp32_voice):
    with pytest.raises(ValueError, match="text is empty"):
        fp32_voice.stream("   ")  # not at the first piece: a server can answer before it streams


def test_a_stream_can_move_between_threads(fp32_voice):
    """Gradio runs each step of a generator handler on whichever worker thread is free."""
    stream = fp32_voice.stream(SENTENCES, sentences=True, seed=0, num_step=2)
    pieces: list[Speech] = []
    for _ in range(2):
        thread = threading.Thread(target=lambda: pieces.append(next(stream)))
        thread.start()
        thread.join()
    assert len(pieces) == 2
    for piece in pieces:
        assert piece.metadata["timings"]["model.llm_decoder"] > 0
    # The graph times add up over the request: each piece's table includes the ones before.
    assert (
        pieces[1].metadata["timings"]["model.llm_decoder"]
        > pieces[0].metadata["timings"]["model.llm_decoder"]
    )
