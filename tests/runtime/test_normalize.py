"""``omnivoice_rt.normalize_text`` against upstream's ``omnivoice.utils.text.normalize_text``
(with WeTextProcessing 1.2.0 on pynini, the oracle): the same text for a varied corpus in
English, Chinese and the num2words languages, by code, by name and by script, with protected
spans, and for random strings; and what a request does with it."""

from __future__ import annotations

import gzip
import hashlib
import logging
import subprocess
import sys
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from omnivoice_build.tn_fsts import shipped_fst
from omnivoice_rt import Request, normalize_text
from omnivoice_rt.errors import Cancelled
from omnivoice_rt.text import normalize
from omnivoice_rt.text.normalize import FST_DIR, FSTS
from tests.conftest import ROOT

upstream = pytest.importorskip(
    "omnivoice.utils.text", reason="the oracle is upstream's omnivoice package (with PyTorch)"
).normalize_text

CORPUS = [
    # English: money, dates, times, ordinals, measures, phone numbers, decimals, addresses
    "I paid $12.50 for 3 apples on Jan. 5, 2024.",
    "Call 555-1234 at 10:30 am, or +1 (800) 555-0199.",
    "It's 25% off, 1/2 price! 0.5% of 3.14159 and 1,000,000 people.",
    "The year 1999 and the 2000s, 1st, 2nd, 3rd, 21st and 100th.",
    "He ran 5km in 21:05 at 30 km/h; it was 100°C and -2 floors down.",
    "Dr. Smith lives at 221B Baker St. since 2024-03-15 09:00:00 UTC.",
    "£20, €35.99, ¥1000, 5 kg, 12:00 PM, 3 x 4 = 12, 1/2/2020.",
    "Version 2.0.1 of www.example.com by me@x.org; Louis XVI.",
    # control spans: non-verbal tags, CMU overrides (a stress digit), unclosed brackets
    "the [B EY1 S] guitar costs 300 dollars [laughter] ok",
    "[sigh] [laughter] 2 [B EY1 S] unclosed [bracket 5 and 5] end",
    'quotes "5" and \\ backslash 7 {8} <9>',
    # Chinese: money, dates, times, temperatures, phone numbers, pinyin with tone digits
    "我花了12.5元买了3个苹果，2024年1月5日。",
    "现在是下午3点15分，温度是-5℃，比分是3:2，第1名！",
    "百分之50和50%不同！他的电话是13800138000。",
    "哈哈，那儿有1000块钱呢。啊，重庆的重ZHONG4要读对，共3次[laughter]。",
    "我們在2023年去了台灣，花了NT$500。",
    # other languages: whole numbers by num2words
    "Ich habe 25 Äpfel und 1000 Birnen.",
    "J'ai 21 ans et 3 chats.",
    "私は25歳です。У меня 3 кошки. لدي 5 كتب. मेरे पास 10 किताबें हैं।",
    # edges: no digits, symbols only, odd whitespace and characters, huge numbers
    "no numbers here.",
    "  leading and trailing 7  ",
    "tab\there 9, line\nbreak 10, nbsp\u00a05, soft 5\u00ad5, zero-width \u200b5",
    "😀 5 emoji, ﬁ 3, −5 (minus sign), ٣ arabic digit, ４５ full width, Ⅻ",
    "12345678901234567890123 is huge",
    "$",
    "5",
    "--5--",
]
LANGUAGES = [None, "en", "English", "zh", "Chinese", "de", "German", "fr", "ja", "ru", "arb"]
LANGUAGES += ["hi", "pl", "yue", "ko", "pt", "vi", "th"]


@pytest.fixture(autouse=True)
def upstream_reading(monkeypatch):
    """This module compares with upstream: its one difference of reading is off
    (``JOIN_DIGIT_GROUPS``; tested on its own below)."""
    monkeypatch.setattr(normalize, "JOIN_DIGIT_GROUPS", False)


@pytest.mark.parametrize(
    "text, language, ours, theirs",
    [
        ("Then 1 000 people came.", "en", "one thousand people", "one oh oh zero people"),
        ("Il y a 2 500 euros.", "fr", "deux mille cinq cents euros", "deux cinq cents euros"),
        ("Es sind 1\u00a0000 Leute.", "de", "eintausend Leute", "eins\u00a0null Leute"),
        ("12\u202f500\u202f000 stars", "en", "twelve million five hundred thousand", "oh oh zero"),
        ("It costs $1 250.50.", "en", "one thousand two hundred and fifty", "one dollar two"),
        ("In 2020, 1 000 people came.", "en", "twenty, one thousand people", "one oh oh zero"),
        ("Il est parti. 2 500 sont venus.", "fr", "parti. deux mille cinq cents", "deux cinq"),
        ("1 000, 2 000 et 3 000 euros.", "fr", "mille, deux mille et trois mille", "deux zéro"),
    ],
)
def test_a_number_with_its_thousands_apart_is_read_as_one(
    monkeypatch, text, language, ours, theirs
):
    """Where upstream reads each group of "1 000" alone (checked against upstream), the runtime
    reads one number; a phone number's groups ("555 123 4567", "+33 612 345 678") stay apart."""
    assert theirs in upstream(text, language)
    monkeypatch.setattr(normalize, "JOIN_DIGIT_GROUPS", True)
    assert ours in normalize_text(text, language)
    for phone in ("Call 555 123 4567.", "Call +33 612 345 678.", "Ruf 030 123 456 an."):
        assert normalize_text(phone, "en") == upstream(phone, "en")


