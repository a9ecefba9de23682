"""The speed settings: the prompt K/V cache, the frame cache, guidance reuse and the presets that
bundle them.

The mechanism is held exact where it must be: run after the keys and values a full forward kept,
the target's hidden states equal that forward's (fp32, int4, and an LLM that takes position_ids,
whose positions must continue after the prompt); frames run alone at their own positions against
the other positions' kept keys and values equal the full forward too; and refreshing either cache
every step gives exactly the codes of the exact path. What the approximation costs in quality cannot be measured
on random weights; PRESETS in omnivoice_rt/model.py cites the ports that measured it.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from omnivoice_build.equivalence import GREEDY
from omnivoice_rt.engine.prompt import build_prompt
from omnivoice_rt.model import PRESETS, GenerationSettings, OmniVoiceONNX

TEXT = "Hello world, this is a test."


def half_masked_row(voice: OmniVoiceONNX, ref_codes=None, target_len: int = 40):
    """A prompt (with a reference when ``ref_codes``), target codes half of them masks, and the
    embeddings of the prompt and of the target."""
    rng = np.random.default_rng(0)
    prompt = build_prompt(
        voice.tokenizer,
        TEXT,
        target_len,
        num_codebooks=8,
        mask_id=1024,
        ref_text=None if ref_codes is None else "This is my voice.",
        ref_codes=ref_codes,
    )
    tokens = np.where(
        rng.random((8, target_len)) < 0.5, 1024, rng.integers(0, 1024, (8, target_len))
    )
    prefix = voice.backbone.embed(
        prompt.ids[:, : prompt.prefix_len], prompt.audio_mask[: prompt.prefix_len]
    )
    return prompt, tokens, prefix, voice.backbone.embed(tokens, np.ones(target_len, dtype=bool))


def cached_and_full(voice: OmniVoiceONNX, ref_codes=None, target_len: int = 40):
    """Target hidden states of one full forward, and of a target-only forward after the prompt
    keys and values that full forward kept, on the same codes."""
    prompt, tokens, prefix, target = half_masked_row(voice, ref_codes, target_len)
    full, cache = voice.backbone.llm(
        np.concatenate([prefix, target], axis=1), keep=prompt.prefix_len
    )
    cached, _ = voice.backbone.llm(target, past=cache)
    assert {v.shape[2] for v in cache.values()} == {prompt.prefix_len}
    return cached, full[:, -target_len:]


def test_cached_target_equals_the_full_forward(fp32_voice, cpu_artifacts):
    for voice in (fp32_voice, OmniVoiceONNX.load(cpu_artifacts, "int4")):
        cached, full = cached_and_full(voice)
        np.testing.assert_allclose(cached, full, atol=2e-5, rtol=0)
    ref = np.random.default_rng(1).integers(0, 1024, (8, 30))
    cached, full = cached_and_full(fp32_voice, ref_codes=ref)
    np.testing.assert_allclose(cached, full, atol=2e-5, rtol=0)


def test_positions_continue_after_the_prompt_in_an_llm_that_takes_them(
    published, tiny_checkpoint, tmp_path, monkeypatch
):
    import huggingface_hub.constants

    from omnivoice_build.published import build_llm

    monkeypatch.setattr(huggingface_hub.constants, "HF_HOME", str(tmp_path / "hf"))
    folder = tmp_path / "repo"
    shutil.copytree(published, folder)
    build_llm(tiny_checkpoint, folder / "int4", "fp32", position_ids=True)
    voice = OmniVoiceONNX.load(folder, "int4")
    assert voice.graphs["llm_decoder"].input("position_ids") is not None
    cached, full = cached_and_full(voice)
    np.testing.assert_allclose(cached, full, atol=2e-5, rtol=0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"text": TEXT},
        {"text": TEXT, "instruct": "female, low pitch"},
        {"text": TEXT, "ref_text": "This is my voice."},
    ],
)
def test_refreshing_every_step_gives_the_exact_codes(fp32_voice, kwargs, tmp_path):
    if "ref_text" in kwargs:
        from omnivoice_build.equivalence import write_reference

        kwargs = {**kwargs, "ref_audio": write_reference(str(tmp_path / "reference.wav"))}
    exact = fp32_voice.generate(**kwargs, num_step=16, **GREEDY).codes[0]
    for cache in ("prompt_cache_refresh", "frame_cache_refresh"):
        refreshed = fp32_voice.generate(**kwargs, num_step=16, **{cache: 1}, **GREEDY).codes[0]
        np.testing.assert_array_equal(refreshed, exact, err_msg=cache)
    # and the frame cache between refreshes does change the codes (it is an approximation)
    cached = fp32_voice.generate(**kwargs, num_step=16, frame_cache_refresh=8, **GREEDY).codes[0]
    assert (cached != exact).any()


@pytest.mark.parametrize("reference", [False, True])
def test_frames_run_alone_equal_the_full_forward(fp32_voice, reference):
    """A FrameCache after a full forward, told that some frames changed (their codes as last seen
    are wiped): running those frames alone, at their positions, against the kept keys and values
    of every other position gives the full forward's hidden states and keys and values."""
    from omnivoice_rt.engine.forward import FrameCache

    voice, target_len = fp32_voice, 40
    ref_codes = np.random.default_rng(1).integers(0, 1024, (8, 30)) if reference else None
    prompt, tokens, prefix, target = half_masked_row(voice, ref_codes, target_len)
    for offset, row in ((prompt.prefix_len, np.concatenate([prefix, target], axis=1)), (0, target)):
        cache = FrameCache(voice.backbone, offset, {})
        full = cache.full(row, tokens).copy()
        kept = {name: kv.copy() for name, kv in cache.kv.items()}
        changed = np.array([0, 7, 8, 9, 23, target_len - 1])
        cache.seen[:, changed] = -1  # as if these frames' codes had changed
        again = cache.partial(target, tokens)
        np.testing.assert_allclose(again, full, atol=2e-5, rtol=0)
        for name, kv in cache.kv.items():
            np.testing.assert_allclose(kv, kept[name], atol=2e-5, rtol=0, err_msg=name)
        assert (cache.seen == tokens).all()
        # with positions continuing after the past instead, the same frames come out different
        others = np.ones(offset + target_len, dtype=bool)
        others[offset + changed] = False
        past = {name: kv[:, :, others] for name, kv in kept.items()}
        wrong, _ = voice.backbone.llm(target[:, changed], past)
        assert np.abs(wrong - full[:, changed]).max() > 1e-3


