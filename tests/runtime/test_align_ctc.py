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
from pathlib import Path

import numpy as np
import pytest

from omnivoice_rt import align
from omnivoice_rt.align import AlignError, ctc
from omnivoice_rt.errors import ArtifactError

ROOT = Path(__file__).resolve().parents[2]


def paths(frames: int, tokens: list[int]):
    """Every CTC path of ``frames`` through ``tokens`` (as ``forced_align``'s states): each
    state sequence that starts at the first blank or token, ends at the last token or the
    blank after it, and moves 0, 1 or 2 states a frame (2 only onto a token unlike the one
    before it); with its labels."""
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


def best_spans(log_probs: np.ndarray, words: list[list[int]], unsaid: float | None):
    """The spans of the most likely paths of every choice of words kept (each word left out
    paying ``unsaid``; all of them where None), found among every path there is: each kept
    word's first and last frame, None for a word left out; every best where several tie (None
    where no path fits the frames)."""
    count, scored = len(words), []
    choices = [range(count)] if unsaid is None else [
        kept for size in range(count + 1) for kept in itertools.combinations(range(count), size)
    ]  # fmt: skip
    for kept in choices:
        tokens = [t for k in kept for t in words[k]]
        every = paths(len(log_probs), tokens) if tokens else [((0,) * len(log_probs), [0])]
        for path, labels in every:
            score = sum(log_probs[t, labels[s]] for t, s in enumerate(path))
            spans, at = [None] * count, 0
            for k in kept:
                on = [t for t, s in enumerate(path) if 2 * at < s < 2 * (at + len(words[k]))]
                spans[k], at = (on[0], on[-1]), at + len(words[k])
            scored.append((score - (count - len(kept)) * (unsaid or 0), spans))
    if not scored:  # too few frames for the words
        return [None]
    top = max(score for score, _ in scored)
    return [spans for score, spans in scored if score > top - 1e-9]


@pytest.mark.unit
@pytest.mark.parametrize(
    "words", [[[1], [2]], [[1], [1]], [[2, 1], [2]], [[1], [2], [1]], [[1], [2], [2], [1]]]
)
@pytest.mark.parametrize("unsaid", [None, 0.5, 2.0, 6.0])
def test_forced_alignment_is_the_best_path_of_the_words_it_keeps(words, unsaid):
    """Against every path of every choice of words to keep (each left out paying
    ``unsaid``): the same words' first and last frames, None for each word left out. Some
    emissions are peaked (a label far likelier than the rest), where leaving a word out must
    cost no frame of its own: the words kept meet as if the others were never in the text."""
    rng = np.random.default_rng(len(words) + int(unsaid or 0))
    for trial in range(6):
        frames = 5 if len(words) < 4 else 4
        probs = rng.dirichlet(np.ones(3) * (0.3 if trial % 2 else 0.05), frames) + 1e-6
        log_probs = np.log(probs / probs.sum(1, keepdims=True))
        assert ctc.forced_align(log_probs, words, 0, unsaid) in best_spans(
            log_probs, words, unsaid
        ), trial


@pytest.mark.unit
def test_forced_alignment_follows_clear_emissions_and_knows_its_limits():
    said = [0, 0, 1, 1, 1, 0, 2, 2, 2, 0]  # blank, "a" on frames 2-4, blank, "b" on 6-8, blank
    log_probs = np.log(np.full((10, 3), 0.05))
    log_probs[np.arange(10), said] = np.log(0.9)
    assert ctc.forced_align(log_probs, [[1], [2]], 0) == [(2, 4), (6, 8)]
    assert ctc.forced_align(log_probs, [[1], [2]], 0, ctc.UNSAID) == [(2, 4), (6, 8)]
    assert ctc.forced_align(log_probs[:2], [[1, 1]], 0) is None  # "aa" needs a blank between
    with pytest.raises(AlignError, match="too large to align at once"):
        ctc.forced_align(np.zeros((30_000, 3)), [[1] * 1_000], 0)


