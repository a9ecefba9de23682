"""Random-weight OmniVoice checkpoints in the upstream layout, for tests and benchmarks.

No real weights exist on our machines, so tests build a checkpoint that
``omnivoice.OmniVoice.from_pretrained(DIR)`` loads offline:

    DIR/config.json, model.safetensors          OmniVoice (Qwen3 body, audio embeddings, heads)
    DIR/tokenizer.json, tokenizer_config.json   a small byte-level BPE with OmniVoice's special tokens
    DIR/audio_tokenizer/                        Higgs Audio V2 tokenizer: config, preprocessor, weights

Two sizes: ``tiny`` (builds in seconds) and ``full`` (Qwen3-0.6B body and the real Higgs config).
Weights are drawn N(0, 1/fan_in) rather than at the default init, so that attention is far from
uniform and a causal model really differs from a bidirectional one (docs/design.md section 3).

    python -m omnivoice_build.fixtures --size tiny --output /tmp/ov-tiny
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import math
import sys
from pathlib import Path

logger = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent
HIGGS_REFERENCE_CONFIG = HERE / "data" / "higgs_audio_v2_tokenizer.config.json"

# Special tokens of the OmniVoice prompt, and the non-verbal tags upstream tokenizes on their own.
SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|denoise|>",
    "<|lang_start|>",
    "<|lang_end|>",
    "<|instruct_start|>",
    "<|instruct_end|>",
    "<|text_start|>",
    "<|text_end|>",
]
NONVERBAL_TAGS = [
    "[laughter]",
    "[sigh]",
    "[confirmation-en]",
    "[question-en]",
    "[question-ah]",
    "[question-oh]",
    "[question-ei]",
    "[question-yi]",
    "[surprise-ah]",
    "[surprise-oh]",
    "[surprise-wa]",
    "[surprise-yo]",
    "[dissatisfaction-hnn]",
]

# A few lines of several scripts, enough for a BPE that covers the tests' texts.
_CORPUS = [
    "Hello world, this is a test of the OmniVoice text to speech model.",
    "The quick brown fox jumps over the lazy dog. How are you today?",
    "male, female, child, teenager, young adult, middle-aged, elderly, whisper",
    "very low pitch, low pitch, moderate pitch, high pitch, very high pitch",
    "american accent, british accent, indian accent, australian accent",
    "en zh ja de fr es None",
    "你好，世界。今天天气很好。我们一起去公园散步吧。",
    "男，女，儿童，少年，青年，中年，老年，耳语，河南话，四川话，东北话",
    "极低音调，低音调，中音调，高音调，极高音调",
    "Bonjour le monde. Guten Tag! ¿Qué tal? こんにちは。",
    "ni3 hao3 [B EY1 S] 0123456789 !?.,;:'\"()-",
]

LLM_SIZES = {
    "tiny": dict(
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        vocab_size=2048,
        max_position_embeddings=4096,
    ),
    "full": dict(  # Qwen3-0.6B body
        hidden_size=1024,
        intermediate_size=3072,
        num_hidden_layers=28,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=128,
        vocab_size=151936,
        max_position_embeddings=40960,
    ),
}

# Gains of the per-head q and k norms, see make_checkpoint. The full model's 28 layers separate the
# positions at 1 already; at 3, the fp32 differences between ONNX Runtime and PyTorch grow through
# them enough to flip near-ties (measured: 1 code of 912 at the first step, margin 0.003).
ATTENTION_GAIN = {"tiny": 3.0, "full": 1.0}

# The tiny Higgs keeps every stride and rate of the real one (24 kHz, hop 960, 25 frames/s,
# HuBERT at 16 kHz, 1024 codes, 8 quantizers) and shrinks only the widths and depths.
_TINY_HIGGS = {
    "acoustic_model_config": {
        "encoder_hidden_size": 4,
        "decoder_hidden_size": 64,
        "hidden_size": 16,
        "codebook_dim": 8,
    },
    "semantic_model_config": {
        "conv_dim": [32] * 7,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_attention_heads": 2,
        "num_hidden_layers": 2,
        "num_conv_pos_embeddings": 16,
        "num_conv_pos_embedding_groups": 4,
        "classifier_proj_size": 16,
    },
    "codebook_dim": 8,
}

PREPROCESSOR_CONFIG = {
    "feature_extractor_type": "DacFeatureExtractor",
    "feature_size": 1,
    "hop_length": 960,
    "padding_side": "right",
    "padding_value": 0.0,
    "return_attention_mask": True,
    "sampling_rate": 24000,
}


def higgs_config_dict(size: str) -> dict:
    """The Higgs tokenizer config for ``size``: the real one, or the real one shrunk."""
    config = json.loads(HIGGS_REFERENCE_CONFIG.read_text())
    if size == "tiny":
        for key, value in _TINY_HIGGS.items():
            if isinstance(value, dict):
                config[key].update(value)
            else:
                config[key] = value
    return config


def write_tokenizer(out_dir: Path, vocab_size: int) -> None:
    """Train a small byte-level BPE that knows OmniVoice's special tokens and tags."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=min(vocab_size, 800) - len(SPECIAL_TOKENS) - len(NONVERBAL_TAGS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS, trainer)
    tok.add_special_tokens(SPECIAL_TOKENS)
    tok.add_tokens(NONVERBAL_TAGS)
    if tok.get_vocab_size() > vocab_size:
        raise ValueError(f"tokenizer has {tok.get_vocab_size()} ids, the model {vocab_size}")
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>"
    )
    fast.save_pretrained(out_dir)