def test_a_row_of_masks_runs_one_position_with_the_full_forwards_numbers(fp32_voice, monkeypatch):
    """The unconditional row's first run (every code a mask) runs one position: its hidden states
    and the keys and values it keeps equal those of the whole row run through the graph (float
    rounding apart), and the codes of every preset equal those of running it whole."""
    from omnivoice_rt.engine.forward import Backbone

    backbone, target_len = fp32_voice.backbone, 40
    row = backbone.embed(np.full((8, target_len), 1024), np.ones(target_len, dtype=bool))
    graph, rows = fp32_voice.graphs["llm_decoder"], []
    original = graph.run
    monkeypatch.setattr(
        graph,
        "run",
        lambda outputs, feeds: (
            rows.append(feeds["inputs_embeds"].shape[1]) or original(outputs, feeds)
        ),
    )
    hidden, kept = backbone.llm(row, keep=target_len)
    plain, _ = backbone.llm(row)
    assert rows == [1, 1] and backbone.rotary is not None
    whole, whole_kept = backbone.llm(row, keep=target_len, positions=np.arange(target_len))
    np.testing.assert_allclose(hidden, whole, atol=2e-5, rtol=0)
    np.testing.assert_allclose(plain, whole, atol=2e-5, rtol=0)
    assert whole_kept.keys() == kept.keys()
    for name, kv in whole_kept.items():
        assert kv.shape == kept[name].shape
        np.testing.assert_allclose(kept[name], kv, atol=2e-5, rtol=0, err_msg=name)
    # the keys differ from one position to the next (rotated), the values do not
    key = next(name for name in kept if name.endswith(".key"))
    assert np.abs(kept[key][:, :, 1] - kept[key][:, :, 0]).max() > 1e-3
    # a row that is not all one embedding runs whole
    rows.clear()
    backbone.llm(row + np.arange(target_len, dtype=row.dtype)[None, :, None])
    assert rows == [target_len]
    # an LLM whose rotary tables are unknown keeps no keys it did not compute
    rows.clear()
    backbone.rotary = None
    try:
        backbone.llm(row, keep=target_len)
        backbone.llm(row)
    finally:
        del backbone.rotary  # read again from the graph when next needed
    assert rows == [target_len, 1]
    one = {p: fp32_voice.generate(TEXT, preset=p, seed=0) for p in ("best", "balanced", "turbo")}
    monkeypatch.setattr(
        Backbone,
        "uniform",
        lambda self, embeds, keep, timings: self.llm(
            embeds, keep=keep, timings=timings, positions=np.arange(embeds.shape[1])
        ),
    )
    for preset, speech in one.items():
        whole_codes = fp32_voice.generate(TEXT, preset=preset, seed=0).codes[0]
        np.testing.assert_array_equal(speech.codes[0], whole_codes, err_msg=preset)


