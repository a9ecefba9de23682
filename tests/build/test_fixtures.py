"""The random-weight checkpoint generator: upstream layout, tokens, shapes, scaled weights."""

from __future__ import annotations

import json

import torch

from omnivoice_build.fixtures import (
    HIGGS_REFERENCE_CONFIG,
    LLM_SIZES,
    NONVERBAL_TAGS,
    SPECIAL_TOKENS,
    higgs_config_dict,
)


def test_checkpoint_has_the_upstream_layout(tiny_checkpoint):
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        assert (tiny_checkpoint / name).is_file(), name
    for name in ("config.json", "model.safetensors", "preprocessor_config.json"):
        assert (tiny_checkpoint / "audio_tokenizer" / name).is_file(), name
    config = json.loads((tiny_checkpoint / "config.json").read_text())
    assert config["model_type"] == "omnivoice"
    assert config["llm_config"]["model_type"] == "qwen3"


def test_upstream_tokenizer_keeps_special_tokens_and_tags_whole(upstream):
    tokenizer = upstream.text_tokenizer
    for token in SPECIAL_TOKENS + NONVERBAL_TAGS:
        assert len(tokenizer(token, add_special_tokens=False).input_ids) == 1, token
    ids = tokenizer("<|lang_start|>en<|lang_end|>", add_special_tokens=False).input_ids
    assert ids[0] == tokenizer.convert_tokens_to_ids("<|lang_start|>")
    assert ids[-1] == tokenizer.convert_tokens_to_ids("<|lang_end|>")
    assert max(tokenizer.get_vocab().values()) < upstream.config.llm_config.vocab_size


def test_upstream_generates_from_the_fixture(upstream):
    codes = []
    for _ in range(2):
        audio = upstream.generate(
            "Hello world.",
            num_step=4,
            position_temperature=0.0,
            class_temperature=0.0,
            duration=1.0,
            postprocess_output=False,
        )
        codes.append(audio[0])
    assert codes[0].ndim == 1 and codes[0].size > 24000 * 0.9
    assert float(abs(codes[0]).max()) > 0
    assert (codes[0] == codes[1]).all()  # deterministic at zero temperatures


def test_weights_are_scaled_so_attention_is_not_uniform(upstream):
    q = upstream.llm.layers[0].self_attn.q_proj.weight
    assert abs(q.std().item() * q.shape[1] ** 0.5 - 1.0) < 0.1  # N(0, 1/fan_in), not 0.02
    codebook = upstream.audio_tokenizer.quantizer.quantizers[0].codebook.embed
    assert codebook.std().item() > 0.5  # the default init leaves codebooks at zero


def test_full_size_is_qwen3_0_6b_and_the_real_higgs():
    full = LLM_SIZES["full"]
    assert (full["hidden_size"], full["num_hidden_layers"], full["num_attention_heads"]) == (
        1024,
        28,
        16,
    )
    assert (full["num_key_value_heads"], full["head_dim"], full["intermediate_size"]) == (
        8,
        128,
        3072,
    )
    assert higgs_config_dict("full") == json.loads(HIGGS_REFERENCE_CONFIG.read_text())
    tiny = higgs_config_dict("tiny")
    real = json.loads(HIGGS_REFERENCE_CONFIG.read_text())
    for key in ("downsampling_ratios", "upsampling_ratios", "codebook_size"):
        assert tiny["acoustic_model_config"][key] == real["acoustic_model_config"][key]
    for key in ("conv_kernel", "conv_stride"):
        assert tiny["semantic_model_config"][key] == real["semantic_model_config"][key]
    assert torch.tensor(tiny["target_bandwidths"]).max().item() == 2