def _scaled_normal_(module, generator) -> None:
    """Draw every matrix of ``module`` from N(0, 1/fan_in); keep norms and biases small."""
    import torch

    with torch.no_grad():
        for name, param in module.named_parameters():
            if param.ndim >= 2:
                fan_in = param[0].numel() if "embed" not in name else 1
                param.copy_(torch.randn(param.shape, generator=generator) / math.sqrt(fan_in))
            elif name.endswith("bias"):
                param.copy_(0.1 * torch.randn(param.shape, generator=generator))
            else:  # norm weights, snake alphas: around one
                param.copy_(1.0 + 0.1 * torch.randn(param.shape, generator=generator))


def write_higgs(out_dir: Path, size: str, seed: int) -> None:
    """Write ``audio_tokenizer/`` with random weights that give varied codes."""
    import torch
    from transformers import HiggsAudioV2TokenizerConfig, HiggsAudioV2TokenizerModel

    gen = torch.Generator().manual_seed(seed + 1)
    config = HiggsAudioV2TokenizerConfig(**higgs_config_dict(size))
    model = HiggsAudioV2TokenizerModel(config).eval()
    _scaled_normal_(model, gen)
    with torch.no_grad():
        for quantizer in model.quantizer.quantizers:
            book = quantizer.codebook
            book.embed.copy_(torch.randn(book.embed.shape, generator=gen))
            book.embed_avg.copy_(book.embed)
            book.cluster_size.fill_(1.0)
        # Random convolutions amplify: bring the decoded waveform to about unit scale.
        model.acoustic_decoder.conv2.weight.mul_(1e-3)
    model.save_pretrained(out_dir)
    (out_dir / "preprocessor_config.json").write_text(json.dumps(PREPROCESSOR_CONFIG, indent=2))


def make_checkpoint(output: str | Path, size: str = "tiny", seed: int = 0) -> Path:
    """Write a random-weight OmniVoice checkpoint of ``size`` into ``output``; return the path."""
    import torch
    from omnivoice.models.omnivoice import OmniVoice, OmniVoiceConfig
    from transformers import Qwen3Config

    if size not in LLM_SIZES:
        raise ValueError(f"unknown size {size!r}; use one of {sorted(LLM_SIZES)}")
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)

    llm_config = Qwen3Config(
        **LLM_SIZES[size], rms_norm_eps=1e-6, rope_theta=1_000_000.0, tie_word_embeddings=False
    )
    config = OmniVoiceConfig(llm_config=copy.deepcopy(llm_config).to_dict())
    config.architectures = ["OmniVoice"]
    model = OmniVoice(config).eval()
    _scaled_normal_(model, torch.Generator().manual_seed(seed))
    # Qwen3 normalises q and k per head, so the projections' scale cannot sharpen attention: the
    # norms' gains do. At gains near 1 a random model attends almost uniformly, the target positions
    # (all mask ids at first) stay alike, and greedy decoding commits one code per codebook nearly
    # everywhere, so that "equal codes" would prove little. The tiny model needs 3 for its codes to
    # vary along the target (tests/runtime/test_runtime.py checks that every case's codebooks do).
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith(("q_norm.weight", "k_norm.weight")):
                param.mul_(ATTENTION_GAIN[size])
    model.save_pretrained(out)
    logger.info("wrote the %s OmniVoice weights to %s", size, out)

    write_tokenizer(out, LLM_SIZES[size]["vocab_size"])
    write_higgs(out / "audio_tokenizer", size, seed)
    logger.info("wrote the tokenizer and audio_tokenizer/ to %s", out)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(LLM_SIZES), default="tiny")
    parser.add_argument("--output", required=True, help="folder to write the checkpoint into")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    make_checkpoint(args.output, args.size, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