@pytest.mark.unit
def test_a_word_the_model_hears_nowhere_is_left_out():
    """Emissions of "a b" where the text is "a c b": with ``UNSAID`` "c" is unplaced and its
    neighbours keep their frames; first or last, two side by side, and a token repeated across
    the word left out ("a c a": the two a's meet past a blank) alike; without it, "c" is forced
    in. A word heard faintly (its token at a tenth of the blank's odds) is kept. (A trained
    model's other labels are far less likely than 1e-4 where it hears one.)"""
    said = [0, 1, 1, 0, 0, 2, 2, 0]  # blank, "a", blank, "b", blank
    log_probs = np.log(np.full((8, 4), 1e-4))
    log_probs[np.arange(8), said] = np.log(1 - 3e-4)
    a, b, c = [1], [2], [3]
    assert ctc.forced_align(log_probs, [a, c, b], 0, ctc.UNSAID) == [(1, 2), None, (5, 6)]
    assert ctc.forced_align(log_probs, [c, a, b], 0, ctc.UNSAID) == [None, (1, 2), (5, 6)]
    assert ctc.forced_align(log_probs, [a, b, c], 0, ctc.UNSAID) == [(1, 2), (5, 6), None]
    two = ctc.forced_align(log_probs, [a, c, c, b], 0, ctc.UNSAID)
    assert two == [(1, 2), None, None, (5, 6)]
    forced = ctc.forced_align(log_probs, [a, c, b], 0)
    assert None not in forced and forced[0][0] == 1 and forced[2][1] == 6
    again = log_probs.copy()
    again[5:7] = again[1:3]  # "a", blank, "a": the text "a c a"
    assert ctc.forced_align(again, [a, c, a], 0, ctc.UNSAID) == [(1, 2), None, (5, 6)]
    # no blank between the words kept: leaving "c" out costs no frame of its own
    tight = np.log(np.full((6, 4), 1e-4))
    tight[np.arange(6), [0, 1, 1, 2, 2, 0]] = np.log(1 - 3e-4)  # blank, "a", "a", "b", "b", blank
    assert ctc.forced_align(tight, [a, c, b], 0, ctc.UNSAID) == [(1, 2), None, (3, 4)]
    assert ctc.forced_align(tight[1:], [c, a, b], 0, ctc.UNSAID) == [None, (0, 1), (2, 3)]
    assert ctc.forced_align(tight[1:5], [c, c, a, b], 0, ctc.UNSAID) == [None, None, (0, 1), (2, 3)]
    faint = log_probs.copy()
    faint[3:5, 3] = np.log(0.0999)  # "c" heard faintly on frames 3-4
    assert None not in ctc.forced_align(faint, [a, c, b], 0, ctc.UNSAID)


@pytest.fixture(scope="module")
def ctc_model(tmp_path_factory):
    """The random-weight CTC model, exported with torch: a ``build`` fixture (conftest's NEEDS)."""
    pytest.importorskip("torch", reason="the export needs torch (the dev extra)")
    from omnivoice_build.ctc_fixture import export_ctc

    return str(export_ctc(tmp_path_factory.mktemp("ctc")))


def noise(seconds: float, rate: int = 24000) -> np.ndarray:
    return np.random.default_rng(0).normal(0, 0.1, round(seconds * rate)).astype(np.float32)


