"""The integer GEMM rewrite (``omnivoice_rt.engine.qgemm``): its weights and its two roundings against
numpy, on real ONNX Runtime sessions; the rewritten graphs made once, kept, made again when
damaged or stale, and MatMulNBits when they cannot be had."""

from __future__ import annotations

import json
import logging
import os
import shutil

import huggingface_hub.constants
import numpy as np
import onnxruntime as ort
import pytest

from omnivoice_rt.artifacts.profiles import weights_of
from omnivoice_rt.engine import qgemm, rewritten
from omnivoice_rt.engine.kernels import KERNELS
from omnivoice_rt.engine.matmul import measure, nbits_model
from omnivoice_rt.engine.qgemm import nbits_weights, requantize, rewrite_model
from omnivoice_rt.engine.sessions import session_options
from omnivoice_rt.engine.smooth import factors
from omnivoice_rt.model import OmniVoiceONNX


def session(model, kernel: str = "fp32"):
    return ort.InferenceSession(
        model.SerializeToString(),
        session_options(1, KERNELS[kernel].config),
        providers=["CPUExecutionProvider"],
    )


def test_requantized_weights_are_within_half_a_step():
    rng = np.random.default_rng(0)
    weights = rng.standard_normal((64, 48)).astype(np.float32) * rng.uniform(0.01, 3, 48)
    weights[:, 5] = 0
    w8, scale = requantize(weights)
    assert w8.dtype == np.int8 and w8.shape == weights.shape and scale.shape == (48,)
    levels = qgemm.weight_levels()  # 127, or 63 where the CPU's kernel saturates
    assert np.abs(w8).max() == levels and scale[5] == 1 and not w8[:, 5].any()
    error = np.abs(w8 * scale - weights)
    assert (error <= scale / 2 * (1 + 1e-5)).all(), (error / scale).max()
    np.testing.assert_array_equal(w8, np.rint(weights / scale).astype(np.int8))


