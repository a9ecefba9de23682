"""A request's pieces (``engine/plan.py``): upstream's ~15 s pieces, or with ``first_seconds`` (a
server's streams) a short first piece and pieces growing to upstream's, the text whole either way;
and each piece as written where normalization read the text otherwise."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from omnivoice_rt.engine.plan import PIECE_GROWTH, plan_parts, plan_pieces
from omnivoice_rt.request import GenerationSettings
from omnivoice_rt.speech import Speech
from omnivoice_rt.text import normalize
from omnivoice_rt.text.markup import Segment
from omnivoice_rt.text.written import written_pieces

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


@pytest.mark.parametrize(
    "written, spoken, pieces, expected",
    [
        (
            "It costs $5. Pay now.",
            "It costs five dollars. Pay now.",
            ["It costs five dollars.", "Pay now."],
            ["It costs $5.", "Pay now."],
        ),
        (  # a script without spaces: a character a word
            "我有3个苹果。他有10个。",
            "我有三个苹果。他有十个。",
            ["我有三个苹果。", "他有十个。"],
            ["我有3个苹果。", "他有10个。"],
        ),
        (  # "one" is both in the reading and the next sentence
            "The total was $105. Add one more item.",
            "The total was one hundred and five dollars. Add one more item.",
            ["The total was one hundred and five dollars.", "Add one more item."],
            ["The total was $105.", "Add one more item."],
        ),
        (  # a reading of 21 words
            "The debt is $31,415,926,535. We paid it.",
            "The debt is thirty one billion four hundred fifteen million nine hundred twenty six "
            "thousand five hundred thirty five dollars. We paid it.",
            [
                "The debt is thirty one billion four hundred fifteen million nine hundred twenty "
                "six thousand five hundred thirty five dollars.",
                "We paid it.",
            ],
            ["The debt is $31,415,926,535.", "We paid it."],
        ),
        (  # a sentence's full stop read away ("p.m." as "PM"): the next starts where it starts
            "The meeting is at 5 p.m. Be 1st. Thanks.",
            "The meeting is at five PM Be first. Thanks.",
            ["The meeting is at five PM", "Be first.", "Thanks."],
            ["The meeting is at 5 p.m.", "Be 1st.", "Thanks."],
        ),
        (
            "Meet at 10:30. It is 2024. Bye.",
            "Meet at ten thirty. It is twenty twenty four. Bye.",
            ["Meet at ten thirty.", "It is twenty twenty four.", "Bye."],
            ["Meet at 10:30.", "It is 2024.", "Bye."],
        ),
        ("A 1. B 2.", "A one. B two.", ["A one.", "C three."], None),  # not the reading cut
        ("a b", "a b c", ["a b", ""], None),  # a piece with no word
        (" ", " ", ["", " "], None),
    ],
)
def test_a_read_texts_pieces_are_found_as_written(written, spoken, pieces, expected):
    assert written_pieces(written, spoken, pieces) == expected


# sentences whose words are also what numbers are read as, with numbers among them
READ_WORDS = "one two five and hundred thousand dollars percent twenty the a it was of to".split()
NUMBERS = ["5", "105", "$5", "1,200", "20%", "2024", "12", "3.5", "$100", "1st"]
READ_SENTENCE = st.tuples(
    st.sampled_from(["It", "We", "They"]),
    st.lists(st.sampled_from(READ_WORDS + NUMBERS), min_size=1, max_size=6),
).map(lambda s: f"{s[0]} {' '.join(s[1])}.")


@settings(max_examples=40, deadline=None)  # the real normalizer: about 0.1 s an example
@given(st.lists(READ_SENTENCE, min_size=2, max_size=5))
def test_each_sentence_read_by_the_normalizer_is_found_as_written(sentences):
    """Sentences read by the real normalizer ("$105" as "one hundred and five dollars"), among
    words such readings are made of: each read sentence is found as its written one."""
    read = [normalize.normalize_text(s, "en") for s in sentences]
    assert written_pieces(" ".join(sentences), " ".join(read), read) == sentences


def test_a_long_segment_read_otherwise_gives_each_piece_its_sentences_as_written():
    """A segment cut into pieces of several sentences: each piece as written is its sentences'."""
    sentences = [s for k in range(1, 30) for s in (f"Item {k} costs ${k * 7}.", "Add one more.")]
    written = " ".join(sentences)
    spoken = normalize.normalize_text(written, "en")
    plan = plan_parts(
        [Segment(written, spoken=spoken)], None, None, None, None, GenerationSettings(), RATE, 6.0
    )
    assert len(plan.pieces) > 3
    at = 0
    for piece in plan.pieces:
        count = sum(word.endswith(".") for word in piece.text.split())
        assert piece.written == " ".join(sentences[at : at + count])
        at += count
    assert at == len(sentences)


def test_a_long_normalized_streams_captions_show_each_sentence_as_written(fp32_voice):
    """A stream piece by piece of a text whose numbers are read as words: each caption shows its
    sentence as written (and the words aligned are those), its text as read."""
    sentences = [f"This is sentence number {n} of a longer text." for n in (3, 14, 250)]
    stream = fp32_voice.stream(
        " ".join(sentences), seed=1, num_step=4, sentences=True, normalize_text=True
    )
    captions = Speech.join(list(stream)).captions
    assert [c.written for c in captions] == sentences
    assert "three" in captions[0].text and "3" not in captions[0].text