@pytest.mark.parametrize("language", LANGUAGES, ids=str)
def test_equals_upstream_on_a_corpus(language):
    for text in CORPUS:
        assert normalize_text(text, language) == upstream(text, language), (text, language)


def test_the_corpus_is_changed_where_upstream_changes_it():
    """The comparison means something: normalization rewrites most of the corpus, in English
    and Chinese, and num2words reaches German."""
    assert normalize_text(CORPUS[0], "en").startswith("I paid twelve point five dollars")
    assert normalize_text("我花了12.5元。", None) == "我花了十二点五元."
    assert normalize_text("Ich habe 25 Äpfel.", "de") == "Ich habe fünfundzwanzig Äpfel."
    assert normalize_text("the [B EY1 S] guitar, 3", "en") == "the [B EY1 S] guitar, three"
    assert sum(normalize_text(t, None) != t for t in CORPUS) >= len(CORPUS) - 3


PIECES = list("abcXYZ 0123456789.,;:!?$%€£¥-+/()[]{}\"'\\@#&*_=<>年月日元点，。！？的一二三个")
PIECES += ["ZHONG4", "[laughter]", "1999", "12.50", "10:30", "Jan.", "Dr.", "  "]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.sampled_from(PIECES), min_size=1, max_size=30).map("".join),
    st.sampled_from([None, "en", "zh", "de"]),
)
def test_equals_upstream_on_random_text(text, language):
    assert normalize_text(text, language) == upstream(text, language)


def test_a_segment_the_normalizer_cannot_read_stays_as_it_is(caplog):
    text = "€<年¥。12.50.2+。'£\",:{=6,>"  # no path through the English tagger
    with caplog.at_level(logging.WARNING, logger="omnivoice_rt.text.normalize"):
        assert normalize_text(text, "en") == text == upstream(text, "en")
    assert [r.message for r in caplog.records if r.name == "omnivoice_rt.text.normalize"] == [
        "Text normalization failed on a segment (ValueError); keeping it unchanged."
    ]


# Long texts: several pieces each (MAX_PIECE_CHARS), from the corpus's sentences.
LONG_EN = " ".join(CORPUS[i] for i in (0, 3, 4, 6, 1, 5, 0, 3))
LONG_ZH = "".join(CORPUS[i] for i in (11, 12, 13, 14, 15)) * 2
# Where upstream's reading of the whole differs from its reading of each sentence alone: the
# shortest path through the long text reads "555-1234" otherwise.
LONG_MIXED = "Chapter 1.\n" + LONG_EN[:300] + " [laughter] " + LONG_EN[300:]


def read_pieces(text: str, language=None, **bounds) -> tuple[str, list[str]]:
    """``normalize_text`` with the pieces it read, in order."""
    read = []

    def run(code, piece):
        read.append(piece)
        return normalize.read_piece(code, piece)

    return normalize_text(text, language, run=run, **bounds), read


@pytest.mark.parametrize("text", [LONG_EN, LONG_ZH], ids=["en", "zh"])
def test_long_texts_are_read_in_pieces_as_upstream_reads_them_whole(text):
    words, read = read_pieces(text)
    assert len(read) >= 2 and max(map(len, read)) <= normalize.MAX_PIECE_CHARS
    assert words == upstream(text, None)


def test_pieces_read_as_upstream_reads_each_piece_where_the_whole_reads_otherwise():
    words, read = read_pieces(LONG_MIXED, "en")
    assert words != upstream(LONG_MIXED, "en")  # the difference documented in normalize.py
    assert "five hundred and fifty five to one thousand" in words
    assert "five hundred and fifty five to one thousand" in upstream(CORPUS[1], "en")
    assert normalize_text(LONG_MIXED, "en", piece_chars=None) == upstream(LONG_MIXED, "en")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.sampled_from(PIECES + [". ", "! The ", "。", " word "]), max_size=80).map("".join),
    st.integers(8, 60),
)
def test_pieces_join_back_to_the_text_within_their_limit(text, limit):
    cut = normalize.pieces(text, limit)
    assert "".join(piece + separator for piece, separator in cut) == text
    assert all(len(piece) <= limit for piece, _ in cut)
    assert all(separator in ("", " ") for _, separator in cut)


def test_a_long_sentence_is_cut_between_two_words_of_letters():
    text = "We got " + "very " * 38 + "thanks for the $5 million grant."
    (first, space), (second, _) = normalize.pieces(text)
    assert space == " " and "$5 million grant" in second
    assert first.split()[-1].isalpha() and second.split()[0].isalpha()