@pytest.mark.parametrize(
    "bits,block,zero_points",
    [(4, 32, False), (4, 16, False), (4, 32, True), (8, 32, False), (8, 32, True)],
)
def test_the_weights_read_are_those_matmulnbits_multiplies_by(bits, block, zero_points):
    """A @ nbits_weights(...) equals MatMulNBits' own output in fp32 (accuracy level 0), zero
    points or not."""
    from onnx import helper, numpy_helper

    k, n = 96, 40
    model = nbits_model(3, k, n, bits, block, seed=1)
    graph = model.graph
    level = next(a for a in graph.node[0].attribute if a.name == "accuracy_level")
    level.CopyFrom(helper.make_attribute("accuracy_level", 0))
    scales = np.random.default_rng(2).uniform(0.001, 0.05, n * (k // block)).astype(np.float32)
    graph.initializer[1].CopyFrom(numpy_helper.from_array(scales, "scales"))
    if zero_points:
        per_row = (k // block * bits + 7) // 8
        points = np.random.default_rng(3).integers(0, 256, n * per_row, dtype=np.uint8)
        graph.initializer.append(numpy_helper.from_array(points, "zp"))
        graph.node[0].input.append("zp")
    weights = nbits_weights(
        graph.node[0],
        lambda name: next(
            (numpy_helper.to_array(t) for t in graph.initializer if t.name == name), None
        ),
    )
    a = np.random.default_rng(4).standard_normal((3, k)).astype(np.float32)
    (expected,) = session(model, "fp32").run(None, {"A": a})
    np.testing.assert_allclose(a @ weights, expected, rtol=1e-4, atol=1e-4)


def rows_reference(a: np.ndarray, w8: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """The ``row`` kernel in numpy: each row rounded with max |x| / 127, integer product, scales."""
    step = np.maximum(np.abs(a).max(axis=-1, keepdims=True) / 127, 1e-30)
    rows = np.rint(a / step)
    return (rows @ w8.astype(np.float64)) * step * scale


def test_weights_keep_clear_of_the_kernels_saturation(monkeypatch):
    """On x86 without VNNI or AMX the kernel adds uint8 x int8 pairs in saturating int16: the
    weights take 63 levels there (127 elsewhere), and there, full-range weights are far off."""
    assert qgemm.saturates({"avx2", "fma"}, "x86_64") and qgemm.saturates(set(), "AMD64")
    for flag in qgemm.SATURATION_FREE:
        assert not qgemm.saturates({"avx2", flag}, "x86_64")
    assert not qgemm.saturates(set(), "aarch64")
    weights = np.random.default_rng(1).standard_normal((64, 8)).astype(np.float32)
    w8, scale = requantize(weights, qgemm.SATURATION_SAFE_LEVELS)
    assert np.abs(w8).max() == 63 and np.all(np.abs(w8 * scale - weights) <= scale / 2 + 1e-7)
    if qgemm.weight_levels() == qgemm.LEVELS:
        pytest.skip("this CPU's integer GEMM does not saturate (VNNI, AMX or not x86)")
    k, n = 64, 32
    model = nbits_model(4, k, n, 4, 32, seed=5)
    weights = nbits_weights(model.graph.node[0], lambda name: _array(model, name))
    monkeypatch.setattr(qgemm, "weight_levels", lambda: qgemm.LEVELS)
    rewrite_model(model, "row")
    a = np.random.default_rng(6).standard_normal((4, k)).astype(np.float32)
    (got,) = session(model).run(None, {"A": a})
    exact = rows_reference(a, *requantize(weights, qgemm.LEVELS))
    assert np.abs(got - exact).max() > 0.1 * np.abs(exact).max()  # saturated


def test_each_row_is_rounded_alone_as_numpy_does():
    k, n = 64, 32
    model = nbits_model(4, k, n, 4, 32, seed=5)
    weights = nbits_weights(model.graph.node[0], lambda name: _array(model, name))
    rewrite_model(model, "row")
    assert {node.op_type for node in model.graph.node} >= {"QuantizeLinear", "MatMulIntegerToFloat"}
    assert not any(node.op_type == "MatMulNBits" for node in model.graph.node)
    a = np.random.default_rng(6).standard_normal((4, k)).astype(np.float32)
    a[2] *= 300  # a massive token
    (got,) = session(model).run(None, {"A": a})
    np.testing.assert_allclose(got, rows_reference(a, *requantize(weights)), rtol=2e-5, atol=1e-5)
    # the ordinary tokens come out exactly as they do without the massive one
    (alone,) = session(model).run(None, {"A": a[[0, 1, 3]]})
    np.testing.assert_array_equal(got[[0, 1, 3]], alone)


def test_one_scale_for_a_call_as_onnxruntime_rounds_it():
    """``tensor``: DynamicQuantizeLinear's rounding (uint8, zero point) for the whole call, as numpy
    computes it; one massive token then coarsens the others."""
    k, n = 64, 32
    model = nbits_model(4, k, n, 4, 32, seed=7)
    weights = nbits_weights(model.graph.node[0], lambda name: _array(model, name))
    rewrite_model(model, "tensor")
    assert [node.op_type for node in model.graph.node] == ["DynamicQuantizeMatMul"]
    a = np.random.default_rng(8).standard_normal((4, k)).astype(np.float32)
    low, high = min(a.min(), 0), max(a.max(), 0)
    step = (high - low) / 255
    zero = np.clip(np.rint(-low / step), 0, 255)
    rounded = (np.clip(np.rint(a / step) + zero, 0, 255) - zero) * step
    w8, scale = requantize(weights)
    (got,) = session(model).run(None, {"A": a})
    np.testing.assert_allclose(got, rounded @ (w8 * scale), rtol=1e-4, atol=1e-4)
    a[2] *= 300
    (spoiled,) = session(model).run(None, {"A": a})
    assert not np.array_equal(spoiled[[0, 1, 3]], got[[0, 1, 3]])


def _array(model, name):
    from onnx import numpy_helper

    return next((numpy_helper.to_array(t) for t in model.graph.initializer if t.name == name), None)


@pytest.fixture
def hf_home(tmp_path, monkeypatch):
    monkeypatch.setattr(huggingface_hub.constants, "HF_HOME", str(tmp_path / "hf"))
    return tmp_path / "hf"


def test_the_rewritten_llm_is_made_once_kept_and_remade_when_damaged(
    cpu_artifacts, hf_home, caplog
):
    caplog.set_level(logging.INFO)
    exact = OmniVoiceONNX.load(cpu_artifacts, "int4", matmul="fp32")
    voice = OmniVoiceONNX.load(cpu_artifacts, "int4", matmul="qgemm-row")
    assert voice.matmul == ("qgemm-row", "asked for")
    llm = voice.graphs["llm_decoder"].path
    assert str(hf_home / "omnivoice_repaired") in str(
        llm
    ) and "qgemm-row-smooth-int4-llm_decoder-" in str(llm)
    assert weights_of(llm) == "int8" and voice.graphs["audio_heads_decoder"].path.is_relative_to(
        cpu_artifacts
    )  # our heads are fp32: kept
    embeds = np.random.default_rng(0).standard_normal((2, 24, voice.config.hidden_size))
    hidden = [v.backbone.llm(embeds.astype(np.float32))[0] for v in (exact, voice)]
    difference = np.linalg.norm(hidden[1] - hidden[0]) / np.linalg.norm(hidden[0])
    assert 0 < difference < 0.15, difference
    speech = voice.generate("Hello there.", seed=0, preset="turbo")
    assert speech.seconds > 0 and np.isfinite(speech.waveform).all()
    made = [r for r in caplog.records if r.getMessage().startswith("making the qgemm-row")]
    assert len(made) == 1

    caplog.clear()
    again = OmniVoiceONNX.load(cpu_artifacts, "int4", matmul="qgemm-row")
    assert again.graphs["llm_decoder"].path == llm
    assert not [r for r in caplog.records if r.getMessage().startswith("making")]
    np.testing.assert_array_equal(again.backbone.llm(embeds.astype(np.float32))[0], hidden[1])

    data = llm.with_name(llm.name + ".data")
    with open(data, "r+b") as f:  # truncated, as by a full disk
        f.truncate(data.stat().st_size // 2)
    stale = llm.parent.with_name("qgemm-row-smooth-int4-llm_decoder-0123456789abcdef")
    shutil.copytree(llm.parent, stale)  # from another source or version
    caplog.clear()
    remade = OmniVoiceONNX.load(cpu_artifacts, "int4", matmul="qgemm-row")
    assert [r for r in caplog.records if r.getMessage().startswith("making the qgemm-row")]
    np.testing.assert_array_equal(remade.backbone.llm(embeds.astype(np.float32))[0], hidden[1])
    assert not stale.exists() and llm.is_file()


def test_a_failed_rewrite_leaves_matmulnbits_with_one_warning(
    cpu_artifacts, hf_home, monkeypatch, caplog
):
    def broken(model, rounding, peaks=None):
        raise ValueError("a layout it does not read")

    monkeypatch.setattr(qgemm, "rewrite_model", broken)
    measure.cache_clear()  # measured again, where qgemm-row's rewrite fails too
    voice = OmniVoiceONNX.load(cpu_artifacts, "int4", matmul="qgemm")
    kernel, why = voice.matmul
    assert kernel in ("fp32", "int8") and "qgemm could not be had" in why, why
    assert "a layout it does not read" in why
    assert weights_of(voice.graphs["llm_decoder"].path).startswith("int4")
    # one line for the load, one for the measurement that could not time qgemm-row either
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 2, warnings
    assert warnings[0] == "the qgemm-row kernel cannot run here (a layout it does not read)"
    assert warnings[1].startswith("the LLM multiplies with MatMulNBits")
    assert not list((hf_home / "omnivoice_repaired").rglob("*.partial-*"))
    measure.cache_clear()  # not a measurement for the tests after this one


def test_every_source_rewrites_published_fp16_and_int4_and_our_int8(
    published_int4, cpu_artifacts, fp32_artifacts, hf_home
):
    """The published int4 (LLM repaired, then rewritten; its int4 heads too), the published
    fp16 root (fp16 activations around the integer kernels), our int8 build (8-bit)
    and our fp32 build (float MatMuls, only when asked for)."""
    cases = [(published_int4, "int4"), (published_int4, "fp16"), (cpu_artifacts, "int8")]
    cases.append((fp32_artifacts, "fp32"))
    for root, precision in cases:
        voice = OmniVoiceONNX.load(root, precision, matmul="qgemm-row")
        assert voice.matmul == ("qgemm-row", "asked for"), (root, precision, voice.matmul)
        assert weights_of(voice.graphs["llm_decoder"].path) == "int8"
        speech = voice.generate("Hello there.", seed=0, preset="turbo")
        assert speech.seconds > 0 and np.isfinite(speech.waveform).all(), (root, precision)
        if precision == "int4":
            assert voice.repaired_llm is not None
            assert weights_of(voice.graphs["audio_heads_decoder"].path) == "int8"


def test_two_processes_making_the_same_graph_at_once_both_load_it(cpu_artifacts, tmp_path):
    """Two servers started together on one cache: one makes the rewrite while the other waits
    for it (a lock beside it), then takes that one; both synthesize, one folder stays."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    script = (
        "import logging; logging.basicConfig(level=logging.INFO); "
        "from omnivoice_rt.model import OmniVoiceONNX; "
        f"v = OmniVoiceONNX.load({str(cpu_artifacts)!r}, 'int4', matmul='qgemm-row'); "
        "s = v.generate('Hello there.', seed=0, preset='turbo'); "
        "print(v.matmul[0], v.graphs['llm_decoder'].path, s.codes[0].sum())"
    )
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "PYTHONPATH": str(ROOT)}
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", script],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    ends = [run.communicate(timeout=300) for run in runs]
    outputs = [out.split() for out, _ in ends]
    assert [run.returncode for run in runs] == [0, 0], [err[-2000:] for _, err in ends]
    logs = "".join(err for _, err in ends)
    assert logs.count("making the qgemm-row llm_decoder graph in ") == 1, logs[-4000:]
    assert {out[0] for out in outputs} == {"qgemm-row"} and outputs[0][1:] == outputs[1][1:]
    folders = list(
        (tmp_path / "hf" / "omnivoice_repaired").glob("*/qgemm-row-smooth-int4-llm_decoder-*")
    )
    assert len(folders) == 1, folders


def test_a_half_made_folder_of_a_killed_maker_is_removed_by_the_next(cpu_artifacts, hf_home):
    """A process killed while it made the rewrite leaves its half-made folder; the next process
    that makes that graph removes it, and nothing else of the cache."""
    first = OmniVoiceONNX.load(cpu_artifacts, "int4", matmul="qgemm-row")
    target = first.graphs["llm_decoder"].path.parent
    shutil.rmtree(target)
    left = target.with_name(f"{target.name}.partial-1234")
    left.mkdir()
    (left / "llm_decoder.onnx.data").write_bytes(b"\0" * 4096)
    others = sorted(p.name for p in target.parent.iterdir() if p != left)
    again = OmniVoiceONNX.load(cpu_artifacts, "int4", matmul="qgemm-row")
    assert again.graphs["llm_decoder"].path.parent == target
    assert not left.exists() and sorted(p.name for p in target.parent.iterdir()) == sorted(
        [*others, target.name]
    )


def test_a_cache_on_a_file_system_without_locks_is_made_all_the_same(
    cpu_artifacts, hf_home, monkeypatch
):
    """Some network file systems refuse flock: the repaired LLM and the rewrite are made without
    the lock, as before there was one, rather than the load failing."""
    import errno
    import fcntl

    def refuse(*args):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", refuse)
    voice = OmniVoiceONNX.load(cpu_artifacts, "int4", matmul="qgemm-row")
    assert voice.matmul[0] == "qgemm-row" and str(hf_home) in str(voice.graphs["llm_decoder"].path)


def test_smoothing_factors_balance_activations_and_weights():
    s = factors(np.array([100.0, 1.0, 0.0, 4.0]), np.array([1.0, 1.0, 5.0, 0.0]))
    np.testing.assert_allclose(s, [10.0, 1.0, 1.0, 1.0])  # sqrt(peak / weight peak); 1 if zero


def test_smoothing_folds_exactly_into_norms_ups_and_values(fp32_artifacts, monkeypatch):
    """Every layer's four products' inputs are found (q, k, v's norm; o's, from the values' columns
    of the packed q, k, v product; gate and up's norm; down's, from up's columns), and any
    factors at all, folded where each input is made and into its readers' rows, leave the LLM's
    hidden states as they were (fp32 products, so only float rounding differs)."""
    from omnivoice_rt.artifacts.bidirectional import llm_feeds, load_with_weights
    from omnivoice_rt.engine import smooth

    model = load_with_weights(fp32_artifacts / "fp32" / "llm_decoder.onnx")
    initializers = {t.name: t for t in model.graph.initializer}
    found = smooth.sites(model, lambda node: qgemm.is_product(node, initializers))
    layers = sum(node.op_type == "GroupQueryAttention" for node in model.graph.node)
    kinds = [site.kind for site in found]
    assert kinds == ["norm", "values", "norm", "up"] * layers, kinds
    values = found[1]
    assert "qkv_proj" in values.producer.name and len(values.columns) == 128  # 4 heads x 32
    # 2 kv heads after q (128) and k (64): heads 0-1 read kv head 0, heads 2-3 kv head 1
    np.testing.assert_array_equal(values.columns[[0, 31, 32, 64, 127]], [192, 223, 192, 224, 255])

    rng = np.random.default_rng(0)

    def any_factors(site, peak, sample, weights, width, product):
        """Factors of choose's form: 1 for a producer's columns that make no channel of the
        site (q's and k's columns of the packed product)."""
        s = rng.uniform(0.1, 10, width or weights[0].shape[0]).astype(np.float32)
        if site.columns is None:
            return s, None
        s[np.setdiff1d(np.arange(width), site.columns)] = 1
        return s[site.columns], s

    monkeypatch.setattr(smooth, "choose", any_factors)

    def hidden(model) -> np.ndarray:
        run = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        embeds = np.random.default_rng(1).standard_normal((2, 30, 128)).astype(np.float32)
        return run.run(["hidden_states"], llm_feeds(run, embeds, None, 32))[0]

    before = hidden(model)
    g = qgemm._Graph(model)
    measured = {site.tensor: (None, None) for site in found}
    rows, columns = qgemm._smoothing(g, measured, "row")
    assert len(rows) == 4 * layers and len(columns) == 2 * layers
    for node in model.graph.node:
        if qgemm.is_product(node, g.initializers):
            w = g.tensor(node.input[1]) * rows.get(node.input[0], np.ones(1))[:, None]
            w = (w / columns.get(node.output[0], np.ones(1))).astype(np.float32)
            g.initializers[node.input[1]].CopyFrom(g.from_array(w, node.input[1]))
    after = hidden(model)
    assert np.linalg.norm(after - before) / np.linalg.norm(before) < 1e-5


def test_a_site_is_smoothed_only_where_that_rounds_it_better(monkeypatch):
    """choose: an input with two channels x100 is smoothed (its rounded product strays less);
    one without outliers whose smoothing would cost is not (full-range weights, whatever the
    CPU: the choice, not the kernel, is tested)."""
    from omnivoice_rt.engine.smooth import Site, choose

    monkeypatch.setattr(qgemm, "weight_levels", lambda: qgemm.LEVELS)

    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 96)).astype(np.float32)
    w = rng.standard_normal((96, 40)).astype(np.float32)
    site = Site("x", (), "norm", norm="gamma")

    def product(a, b):
        return qgemm.rounded_product(a, b, "row")

    def error(s):
        return np.linalg.norm(product(x / s, w * s[:, None]) - x @ w) / np.linalg.norm(x @ w)

    x[:, [3, 50]] *= 100
    s, columns = choose(site, np.abs(x).max(axis=0), x, [w], 0, product)
    assert columns is None and error(s) < 0.5 * error(np.ones(96)), (error(s), error(np.ones(96)))
    flat = np.sign(rng.standard_normal((64, 96))).astype(np.float32)  # every channel alike
    w[:, 7] *= 1e-3  # smoothing would move this row's little weight up, the others' down
    chosen = choose(site, np.abs(flat).max(axis=0), flat, [w], 0, product)
    assert chosen is None


def test_smoothing_takes_channel_outliers_off_the_rounding(
    cpu_artifacts, hf_home, monkeypatch, tmp_path
):
    """Four channels of every RMSNorm x50, or of every up and value product's output (what real
    LLMs may carry and random weights lack): qgemm-row's hidden states stray far from the exact
    kernel's, and less once the LLM's activations are smoothed where smoothing is kept (held-out
    prompts judge it; where it is dropped, the plain graph runs); on the weights as built,
    smoothing costs nothing."""
    from bench.outliers import with_channel_outliers

    embeds = np.random.default_rng(0).standard_normal((2, 40, 128)).astype(np.float32)

    def error(root, smooth: str) -> float:
        monkeypatch.setenv("OMNIVOICE_SMOOTH", smooth)
        rounded = OmniVoiceONNX.load(root, "int4", matmul="qgemm-row")
        exact = OmniVoiceONNX.load(root, "int4", matmul="fp32")
        assert ("-smooth-" in str(rounded.graphs["llm_decoder"].path)) == (smooth == "1")
        hidden = [v.backbone.llm(embeds)[0] for v in (exact, rounded)]
        return float(np.linalg.norm(hidden[1] - hidden[0]) / np.linalg.norm(hidden[0]))

    def judged(root) -> dict:  # what the smoothed load decided (judge_smoothing's record)
        monkeypatch.setenv("OMNIVOICE_SMOOTH", "1")
        voice = OmniVoiceONNX.load(root, "int4", matmul="qgemm-row")
        return json.loads(
            (voice.graphs["llm_decoder"].path.parent / rewritten.SMOOTHING).read_text()
        )

    built = {smooth: error(cpu_artifacts, smooth) for smooth in "01"}
    # 7-bit weights (a CPU whose kernel saturates) leave less to gain: on an AVX2 Zen 3 the
    # norms' smoothing kept 0.71 of the error, and the products' made these random embeddings'
    # 1.17x worse (chosen on the calibration's own inputs; issue 34's note). The products'
    # smoothing is judged on held-out prompts: on an AVX-512 VNNI Zen 5 (127 levels) it rounded
    # them worse (0.164 against 0.135) and was dropped; on an AVX2 Zen 2 it was kept
    full = qgemm.weight_levels() == qgemm.LEVELS
    for where, share in (("norms", 0.7 if full else 0.75), ("products", 0.95 if full else 1.25)):
        outliers = with_channel_outliers(
            cpu_artifacts, "int4", 4, 50, tmp_path / where, where=where
        )
        spiked = {smooth: error(outliers, smooth) for smooth in "01"}
        # the outliers add half the error again or more (norms: 14% against 7%; products 11%);
        # smoothed, they cost less (9%, 10%: the tiny fixture's 128 channels)
        assert spiked["0"] > 1.4 * built["0"], (where, built, spiked)
        if where == "norms" or judged(outliers)["kept"]:
            assert spiked["1"] < share * spiked["0"], (where, built, spiked)
        else:  # the plain rewrite's very graph
            assert spiked["1"] == spiked["0"], (where, built, spiked)
    assert built["1"] < 1.05 * built["0"], built
    monkeypatch.setenv("OMNIVOICE_SMOOTH", "yes")
    with pytest.raises(ValueError, match=r"OMNIVOICE_SMOOTH='yes': use 1 .* or 0"):
        OmniVoiceONNX.load(cpu_artifacts, "int4", matmul="qgemm-row")


def test_smoothing_is_kept_only_where_it_rounds_held_out_prompts_better(
    cpu_artifacts, hf_home, monkeypatch, tmp_path
):
    """The smoothed graph is judged whole on prompts the calibration has not seen: factors that
    spoil the rounding (drawn at random, x1e-2 to x1e2, for every site) are dropped, leaving the
    plain rewrite's very graph; the factors chosen for channel outliers at the norms are kept.
    Each decision, with both errors, is in smoothing.json beside the graph."""
    from bench.outliers import with_channel_outliers
    from omnivoice_rt.engine import smooth

    embeds = np.random.default_rng(1).standard_normal((1, 30, 128)).astype(np.float32)

    def load(root, smoothed: str):
        monkeypatch.setenv("OMNIVOICE_SMOOTH", smoothed)
        voice = OmniVoiceONNX.load(root, "int4", matmul="qgemm-row")
        record = voice.graphs["llm_decoder"].path.parent / rewritten.SMOOTHING
        judged = json.loads(record.read_text()) if record.exists() else None
        return voice.backbone.llm(embeds)[0], judged

    def spoiling(site, peak, sample, weights, width, product):
        rng = np.random.default_rng(len(peak) + width)
        if site.columns is None:
            return np.exp(rng.uniform(-4.6, 4.6, len(peak))).astype(np.float32), None
        columns = np.exp(rng.uniform(-4.6, 4.6, width)).astype(np.float32)
        return columns[site.columns], columns

    plain, none = load(cpu_artifacts, "0")
    assert none is None
    with monkeypatch.context() as patch:
        patch.setattr(smooth, "choose", spoiling)
        spoiled, judged = load(cpu_artifacts, "1")
    assert judged["kept"] is False and judged["smoothed"] > judged["plain"], judged
    np.testing.assert_array_equal(spoiled, plain)

    outliers = with_channel_outliers(cpu_artifacts, "int4", 4, 50, tmp_path / "norms")
    _, judged = load(outliers, "1")
    assert judged["kept"] is True and judged["smoothed"] < 0.8 * judged["plain"], judged


def test_a_folder_without_its_codec_is_told_so_without_a_kernel_fallback(
    cpu_artifacts, hf_home, tmp_path, caplog
):
    """What is wrong beyond the rewrite (here: no audio_tokenizer/) is the load's one error; the
    integer GEMM is not blamed for it ("qgemm-row could not be had: ..." was logged
    before the same error was raised)."""
    from omnivoice_rt.errors import ArtifactError

    folder = tmp_path / "no-codec"
    shutil.copytree(cpu_artifacts, folder, ignore=shutil.ignore_patterns("audio_tokenizer"))
    with pytest.raises(ArtifactError, match="missing or corrupt: audio_tokenizer"):
        OmniVoiceONNX.load(folder, "int4", matmul="qgemm-row")
    assert not [r for r in caplog.records if "could not be had" in r.getMessage()]
