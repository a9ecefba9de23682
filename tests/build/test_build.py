"""build_artifacts.py: each sub-model against its PyTorch module, on the tiny fixture.

Tolerances. fp32 graphs compute what PyTorch computes, in another order: 1e-4 max abs.
Lower precisions are compared by what they change, measured on this fixture (hidden 128, so an
int4 row has only 4 blocks of 32, the worst case for block-wise quantization):

- int4 encoder (GatherBlockQuantized, symmetric RTN): each value is off by at most half a step,
  1/14 of its block's largest magnitude: that bound itself is asserted.
- fp16 encoder and heads: fp16's 11-bit mantissa, measured 3e-4 relative, bound 2e-3.
- int4 LLM: measured cosine 0.90 of the hidden states to fp32, bound 0.8. The fixture's attention
  is sharpened (q/k norm gains 3, see omnivoice_build/fixtures.py), so rounding moves attention
  weights more than at gains near 1 (0.995 there); the bound guards against a regression (wrong
  or causal weights fall near 0), it is no quality figure for the real model.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch

from omnivoice_rt.artifacts.bidirectional import check_bidirectional, llm_feeds
from omnivoice_rt.engine.sessions import load_graphs

HEAD_DIM = 32  # of the tiny fixture


@pytest.fixture(scope="module")
def fp32(fp32_artifacts):
    return load_graphs(fp32_artifacts, "fp32")[0]


@pytest.fixture(scope="module")
def int4(cpu_artifacts):
    return load_graphs(cpu_artifacts, "int4")[0]


@pytest.fixture(scope="module")
def fp16(cpu_artifacts):
    return load_graphs(cpu_artifacts, "fp16")[0]


def prompt_ids(seed: int, batch: int = 2, seq: int = 40, text: int = 15):
    """input_ids (B,8,S) as upstream builds them: text repeated over codebooks, then audio."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 1025, (batch, 8, seq))
    ids[:, :, :text] = rng.integers(0, 700, (batch, 1, text))
    audio_mask = np.zeros((batch, seq), dtype=bool)
    audio_mask[:, text:] = True
    return ids, audio_mask


def run_encoder(sessions, ids, audio_mask):
    return sessions["audio_embeddings_encoder"].run(
        None, {"input_ids": ids, "audio_mask": audio_mask}
    )[0]


def run_llm(sessions, embeds, mask):
    llm = sessions["llm_decoder"]
    return llm.run(
        ["hidden_states"], llm_feeds(llm.session, embeds.astype(np.float32), mask, HEAD_DIM)
    )[0]


def run_heads(sessions, hidden):
    return sessions["audio_heads_decoder"].run(None, {"hidden_states": hidden})[0]


def upstream_mask(lengths: list[int], seq: int) -> torch.Tensor:
    """Upstream's 4-D boolean mask: all True over each row's valid tokens, pads see themselves."""
    mask = torch.zeros(len(lengths), 1, seq, seq, dtype=torch.bool)
    for row, n in enumerate(lengths):
        mask[row, :, :n, :n] = True
        pads = torch.arange(n, seq)
        mask[row, :, pads, pads] = True
    return mask


def relative_error(actual, expected) -> float:
    return float(np.abs(actual - expected).max() / np.abs(expected).max())


def cosine(a, b) -> float:
    a, b = a.ravel().astype(np.float64), b.ravel().astype(np.float64)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


# ----------------------------------------------------------------------------- fp32 equivalence


def test_encoder_fp32_matches_upstream_embeddings(fp32, upstream):
    ids, audio_mask = prompt_ids(1)
    with torch.no_grad():
        expected = upstream._prepare_embed_inputs(
            torch.from_numpy(ids), torch.from_numpy(audio_mask)
        ).numpy()
    np.testing.assert_allclose(run_encoder(fp32, ids, audio_mask), expected, atol=1e-4, rtol=0)


def test_heads_fp32_match_upstream_logits_layout(fp32, upstream):
    hidden = np.random.default_rng(2).standard_normal((2, 17, 128)).astype(np.float32)
    with torch.no_grad():
        flat = upstream.audio_heads(torch.from_numpy(hidden))
        expected = flat.view(2, 17, 8, 1025).permute(0, 2, 1, 3).numpy()
    actual = run_heads(fp32, hidden)
    assert actual.shape == (2, 8, 17, 1025)
    np.testing.assert_allclose(actual, expected, atol=1e-4, rtol=0)


def test_llm_fp32_matches_upstream_with_4d_mask_and_right_padding(fp32, upstream):
    seq, lengths = 24, [24, 15]
    embeds = np.random.default_rng(3).standard_normal((2, seq, 128)).astype(np.float32)
    mask = np.zeros((2, seq), dtype=np.int64)
    for row, n in enumerate(lengths):
        mask[row, :n] = 1
    with torch.no_grad():
        expected = upstream.llm(
            inputs_embeds=torch.from_numpy(embeds), attention_mask=upstream_mask(lengths, seq)
        ).last_hidden_state.numpy()
    actual = run_llm(fp32, embeds, mask)
    for row, n in enumerate(lengths):  # padded positions are never read
        np.testing.assert_allclose(actual[row, :n], expected[row, :n], atol=1e-4, rtol=0)


