"""The text front end and the schedule equal upstream's helpers, on examples and random text."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from omnivoice_rt.audio.ops import cross_fade, fade_and_pad, remove_silence, resample
from omnivoice_rt.engine.unmask import schedule
from omnivoice_rt.text import chunks, durations, instructs, languages

pytest.importorskip("omnivoice", reason="the oracle is upstream's omnivoice package (with PyTorch)")
from omnivoice.models import omnivoice as up  # noqa: E402
from omnivoice.utils import text as up_text  # noqa: E402
from omnivoice.utils.duration import RuleDurationEstimator  # noqa: E402
from omnivoice.utils.lang_map import LANG_IDS, LANG_NAME_TO_ID  # noqa: E402

# Letters of several scripts, digits, spaces, and the punctuation the chunker splits on.
TEXT = st.lists(
    st.sampled_from(
        list("abc xyzABC 0123 你好世界 こんにちは한국 .,;:!?。，！？\"'”)(")
        + [" Mr. ", " No. ", "\n"]
    ),
    max_size=200,
).map("".join)


def test_language_tables_equal_upstream():
    assert languages.LANG_NAME_TO_ID == LANG_NAME_TO_ID
    assert languages.LANG_IDS == LANG_IDS
    for language in ["en", "zh", "English", "chinese", "GERMAN", None, "None", ""]:
        assert languages.resolve_language(language) == up._resolve_language(language or None)


@pytest.mark.parametrize(
    "tag,code",
    [
        ("en-US", "en"),
        ("pt_BR", "pt"),
        ("zh-Hant-TW", "zh"),
        ("yue-HK", "yue"),
        ("EN", "en"),
        ("ar", "arb"),
        ("ar-EG", "arb"),
        ("ne-NP", "npi"),
        ("tl", "fil"),
        ("iw-IL", "he"),
        ("fil-PH", "fil"),
    ],
)
def test_language_tags_resolve_by_their_primary_subtag(tag, code):
    from omnivoice_rt.request import Request

    assert languages.resolve_language(tag) == code
    assert Request.from_options({"text": "Hi.", "language": tag}).language == code  # every door


@pytest.mark.parametrize("tag", ["xx-YY", "en-", "english-US", "q"])
def test_a_tag_that_matches_nothing_is_an_unknown_language(tag):
    with pytest.raises(ValueError, match=f"Unknown language '{tag}'"):
        languages.resolve_language(tag)


@pytest.mark.parametrize(
    "instruct,use_zh",
    [
        ("female, low pitch, british accent", False),
        ("Male，Elderly", False),
        ("male, elderly", True),
        ("男，河南话", False),
        (" whisper , ", False),
        ("female，中年", False),
        (None, False),
        ("  ", False),
    ],
)
def test_instructs_normalise_like_upstream(instruct, use_zh):
    assert instructs.resolve_instruct(instruct, use_zh) == up._resolve_instruct(instruct, use_zh)


@pytest.mark.parametrize(
    "instruct", ["robot voice", "male, female", "british accent, 四川话", "mael"]
)
def test_bad_instructs_fail_like_upstream(instruct):
    with pytest.raises(ValueError) as ours:
        instructs.resolve_instruct(instruct)
    with pytest.raises(ValueError) as theirs:
        up._resolve_instruct(instruct)
    assert str(ours.value) == str(theirs.value)


@settings(max_examples=200, deadline=None)
@given(TEXT, st.integers(min_value=1, max_value=120))
def test_chunking_equals_upstream(sample, chunk_len):
    assert chunks.chunk_text_punctuation(sample, chunk_len, 3) == up_text.chunk_text_punctuation(
        sample, chunk_len, 3
    )


@settings(max_examples=200, deadline=None)
@given(TEXT, st.one_of(st.none(), TEXT))
def test_prompt_text_and_punctuation_equal_upstream(sample, ref):
    assert chunks.combine_text(sample, ref) == up._combine_text(sample, ref)
    assert chunks.add_punctuation(sample) == up_text.add_punctuation(sample)


@settings(max_examples=200, deadline=None)
@given(TEXT, st.one_of(st.none(), TEXT), st.integers(1, 500), st.floats(0.3, 3.0))
def test_duration_estimate_equals_upstream(sample, ref, ref_frames, speed):
    estimator = RuleDurationEstimator()
    model = type("M", (), {"duration_estimator": estimator})()
    expected = up.OmniVoice._estimate_target_tokens(
        model, sample, ref, ref_frames if ref else None, speed
    )
    assert durations.estimate_frames(sample, ref, ref_frames if ref else None, speed) == expected


def test_schedule_equals_upstream():
    for num_step in (1, 8, 12, 16, 32):
        for frames in range(1, 1600, 7):
            total = 8 * frames
            t = up._get_time_steps(0.0, 1.0, num_step, 0.1).tolist()
            expected, remaining = [], total
            for step in range(num_step):
                n = (
                    remaining
                    if step == num_step - 1
                    else min(math.ceil(total * (t[step + 1] - t[step])), remaining)
                )
                expected.append(int(n))
                remaining -= int(n)
            assert schedule(total, num_step, 0.1) == expected


@pytest.mark.parametrize(
    "rates", [(16000, 24000), (48000, 24000), (24000, 16000), (8000, 24000), (44100, 24000)]
)
def test_resample_equals_torchaudio(rates):
    import torch
    import torchaudio

    wav = np.random.default_rng(0).standard_normal((1, rates[0] + 7)).astype(np.float32) * 0.3
    expected = torchaudio.functional.resample(torch.from_numpy(wav), *rates).numpy()
    actual = resample(wav, *rates)
    assert actual.shape == expected.shape
    assert np.abs(actual - expected).max() < 1e-5  # measured 2e-7 to 2.3e-6


def test_audio_helpers_equal_upstream():
    from omnivoice.utils import audio as up_audio

    rng = np.random.default_rng(1)
    wav = np.concatenate(
        [rng.standard_normal(24000) * 0.3, np.zeros(24000), rng.standard_normal(12000) * 0.2]
    )
    wav = wav.astype(np.float32)[None, :]
    np.testing.assert_array_equal(
        remove_silence(wav, 24000, 500, 100, 100),
        up_audio.remove_silence(wav, 24000, 500, 100, 100),
    )
    np.testing.assert_array_equal(
        fade_and_pad(wav, 0.1, 0.1, 24000), up_audio.fade_and_pad_audio(wav, 0.1, 0.1, 24000)
    )
    chunks = [wav[:, :30000], wav[:, 30000:]]
    np.testing.assert_array_equal(
        cross_fade(chunks, 24000), up_audio.cross_fade_chunks(chunks, 24000)
    )


@pytest.mark.parametrize(
    ("text", "sentences", "rest"),
    [
        ("Hello there. How are", ["Hello there."], "How are"),
        ("Dr. Smith is here. Ok", ["Dr. Smith is here."], "Ok"),
        ('He said "stop." Then', ['He said "stop."'], "Then"),
        ("Pi is 3.14 today! Yes? No", ["Pi is 3.14 today!", "Yes?"], "No"),
        ("你好。我是", ["你好。"], "我是"),
        ("你好。」再见", ["你好。」"], "再见"),  # a closing quote after the mark is its sentence's
        ("Done.", [], "Done."),  # the end of what arrived is not yet the end of a sentence
        ("", [], ""),
    ],
)
def test_complete_sentences_of_a_text_still_arriving(text, sentences, rest):
    from omnivoice_rt.text.chunks import complete_sentences

    assert complete_sentences(text) == (sentences, rest)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from([".", "!", "…", "。", '"', ")", "」", "Dr", "e.g", " ", "\n", "a", "3.14"])
    ),
    st.lists(st.integers(1, 5), min_size=1),
)
def test_sentences_arriving_in_parts_are_those_of_the_text_so_far(pieces, cuts):
    """``ArrivingSentences`` fed a text in parts gives what ``complete_sentences`` gives when
    the whole text so far is cut again at each part (each mark judged once, at any cut), and in
    all what it gives for the whole text."""
    from omnivoice_rt.text.chunks import ArrivingSentences, complete_sentences

    text, arriving, so_far, got, want, at = "".join(pieces), ArrivingSentences(), "", [], [], 0
    for size in cuts * (len(text) + 1):
        if at >= len(text):
            break
        part, at = text[at : at + size], at + size
        got += arriving.feed(part)
        sentences, so_far = complete_sentences(so_far + part)
        want += sentences
        assert (got, arriving.rest) == (want, so_far)
    assert (got, arriving.rest) == complete_sentences(text)