@pytest.mark.parametrize("reference", [False, True])
def test_a_target_only_refresh_equals_the_full_forward_on_the_same_codes(fp32_voice, reference):
    """``frame_refresh_prompt=False``: a refresh runs the target alone after the prompt's kept
    keys and values; on the codes the prompt's were computed with, that is the full forward."""
    from omnivoice_rt.engine.forward import FrameCache

    voice, target_len = fp32_voice, 40
    ref_codes = np.random.default_rng(1).integers(0, 1024, (8, 30)) if reference else None
    prompt, tokens, prefix, target = half_masked_row(voice, ref_codes, target_len)
    cache = FrameCache(voice.backbone, prompt.prefix_len, {}, prompt_too=False)
    row = lambda: np.concatenate([prefix, target], axis=1)  # noqa: E731
    full = cache(True, row, target, tokens).copy()
    kept = {name: kv.copy() for name, kv in cache.kv.items()}
    again = cache(True, lambda: pytest.fail("the prompt ran again"), target, tokens)
    np.testing.assert_allclose(again, full, atol=2e-5, rtol=0)
    for name, kv in cache.kv.items():
        np.testing.assert_allclose(kv, kept[name], atol=2e-5, rtol=0, err_msg=name)


def test_the_logits_of_unchanged_frames_are_kept(fp32_voice, monkeypatch):
    """With the frame cache the heads run only on frames whose hidden states changed: the heads
    of a few frames equal the whole call's, and turbo's codes equal those of heads run on all."""
    from omnivoice_rt.engine.forward import GuidedForward

    _, _, prefix, target = half_masked_row(fp32_voice)
    hidden, _ = fp32_voice.backbone.llm(target)
    frames = np.array([0, 3, 4, 39])
    np.testing.assert_array_equal(
        fp32_voice.backbone.heads(hidden[:, frames]),
        fp32_voice.backbone.heads(hidden)[:, :, frames],
    )
    kept = fp32_voice.generate(TEXT, preset="turbo", **GREEDY)
    calls = []
    original = fp32_voice.backbone.heads
    monkeypatch.setattr(
        fp32_voice.backbone, "heads", lambda h, t=None: calls.append(h.shape[1]) or original(h, t)
    )
    again = fp32_voice.generate(TEXT, preset="turbo", **GREEDY)
    np.testing.assert_array_equal(again.codes[0], kept.codes[0])
    target_len = kept.codes[0].shape[1]
    assert calls[0] == target_len and min(calls) < target_len / 2  # few frames, late calls
    monkeypatch.setattr(
        GuidedForward,
        "row_logits",
        lambda self, index, hidden: self.backbone.heads(hidden, self.timings)[0],
    )
    everything = fp32_voice.generate(TEXT, preset="turbo", **GREEDY)
    np.testing.assert_array_equal(everything.codes[0], kept.codes[0])


def count_llm_rows(voice, **kwargs) -> list[int]:
    """The sequence length of every LLM call one generation makes."""
    graph = voice.graphs["llm_decoder"]
    original, rows = graph.run, []
    graph.run = lambda outputs, feeds: (
        rows.append(feeds["inputs_embeds"].shape[1]) or original(outputs, feeds)
    )
    try:
        voice.generate(TEXT, duration=2.0, **kwargs)
    finally:
        graph.run = original
    return rows


def test_every_array_the_llm_is_fed_is_laid_out_in_order(fp32_voice):
    """ONNX Runtime copies an input that is not C-contiguous, slowly when its positions are the
    outer axis (what ``kv[:, :, mask]`` gives): a frame-cache call fed such keys and values took
    85 ms against 47 (docs/performance.md). No preset, with or without a reference, feeds one."""
    from omnivoice_rt.voice_prompt import VoicePrompt

    graph = fp32_voice.graphs["llm_decoder"]
    original, scattered = graph.run, set()

    def run(outputs, feeds):
        scattered.update(k for k, v in feeds.items() if not v.flags["C_CONTIGUOUS"])
        return original(outputs, feeds)

    reference = VoicePrompt(np.random.default_rng(1).integers(0, 1024, (8, 30)), "Hi there.", 0.1)
    graph.run = run
    try:
        for preset in PRESETS:
            for voice in ({}, {"voice_prompt": reference}):
                fp32_voice.generate(TEXT, duration=2.0, preset=preset, seed=0, **voice)
    finally:
        graph.run = original
    assert not scattered


