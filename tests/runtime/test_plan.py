"""A request's pieces (``engine/plan.py``): upstream's ~15 s pieces, or with ``first_seconds`` (a
server's streams) a short first piece and pieces growing to upstream's, the text whole either way."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from omnivoice_rt.engine.plan import PIECE_GROWTH, plan_pieces
from omnivoice_rt.request import GenerationSettings

RATE = 25.0  # frames a second
SENTENCE = st.text(st.sampled_from("abcdefgh "), min_size=8, max_size=120).map(
    lambda s: s.strip() or "word"
)
LONG = " ".join(f"Sentence {n} of a long reading goes on for a while here." for n in range(40))


def plan(text, first=None, ref=(None, None)):
    return plan_pieces(text, *ref, None, None, GenerationSettings(), RATE, None, first)


@settings(max_examples=60, deadline=None)
@given(st.lists(SENTENCE, min_size=1, max_size=60), st.sampled_from([1.0, 4.0, 8.0]))
def test_pieces_hold_the_text_in_order_whole_sentences_each(sentences, first):
    text = " ".join(f"{s}." for s in sentences)
    pieces = plan(text, first)
    assert " ".join(p.text for p in pieces).split() == text.split()
    assert all(p.text.endswith(".") for p in pieces)  # cut only where a sentence ends
    if len(pieces) == 1:  # too short to be cut: the whole text, as upstream makes it
        assert [p.text for p in pieces] == [p.text for p in plan(text)]


def test_a_long_texts_first_piece_is_short_and_the_next_grow_to_upstreams():
    upstream, quick = plan(LONG), plan(LONG, 4.0)
    assert len(upstream) > 1
    seconds = [p.frames / RATE for p in quick]
    assert seconds[0] <= 4.5 < upstream[0].frames / RATE  # one sentence, about 4 s
    assert len(quick) > len(upstream)
    # each piece at most PIECE_GROWTH times the one before (a sentence more at most), until
    # upstream's length
    sentence = seconds[0]
    for before, after in zip(seconds, seconds[1:-1], strict=False):
        assert after <= before * PIECE_GROWTH + sentence + 0.1
    assert max(seconds) <= max(p.frames / RATE for p in upstream) + sentence
    # without a reference, the pieces after the first take it as theirs, as upstream's do
    assert all(p.ref_from_first and p.ref_text == quick[0].text for p in quick[1:])


def test_a_reference_stays_every_pieces_reference():
    pieces = plan(LONG, 4.0, ref=("A reference of mine.", 60))
    assert len(pieces) > 2
    assert all(p.ref_text == "A reference of mine." and p.ref_frames == 60 for p in pieces)
    assert not any(p.ref_from_first for p in pieces)


def test_a_first_piece_as_long_as_upstreams_or_a_short_text_is_upstreams_plan():
    short = "A short text. It has two sentences."
    assert [p.text for p in plan(short, 4.0)] == [short]
    assert [p.text for p in plan(LONG, 15.0)] == [p.text for p in plan(LONG)]
    assert [p.text for p in plan(LONG, 40.0)] == [p.text for p in plan(LONG)]


def test_a_first_piece_of_no_length_is_refused():
    import pytest

    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="first_seconds takes a number of seconds above 0"):
            plan(LONG, bad)