def test_a_ctc_model_places_every_word_it_can_spell_in_order(ctc_model):
    """Words spelled in the model's labels (case and accents folded) are placed, in order,
    inside the recording, at its 20 ms frames; a word it cannot spell (Chinese, for MMS-FA's
    Latin labels) is unplaced; the words are the text's as written."""
    text = "Hello, world! Don't 你好 Ça va."
    words = align.align(noise(3.0), 24000, text, model=ctc_model)
    assert [w.word for w in words] == align.words_of(text)
    assert [w.start is None for w in words] == [False] * 3 + [True] * 2 + [False] * 2
    placed = [w for w in words if w.start is not None]
    assert placed[0].start >= 0 and placed[-1].end <= 3.0 + 1e-6
    for before, after in zip(placed, placed[1:], strict=False):
        assert before.start < before.end <= after.start < after.end
    assert all(abs(w.start / 0.02 - round(w.start / 0.02)) < 1e-6 for w in placed)
    loaded = ctc.loaded(ctc_model)
    assert loaded.spelled("Ça") == loaded.spelled("ca") and loaded.spelled("你") == []
    # the labels' own tokens (MMS-FA's star, any sound) are not the text's punctuation
    assert "*" in loaded.labels and loaded.spelled("*yes*") == loaded.spelled("yes")
    assert loaded.spelled("don't") == [loaded.index[c] for c in "don't"]
    # a text of hundreds of letters (back-pointers past int8's reach once overflowed)
    long = " ".join(["Seventy brave sailors rowed quietly along the harbour"] * 8)
    words = align.align(noise(12.0), 24000, long, model=ctc_model)
    starts = [w.start for w in words if w.start is not None]
    assert len(starts) > 48 and starts == sorted(starts) and words[-1].end <= 12.0 + 1e-6


@pytest.fixture
def unconfigured():
    """The process's aligner as no flag chose it, before and after."""
    align.configure(None)
    yield
    align.configure(None)


def test_the_process_aligner_is_the_flag_then_the_environment(ctc_model, monkeypatch, unconfigured):
    monkeypatch.setenv("OMNIVOICE_ALIGN_MODEL", ctc_model)
    assert align.aligner_source() == ctc_model
    assert align.align(noise(1.0), 24000, "Hi there")[0].start is not None  # no eSpeak needed
    align.configure("eSpeak")  # a server's --align-model, in any case
    assert align.aligner_source() == align.ESPEAK
    align.configure(None)
    monkeypatch.delenv("OMNIVOICE_ALIGN_MODEL")
    assert align.aligner_source() == align.ESPEAK


def test_a_folder_that_is_no_aligner_is_one_line(tmp_path, ctc_model):
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
    shutil.copy(Path(ctc_model) / "model.onnx", tmp_path / "model.onnx")  # 29 outputs, 2 labels
    with pytest.raises(ArtifactError, match=r"not \[1, frames, 2\] for aligner.json's 2 labels"):
        ctc.CtcAligner.load(tmp_path).align(noise(1.0), 24000, ["a"])


def test_a_short_recording_or_upper_case_labels_still_align(ctc_model, tmp_path):
    """Under 50 ms of audio places no word (no error); a model whose labels are capitals
    (wav2vec2's) spells a lower-case text in them."""
    import shutil
    from pathlib import Path

    assert [w.start for w in align.align(noise(0.01), 24000, "Hi you", model=ctc_model)] == [
        None
    ] * 2
    shutil.copy(Path(ctc_model) / "model.onnx", tmp_path / "model.onnx")
    config = json.loads((Path(ctc_model) / "aligner.json").read_text())
    config["labels"] = [label.upper() for label in config["labels"]]
    (tmp_path / "aligner.json").write_text(json.dumps(config))
    words = align.align(noise(1.0), 24000, "Hello you", model=str(tmp_path))
    assert all(w.start is not None for w in words)