def test_balanced_runs_the_prompt_twice_and_the_unconditional_row_every_third_step(fp32_voice):
    target = 50  # duration 2.0
    exact = count_llm_rows(fp32_voice, num_step=16, seed=0)
    # a conditional and an unconditional row per step; the first unconditional row, all masks,
    # runs one position (Backbone.uniform)
    assert len(exact) == 32 and exact[1] == 1 and set(exact[2:]) == {target, max(exact)}
    balanced = count_llm_rows(fp32_voice, num_step="balanced", seed=0)
    whole = max(exact)
    assert balanced.count(whole) == 2  # steps 0 and 8 refresh the cache
    # the cached conditional rows, and the unconditional row at 0 (one position), 3, ... 15
    assert balanced.count(target) == 14 + 5 and balanced[1] == 1
    none = count_llm_rows(fp32_voice, num_step=16, guidance_scale=0.0, seed=0)
    assert none == [whole] * 16  # no unconditional row at guidance 0


def test_the_frame_cache_forwards_only_the_changed_frames_between_refreshes(fp32_voice):
    target = 50  # duration 2.0
    settings = {"num_step": 12, "frame_cache_refresh": 6, "guidance_every": 3}
    rows = count_llm_rows(fp32_voice, **settings, seed=0)
    whole = max(count_llm_rows(fp32_voice, num_step=12, seed=0))
    # steps 0 and 6 run the conditional row in full; the unconditional row runs at 0, 3, 6, 9,
    # in full at its first run (refreshed every 6 of its runs), which is all masks: one position
    assert rows.count(whole) == 2 and rows[1] == 1
    partial = [n for n in rows[2:] if n < target]
    assert len(partial) == 10 + 3 and sum(partial) < 10 * target / 2
    fp32_voice.backbone.takes_positions = False  # an LLM that cannot run frames at their positions
    try:
        expected = [n for step in range(12) for n in [whole] + [target] * (step % 3 == 0)]
        expected[1] = 1
        assert count_llm_rows(fp32_voice, **settings, seed=0) == expected
    finally:
        fp32_voice.backbone.takes_positions = True


def test_a_refresh_follows_the_share_of_codes_committed(fp32_voice):
    """With ``cache_refresh_share`` a row runs in full at the first step whose codes differ from
    those of its last full run in that share of all codes: the steps follow from the schedule."""
    from omnivoice_rt.engine.unmask import schedule

    total, share = 8 * 50, 0.4
    counts = schedule(total, 12, 0.1)
    expected, base = [], 0
    for step in range(12):
        committed = sum(counts[:step])
        if step == 0 or (committed - base) / total >= share:
            expected.append(step)
            base = committed
    assert len(expected) >= 2
    whole = max(count_llm_rows(fp32_voice, num_step=12, guidance_scale=0.0, seed=0))
    for cache in ("frame_cache_refresh", "prompt_cache_refresh"):
        rows = count_llm_rows(
            fp32_voice,
            num_step=12,
            guidance_scale=0.0,
            cache_refresh_share=share,
            seed=0,
            **{cache: 12},
        )
        assert [step for step, n in enumerate(rows) if n == whole] == expected, cache
    # turbo's refreshes after the first run the target alone (50 frames), not the prompt
    rows = count_llm_rows(
        fp32_voice, preset="turbo", guidance_scale=0.0, frame_cache_refresh=12, seed=0
    )
    assert [step for step, n in enumerate(rows) if n == whole] == expected[:1]
    assert [step for step, n in enumerate(rows) if n == 50] == expected[1:]
    assert GenerationSettings.preset("turbo").cache_refresh_share == share


def test_presets_bundle_their_settings(fp32_voice):
    assert GenerationSettings.preset("balanced") == GenerationSettings(**PRESETS["balanced"])
    assert GenerationSettings.preset("best") == GenerationSettings()  # the default is exact
    speech = fp32_voice.generate(TEXT, num_step="fast", seed=0)
    assert speech.metadata["steps"] == 12
    codes = speech.codes[0]
    assert codes.max() < 1024 and all(len(np.unique(row)) > 3 for row in codes)
    with pytest.raises(ValueError, match="unknown preset 'quick'"):
        fp32_voice.generate(TEXT, num_step="quick")
    for bad in (
        {"prompt_cache_refresh": -1},
        {"guidance_every": 0},
        {"frame_cache_refresh": -2},
        {"cache_refresh_share": 1.5},
        {"frame_refresh_prompt": "no"},
    ):
        with pytest.raises(ValueError, match=next(iter(bad))):
            fp32_voice.generate(TEXT, **bad)