def test_reading_stops_between_pieces_when_asked_or_past_the_limit():
    asked = []

    def leave_after_two():
        asked.append(1)
        return len(asked) > 2

    with pytest.raises(Cancelled):
        read_pieces(LONG_EN, should_stop=leave_after_two)
    assert len(asked) == 3  # two pieces read, the third not
    numbers = " ".join(str(n * 7919) for n in range(100))  # 600 characters of numbers
    _, read = read_pieces(numbers, "en")
    assert len(read) >= 3
    read = []
    with pytest.raises(normalize.TextTooLong, match="over 300 characters long with its numbers"):
        normalize_text(
            numbers, "en", max_chars=300, run=lambda *piece: read.append(piece) or "x" * 301
        )
    assert len(read) == 1  # its words passed the limit: nothing more was read


def test_the_fsts_are_wetextprocessings():
    """data/tn holds the FSTs WeTextProcessing 1.2.0 ships, byte for byte."""
    for tagger, verbalizer, _orders in FSTS.values():
        for name, digest in (tagger, verbalizer):
            shipped = shipped_fst(name).read_bytes()
            assert hashlib.sha256(shipped).hexdigest() == digest, name
            assert gzip.decompress((FST_DIR / f"{name}.gz").read_bytes()) == shipped, name


def test_threads_share_the_normalizers():
    texts = [f"Item {i} costs ${i}.{i:02d} on May {i + 1}, 20{i:02d}." for i in range(24)]
    texts += [f"第{i}个苹果{i}.5元。" for i in range(24)]
    expected = [normalize_text(t) for t in texts]
    results: dict[int, str] = {}

    def work(offset):
        for i in range(offset, len(texts), 4):
            results[i] = normalize_text(texts[i])

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [results[i] for i in range(len(texts))] == expected


def test_a_missing_package_is_named():
    code = (
        "import sys; sys.modules['kaldifst'] = None\n"
        "from omnivoice_rt import normalize_text\n"
        "print(normalize_text('See you at 5.', 'de'))\n"  # num2words: no kaldifst needed
        "try:\n    normalize_text('See you at 5.', 'en')\n"
        "except ValueError as exc:\n    print(exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out == [
        "See you at fünf.",
        "text normalization needs kaldifst: pip install kaldifst num2words (dependencies of "
        "omnivoice-onnx; in requirements.txt)",
    ]


# ----------------------------------------------------------------------------- requests


def test_a_request_reads_its_numbers_as_words_when_asked():
    text = "I paid $12.50 on Jan. 5, 2024."
    plain = Request.from_options({"text": text, "language": "en-US"})
    assert plain.spoken_text == text and not plain.normalized
    asked = Request.from_options({"text": text, "language": "en-US", "normalize_text": True})
    assert asked.text == text and asked.normalized
    assert asked.spoken_text == upstream(text, "en")
    assert asked.options()["text"] == text and asked.options()["normalize_text"] is True
    door = Request.from_options({"text": text}, "balanced", normalize_text=True)
    assert door.normalized
    off = Request.from_options({"text": text, "normalize_text": False}, normalize_text=True)
    assert not off.normalized
    # the instruct's language is chosen from the text the model reads, as upstream
    zh = Request.from_options({"text": "12", "instruct": "male", "normalize_text": True}, "best")
    assert zh.spoken_text == "twelve" and zh.instruct == "male"


@pytest.mark.parametrize(
    "options,message",
    [
        # 3,000 characters read as 13,000 ("five percent"; reading numbers takes 2-4 ms a character)
        (
            {"text": "5% " * 1000},
            "text is over 10000 characters long with its numbers read as words",
        ),
        ({"text": "啊！", "language": "zh"}, "text has no letters or digits to speak"),
        ({"text": "5 apples", "language": "Klingon"}, "Unknown language 'Klingon'"),
        ({"text": "5 apples", "normalize_text": "yes"}, "normalize_text must be true or false"),
    ],
)
def test_bad_input_with_normalization(options, message):
    with pytest.raises(ValueError, match=message):
        Request.from_options({"normalize_text": True, **options})


def test_generate_normalizes_the_target_text(fp32_artifacts):
    """Codes equal upstream's generate(normalize_text=True) (omnivoice_build.equivalence's
    "normalized" cases, tests/runtime/test_runtime.py); here: what the result says, and that the model
    read the words (other codes than the digits give)."""
    from omnivoice_rt import OmniVoiceONNX

    voice = OmniVoiceONNX.load(fp32_artifacts, "fp32")
    text = "See you at 5 pm on May 3."
    options = {"num_step": 4, "seed": 0, "duration": 2.0}
    read = voice.generate(text, normalize_text=True, **options)
    plain = voice.generate(text, **options)
    assert read.metadata["normalized_text"] == upstream(text, None)
    assert "normalized_text" not in plain.metadata
    assert not np.array_equal(read.codes[0], plain.codes[0])
    words = voice.generate(upstream(text, None), **options)
    assert np.array_equal(read.codes[0], words.codes[0])
