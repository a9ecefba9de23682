"""Keep a voice: ``Speech.voice_prompt`` is a result's voice (its first piece's codes and text),
the very reference a long text's later pieces take, so a later call in it speaks as they do."""

from __future__ import annotations

import numpy as np
import pytest

from omnivoice_build.equivalence import LONG_TEXT
from omnivoice_rt.speech import NoVoiceError, Speech
from omnivoice_rt.voice_prompt import VoicePrompt

GREEDY = dict(num_step=4, position_temperature=0.0, class_temperature=0.0, seed=0)


def test_a_kept_voice_speaks_as_a_long_texts_later_pieces_do(fp32_voice, tmp_path):
    whole = fp32_voice.generate(LONG_TEXT, **GREEDY)
    assert len(whole.codes) == len(whole.texts) > 1
    prompt = whole.voice_prompt()
    np.testing.assert_array_equal(prompt.codes, whole.codes[0])
    assert prompt.text == whole.texts[0]
    first = whole.captions[0]
    spoken = whole.waveform[first.start_sample : first.end_sample]
    assert prompt.rms == pytest.approx(float(np.sqrt(np.mean(spoken.astype(np.float64) ** 2))))
    prompt.save(tmp_path / "kept.npz")  # a file like any other voice prompt
    again = VoicePrompt.load(tmp_path / "kept.npz")
    frames = whole.codes[1].shape[1]
    later = fp32_voice.generate(
        whole.texts[1], voice_prompt=again, duration=frames / fp32_voice.frame_rate, **GREEDY
    )
    # the second piece, made alone in the kept voice: the long text's second piece
    np.testing.assert_array_equal(later.codes[0], whole.codes[1])


def test_streamed_pieces_join_with_their_texts_and_keep_the_first(fp32_voice):
    pieces = list(fp32_voice.stream(LONG_TEXT, **GREEDY))
    joined = Speech.join(pieces)
    assert joined.texts == [piece.metadata["text"] for piece in pieces]
    np.testing.assert_array_equal(joined.voice_prompt().codes, pieces[0].codes[0])


def test_a_result_without_codes_has_no_voice_to_keep():
    empty = Speech(np.zeros(100, np.float32), 24000, [])
    with pytest.raises(NoVoiceError, match="no codes"):
        empty.voice_prompt()
    long = Speech(np.zeros(100, np.float32), 24000, [np.zeros((8, 900), np.int64)], texts=["x"])
    with pytest.raises(NoVoiceError, match="at most 30 s"):
        long.voice_prompt()
