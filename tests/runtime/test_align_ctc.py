"""The aligner a user adds (issue 53): a CTC acoustic model in ONNX (``omnivoice_rt/align/ctc.py``),
its mechanics tested on hand-made emissions against every path there is, and on a small
random-weight export (``omnivoice_build/ctc_fixture.py``) through the library, the command line
and a server's flag (random weights place words nowhere in particular: only where a word may
be is asserted)."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

import numpy as np
import pytest

from omnivoice_rt import align
from omnivoice_rt.align import AlignError, ctc
from omnivoice_rt.errors import ArtifactError


def paths(frames: int, tokens: list[int]):
    """Every CTC path of ``frames`` through ``tokens`` (as ``forced_align``'s states): each
    state sequence that starts at the first blank or token, ends at the last token or the
    blank after it, and moves 0, 1 or 2 states a frame (2 only onto a token unlike the one
    before it)."""
    states = 2 * len(tokens) + 1
    labels = [0 if s % 2 == 0 else tokens[s // 2] for s in range(states)]
    for path in itertools.product(range(states), repeat=frames):
        if path[0] > 1 or path[-1] < states - 2:
            continue
        steps = [b - a for a, b in zip(path, path[1:], strict=False)]
        if all(
            0 <= d <= 1 or (d == 2 and b % 2 == 1 and labels[b] != labels[b - 2])
            for d, b in zip(steps, path[1:], strict=True)
        ):
            yield path, labels


@pytest.mark.unit
@pytest.mark.parametrize("tokens", [[1, 2], [1, 1], [2, 1, 2]])
def test_forced_alignment_is_the_best_of_every_path(tokens):
    rng = np.random.default_rng(len(tokens))
    for trial in range(5):
        frames = 6
        log_probs = np.log(rng.dirichlet(np.ones(3), frames))
        best = max(
            paths(frames, tokens),
            key=lambda p: sum(log_probs[t, p[1][s]] for t, s in enumerate(p[0])),
        )[0]
        want = [
            (min(t for t, s in enumerate(best) if s == 2 * k + 1),
             max(t for t, s in enumerate(best) if s == 2 * k + 1))
            for k in range(len(tokens))
        ]  # fmt: skip
        assert ctc.forced_align(log_probs, tokens, 0) == want, trial


@pytest.mark.unit
def test_forced_alignment_follows_clear_emissions_and_knows_its_limits():
    said = [0, 0, 1, 1, 1, 0, 2, 2, 2, 0]  # blank, "a" on frames 2-4, blank, "b" on 6-8, blank
    log_probs = np.log(np.full((10, 3), 0.05))
    log_probs[np.arange(10), said] = np.log(0.9)
    assert ctc.forced_align(log_probs, [1, 2], 0) == [(2, 4), (6, 8)]
    assert ctc.forced_align(log_probs[:2], [1, 1], 0) is None  # "aa" needs a blank between
    with pytest.raises(AlignError, match="too large to align at once"):
        ctc.forced_align(np.zeros((30_000, 3)), [1] * 1_000, 0)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    pytest.importorskip("torch", reason="the export needs torch (the dev extra)")
    from omnivoice_build.ctc_fixture import export_ctc

    return str(export_ctc(tmp_path_factory.mktemp("ctc")))


def noise(seconds: float, rate: int = 24000) -> np.ndarray:
    return np.random.default_rng(0).normal(0, 0.1, round(seconds * rate)).astype(np.float32)


def test_a_ctc_model_places_every_word_it_can_spell_in_order(model):
    """Words spelled in the model's labels (case and accents folded) are placed, in order,
    inside the recording, at its 20 ms frames; a word it cannot spell (Chinese, for MMS-FA's
    Latin labels) is unplaced; the words are the text's as written."""
    text = "Hello, world! Don't 你好 Ça va."
    words = align.align(noise(3.0), 24000, text, model=model)
    assert [w.word for w in words] == align.words_of(text)
    assert [w.start is None for w in words] == [False] * 3 + [True] * 2 + [False] * 2
    placed = [w for w in words if w.start is not None]
    assert placed[0].start >= 0 and placed[-1].end <= 3.0 + 1e-6
    for before, after in zip(placed, placed[1:], strict=False):
        assert before.start < before.end <= after.start < after.end
    assert all(abs(w.start / 0.02 - round(w.start / 0.02)) < 1e-6 for w in placed)
    loaded = ctc.loaded(model)
    assert loaded.spelled("Ça") == loaded.spelled("ca") and loaded.spelled("你") == []
    # the labels' own tokens (MMS-FA's star, any sound) are not the text's punctuation
    assert "*" in loaded.labels and loaded.spelled("*yes*") == loaded.spelled("yes")
    assert loaded.spelled("don't") == [loaded.index[c] for c in "don't"]


@pytest.fixture
def unconfigured():
    """The process's aligner as no flag chose it, before and after."""
    align.configure(None)
    yield
    align.configure(None)


def test_the_process_aligner_is_the_flag_then_the_environment(model, monkeypatch, unconfigured):
    monkeypatch.setenv("OMNIVOICE_ALIGN_MODEL", model)
    assert align.aligner_source() == model
    assert align.align(noise(1.0), 24000, "Hi there")[0].start is not None  # no eSpeak needed
    align.configure("eSpeak")  # a server's --align-model, in any case
    assert align.aligner_source() == align.ESPEAK
    align.configure(None)
    monkeypatch.delenv("OMNIVOICE_ALIGN_MODEL")
    assert align.aligner_source() == align.ESPEAK


def test_a_folder_that_is_no_aligner_is_one_line(tmp_path, model):
    import shutil
    from pathlib import Path

    (tmp_path / "model.onnx").write_bytes(b"not a model")
    with pytest.raises(ArtifactError, match="aligner.json missing; an aligner folder holds"):
        ctc.CtcAligner.load(tmp_path)
    (tmp_path / "aligner.json").write_text('{"blank": 0}')
    with pytest.raises(ArtifactError, match="aligner.json is not readable"):
        ctc.CtcAligner.load(tmp_path)
    (tmp_path / "aligner.json").write_text('{"labels": ["-", "a"], "blank": 2}')
    with pytest.raises(ArtifactError, match="its blank must be a label's index"):
        ctc.CtcAligner.load(tmp_path)
    (tmp_path / "aligner.json").write_text('{"labels": ["-", "a"]}')
    with pytest.raises(ArtifactError, match="model.onnx is not a model ONNX Runtime loads"):
        ctc.CtcAligner.load(tmp_path)
    shutil.copy(Path(model) / "model.onnx", tmp_path / "model.onnx")  # 29 outputs, 2 labels
    with pytest.raises(ArtifactError, match=r"not \[1, frames, 2\] for aligner.json's 2 labels"):
        ctc.CtcAligner.load(tmp_path).align(noise(1.0), 24000, ["a"])


def test_a_short_recording_or_upper_case_labels_still_align(model, tmp_path):
    """Under 50 ms of audio places no word (no error); a model whose labels are capitals
    (wav2vec2's) spells a lower-case text in them."""
    import shutil
    from pathlib import Path

    assert [w.start for w in align.align(noise(0.01), 24000, "Hi you", model=model)] == [None] * 2
    shutil.copy(Path(model) / "model.onnx", tmp_path / "model.onnx")
    config = json.loads((Path(model) / "aligner.json").read_text())
    config["labels"] = [label.upper() for label in config["labels"]]
    (tmp_path / "aligner.json").write_text(json.dumps(config))
    words = align.align(noise(1.0), 24000, "Hello you", model=str(tmp_path))
    assert all(w.start is not None for w in words)


def test_the_command_line_aligns_with_the_model_and_a_server_refuses_a_bad_one(model, tmp_path):
    import soundfile as sf

    from tests.runtime.test_runtime import ROOT

    audio, out = tmp_path / "said.wav", tmp_path / "words.json"
    sf.write(audio, noise(2.0, 16000), 16000)
    command = [sys.executable, "-m", "omnivoice_rt", "align", "--audio", str(audio)]
    done = subprocess.run(
        [*command, "--text", "Good evening, Ann.", "--align-model", model, "--output", str(out)],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    words = json.loads(out.read_text())["words"]
    assert [w["word"] for w in words] == ["Good", "evening,", "Ann."]
    assert all(0 <= w["start"] < w["end"] <= 2.0 for w in words)
    bad = subprocess.run(
        [sys.executable, "app.py", "--artifacts", str(tmp_path), "--align-model", str(tmp_path)],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert bad.returncode != 0 and "--align-model: aligner" in bad.stderr, bad.stderr[-800:]
    assert "model.onnx, aligner.json missing" in bad.stderr and "Traceback" not in bad.stderr