def test_the_command_line_aligns_with_the_model_and_a_server_refuses_a_bad_one(ctc_model, tmp_path):
    import soundfile as sf

    from tests.runtime.test_runtime import ROOT

    audio, out = tmp_path / "said.wav", tmp_path / "words.json"
    sf.write(audio, noise(2.0, 16000), 16000)
    command = [sys.executable, "-m", "omnivoice_rt", "align", "--audio", str(audio)]
    done = subprocess.run(
        [*command, "--text", "Good evening, Ann.", "--align-model", ctc_model, "--output", str(out)],
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


def hearing(folder, labels: list[str]):
    """A model that hears what its recording spells: each frame of ``len(labels)`` samples is
    one label's one-hot vector, and its logits are that vector scaled (a hand-made
    ``model.onnx``: Reshape, then MatMul), at 16 kHz."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    size = len(labels)
    graph = helper.make_graph(
        [
            helper.make_node("Reshape", ["waveform", "shape"], ["frames"]),
            helper.make_node("MatMul", ["frames", "weight"], ["logits"]),
        ],
        "hearing",
        [helper.make_tensor_value_info("waveform", TensorProto.FLOAT, [1, "samples"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, "frames", size])],
        [
            numpy_helper.from_array(np.array([1, -1, size], np.int64), "shape"),
            numpy_helper.from_array(np.eye(size, dtype=np.float32) * 20, "weight"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    folder.mkdir(exist_ok=True)
    onnx.save(model, str(folder / "model.onnx"))
    config = {"labels": labels, "blank": 0, "sample_rate": 16000}
    (folder / "aligner.json").write_text(json.dumps(config), encoding="utf-8")

    def spell(frames: str) -> np.ndarray:  # "-" a blank frame, a letter its frame
        return np.eye(size, dtype=np.float32)[[labels.index(c) for c in frames]].reshape(-1)

    return spell


def test_a_word_never_spoken_has_null_times_in_the_library_and_the_tool(tmp_path):
    """A recording that says "hello you" aligned with "Hello there, you.": "there," is
    unplaced (null start and end), its neighbours placed where they are said, through
    ``align.align`` and ``omnivoice-onnx align``; the same recording and its whole text place
    every word."""
    import soundfile as sf

    from tests.runtime.test_runtime import ROOT

    spell = hearing(tmp_path / "model", list("-ehlortuy"))
    frames = "-" * 30 + "hhee-ll-lloo" + "-" * 8 + "yyoouu" + "-" * 40  # over 50 ms
    x, hop = spell(frames), 9 / 16000  # 9 samples a frame
    words = align.align(x, 16000, "Hello there, you.", model=str(tmp_path / "model"))
    assert [(w.word, w.start is None) for w in words] == [
        ("Hello", False), ("there,", True), ("you.", False)
    ]  # fmt: skip
    assert words[0].start == pytest.approx(30 * hop, abs=1e-3)
    assert words[0].end == pytest.approx(42 * hop, abs=1e-3)
    assert words[2].start == pytest.approx(50 * hop, abs=1e-3)
    assert words[2].end == pytest.approx(56 * hop, abs=1e-3)
    whole = align.align(x, 16000, "Hello, you.", model=str(tmp_path / "model"))
    assert all(w.start is not None for w in whole)
    sf.write(tmp_path / "said.wav", x, 16000, subtype="FLOAT")
    done = subprocess.run(
        [sys.executable, "-m", "omnivoice_rt", "align", "--audio", str(tmp_path / "said.wav"),
         "--text", "Hello there, you.", "--align-model", str(tmp_path / "model"),
         "--output", str(tmp_path / "words.json")],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    told = json.loads((tmp_path / "words.json").read_text())["words"]
    assert told[1] == {"word": "there,", "start": None, "end": None}
    assert told[0]["start"] is not None and told[2]["start"] is not None


def test_a_recordings_channels_are_mixed_whichever_axis_holds_them(tmp_path):
    """A recording x as two channels, y (x ten frames later) and 2x - y, in (samples, channels)
    or (channels, samples), either first: the words are placed as in x, their mean, not as in
    y (the channels are mixed, not one taken); three dimensions are one line."""
    spell = hearing(tmp_path / "model", list("-ehlortuy"))
    said = "hhee-ll-lloo" + "-" * 8 + "yyoouu"
    x, y = spell("-" * 30 + said + "-" * 40), spell("-" * 40 + said + "-" * 30)
    model, text = str(tmp_path / "model"), "Hello, you."
    mono = [w.as_dict() for w in align.align(x, 16000, text, model=model)]
    assert all(w["start"] is not None for w in mono)
    assert [w.as_dict() for w in align.align(y, 16000, text, model=model)] != mono
    for channels in ([y, 2 * x - y], [2 * x - y, y]):
        for stereo in (np.stack(channels, axis=1), np.stack(channels)):
            assert [w.as_dict() for w in align.align(stereo, 16000, text, model=model)] == mono
    with pytest.raises(align.AlignError, match="one or a few channels"):
        align.align(np.zeros((2, 2, 800), np.float32), 16000, text, model=model)


def test_a_written_word_read_otherwise_takes_its_readings_time(tmp_path, caplog):
    """A piece the model read otherwise ("$5" as "five dollars", "1 000" as "one thousand"):
    its reading is aligned and each written word takes its reading's span, written words read
    as one sharing it; aligned as written, the CTC model spells "$5" in nothing and leaves it
    unplaced. An aligner that fails while it runs (ONNX Runtime refuses a recording of no
    whole frame) leaves the piece's words unplaced, the result standing."""
    from omnivoice_rt.captions import Caption

    spell = hearing(tmp_path / "model", list("-adefhilnoprstuvwy"))
    said = ("-" * 20, "ppaayy", "-" * 4, "ffiivvee", "-" * 2, "ddoollllaarrss", "-" * 4,
            "nnooww", "-" * 4, "oonnee", "-", "tthhoouussaanndd", "-" * 20)  # fmt: skip
    at = np.cumsum([0, *map(len, said)])  # each part's first frame
    x, hop, model = spell("".join(said)), 18 / 16000, str(tmp_path / "model")
    reading, written = "Pay five dollars now one thousand.", "Pay $5 now 1 000."
    words = align.speech_words(x, 16000, [Caption(0, len(x), 16000, reading, written)], None, model)
    frames = [(w.word, round(w.start / hop), round(w.end / hop)) for w in words]
    assert frames == [
        ("Pay", at[1], at[2]), ("$5", at[3], at[6]), ("now", at[7], at[8]),
        ("1", at[9], at[12]), ("000.", at[9], at[12]),
    ]  # fmt: skip
    assert align.align(x, 16000, written, model=model)[1].start is None  # "$5" as written
    with pytest.raises(ArtifactError):  # an aligner that cannot load is said, not hidden
        align.speech_words(x, 16000, [Caption(0, len(x), 16000, reading)], None, str(tmp_path))
    cut = Caption(0, len(x) - 1, 16000, reading, written)  # 1 sample short of whole frames
    with caplog.at_level("WARNING", logger="omnivoice_rt.align"):
        words = align.speech_words(x, 16000, [cut], None, model)
    assert [(w.word, w.start, w.end) for w in words] == [
        (w, None, None) for w in align.words_of(written)
    ]
    assert "a piece's words were not aligned" in caplog.text


def test_without_espeak_ng_words_are_refused_before_synthesis_unless_a_model_aligns(tmp_path):
    """eSpeak NG missing (neither the wheel nor a system library): asking the page or the
    OpenAI door for words is one line naming the extra, before anything is made; with a CTC
    model as the process's aligner, words are given without eSpeak."""
    hearing(tmp_path / "model", list("-ab"))
    from tests.runtime.test_align import NO_ESPEAK

    code = NO_ESPEAK + (
        "from omnivoice_rt import align\n"
        "from omnivoice_rt.server.openai_api import ApiError, _words_asked\n"
        "from omnivoice_rt.server.page.shared import asked_words\n"
        "for ask in (lambda: asked_words({'words': True}), lambda: _words_asked({'words': True})):\n"
        "    try:\n"
        "        ask()\n"
        "    except (ValueError, ApiError) as exc:\n"
        "        print(type(exc).__name__, getattr(exc, 'status', ''), exc)\n"
        f"align.configure({str(tmp_path / 'model')!r})\n"
        "print('model', asked_words({'words': True}), _words_asked({'words': True}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    lines = done.stdout.splitlines()
    assert len(lines) == 3, done.stdout + done.stderr
    assert lines[0].startswith("EspeakMissing  word timings need eSpeak NG"), lines
    assert lines[1].startswith("ApiError 400"), lines
    assert all("pip install 'omnivoice-onnx[align]'" in line for line in lines[:2]), lines
    assert lines[2] == "model True True"