def test_whole_forward_fp32_matches_upstream_logits(fp32, upstream):
    ids, audio_mask = prompt_ids(4, batch=1, seq=50)
    with torch.no_grad():
        expected = upstream(
            input_ids=torch.from_numpy(ids),
            audio_mask=torch.from_numpy(audio_mask),
            attention_mask=upstream_mask([50], 50),
        ).logits.numpy()
    hidden = run_llm(fp32, run_encoder(fp32, ids, audio_mask), np.ones((1, 50), dtype=np.int64))
    np.testing.assert_allclose(run_heads(fp32, hidden), expected, atol=1e-4, rtol=0)


# ----------------------------------------------------------------------------- bidirectionality


def test_llm_first_position_sees_the_last(fp32, int4):
    for sessions in (fp32, int4):
        embeds = np.random.default_rng(5).standard_normal((1, 12, 128)).astype(np.float32)
        changed = embeds.copy()
        changed[0, -1] += 1.0
        mask = np.ones((1, 12), dtype=np.int64)
        first = run_llm(sessions, embeds, mask)[0, 0]
        first_changed = run_llm(sessions, changed, mask)[0, 0]
        assert np.abs(first - first_changed).max() > 1e-2


def test_causal_graph_is_refused(fp32_artifacts, tmp_path):
    """The builder's own output (causal GQA) fails the check that the built graph passes."""
    import onnxruntime as ort

    model = onnx.load(str(fp32_artifacts / "fp32" / "llm_decoder.onnx"))
    for node in model.graph.node:
        if node.op_type == "GroupQueryAttention":
            for attr in node.attribute:
                if attr.name == "causal":
                    attr.i = 1
    onnx.save_model(
        model,
        str(tmp_path / "causal.onnx"),
        save_as_external_data=True,
        location="causal.onnx.data",
    )
    causal = ort.InferenceSession(str(tmp_path / "causal.onnx"), providers=["CPUExecutionProvider"])
    with pytest.raises(ValueError, match="causally"):
        check_bidirectional(causal, HEAD_DIM)
    repaired = ort.InferenceSession(
        str(fp32_artifacts / "fp32" / "llm_decoder.onnx"), providers=["CPUExecutionProvider"]
    )
    assert check_bidirectional(repaired, HEAD_DIM) > 1e-2


# ----------------------------------------------------------------------------- int4 and fp16


def test_int4_encoder_within_half_a_quantization_step(int4, fp32, upstream):
    """Symmetric int4 RTN puts each value within half a step (1/14 of its block's largest
    magnitude) of the truth: one step per text position, the sum of 8 at audio positions."""
    ids, audio_mask = prompt_ids(6)
    error = np.abs(run_encoder(int4, ids, audio_mask) - run_encoder(fp32, ids, audio_mask))
    text_max = upstream.llm.embed_tokens.weight.abs().max().item()
    audio_max = upstream.audio_embeddings.weight.abs().max().item()
    assert 0 < error[~audio_mask].max() <= text_max / 14 * 1.001
    assert 0 < error[audio_mask].max() <= 8 * audio_max / 14 * 1.001


def test_fp16_encoder_and_heads_within_fp16_rounding(fp16, fp32):
    ids, audio_mask = prompt_ids(7)
    assert (
        relative_error(run_encoder(fp16, ids, audio_mask), run_encoder(fp32, ids, audio_mask))
        < 2e-3
    )
    hidden = np.random.default_rng(8).standard_normal((1, 20, 128)).astype(np.float32)
    assert relative_error(run_heads(fp16, hidden), run_heads(fp32, hidden)) < 2e-3


def test_int4_profile_keeps_heads_in_float(cpu_artifacts, int4, fp32):
    heads = onnx.load(str(cpu_artifacts / "int4" / "audio_heads_decoder.onnx"))
    assert not [n for n in heads.graph.node if n.op_type == "MatMulNBits"]
    hidden = np.random.default_rng(9).standard_normal((1, 20, 128)).astype(np.float32)
    np.testing.assert_allclose(run_heads(int4, hidden), run_heads(fp32, hidden), atol=1e-5)


def test_int4_llm_uses_block_32_and_stays_close(cpu_artifacts, int4, fp32):
    llm = onnx.load(str(cpu_artifacts / "int4" / "llm_decoder.onnx"), load_external_data=False)
    blocks = {
        a.i
        for n in llm.graph.node
        if n.op_type == "MatMulNBits"
        for a in n.attribute
        if a.name == "block_size"
    }
    levels = {
        a.i
        for n in llm.graph.node
        if n.op_type == "MatMulNBits"
        for a in n.attribute
        if a.name == "accuracy_level"
    }
    assert blocks == {32} and levels == {4}
    embeds = np.random.default_rng(10).standard_normal((1, 30, 128)).astype(np.float32)
    mask = np.ones((1, 30), dtype=np.int64)
    similarity = cosine(run_llm(int4, embeds, mask), run_llm(fp32, embeds, mask))
    assert 0.8 < similarity < 1.0
