"""Build a random-weight Whisper, in the onnx-asr "whisper" layout, that transcribes any audio as a fixed text.

``build_whisper(out_dir, size="tiny", text="This is my voice.")`` writes::

    out_dir/encoder_model.onnx            input_features (B, 80, 3000) -> last_hidden_state (B, 1500, d)
    out_dir/decoder_model_merged.onnx     optimum-style merged decoder (KV cache, ``use_cache_branch`` If node)
    out_dir/vocab.json, added_tokens.json byte-level BPE vocabulary + Whisper special tokens
    out_dir/config.json                   {"model_type": "whisper", "num_mel_bins": 80}
    (+ encoder_model_int8.onnx, decoder_model_merged_int8.onnx with ``quantize=True``)

so that ``onnx_asr.load_model("whisper", out_dir).recognize(wave, sample_rate=...)`` returns exactly ``text`` for any
input (``language="en"`` or any other language, and ``language=None``).

How the output is fixed: the weights are random except in the decoder, where every attention ``out_proj`` and every
``fc2`` are zeroed, so the decoder residual stream is just ``embed_tokens[token] + embed_positions[position]``.
Each target token (the language token, the text tokens and ``<|endoftext|>``) gets a code: one of a set of
orthogonal, zero-mean vectors of norm ``sqrt(d_model)``. ``embed_tokens[target] = code`` (the LM head is tied to
``embed_tokens``, as in Whisper) and ``embed_positions[t] = 4 * code(token wanted after position t)``. The final
LayerNorm only rescales a zero-mean vector, so the logit of the wanted token is about ``d_model`` while every other
logit stays small: greedy decoding follows the position schedule whatever the encoder says.

The model is a plain-PyTorch Whisper (no transformers needed); its ``state_dict()`` keys equal those of
``transformers.WhisperForConditionalGeneration().model``, so the same weights can be loaded there (e.g. to convert
them for CTranslate2 / faster-whisper).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from torch import nn

# Whisper's language tokens, in the order of the multilingual vocabulary (large-v3 adds "yue").
LANGUAGES = (
    "en zh de es ru ko fr ja pt tr pl ca nl ar sv it id hi fi vi he uk el ms cs ro da hu ta no th ur hr bg lt la mi "
    "ml cy sk te fa lv bn sr az sl kn et mk br eu is hy ne mn bs kk sq sw gl mr pa si km sn yo so af oc ka be tg sd "
    "gu am yi lo uz fo ht ps tk nn mt sa lb my bo tl mg as tt haw ln ha ba jw su"
).split()
N_MELS, N_FRAMES, N_AUDIO_CTX, N_TEXT_CTX = 80, 3000, 1500, 448
PROMPT_LEN = 4  # <|startoftranscript|> <|lang|> <|transcribe|> <|notimestamps|>


@dataclass(frozen=True)
class Dims:
    d_model: int
    heads: int
    encoder_layers: int
    decoder_layers: int
    ffn: int
    n_text_vocab: (
        int  # text tokens (bytes, words, fillers, ""); 50257 in the real multilingual vocabulary
    )


SIZES = {
    "tiny": Dims(d_model=64, heads=2, encoder_layers=1, decoder_layers=1, ffn=128, n_text_vocab=0),
    "base": Dims(
        d_model=512, heads=8, encoder_layers=6, decoder_layers=6, ffn=2048, n_text_vocab=50257
    ),
}


# ----------------------------------------------------------------------------------------------------------------
# Vocabulary
# ----------------------------------------------------------------------------------------------------------------
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table, as used by Whisper's (and onnx-asr's) byte-level BPE."""
    bs = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    cs = bs[:]
    for b in range(256):
        if b not in bs:
            bs.append(b)
            # 188 printable bytes map to themselves; the rest go to U+0100...
            cs.append(256 + len(cs) - 188)
    return {b: chr(c) for b, c in zip(bs, cs, strict=True)}


def make_vocab(
    text: str, n_text_vocab: int = 0
) -> tuple[dict[str, int], dict[str, int], list[int]]:
    """Return ``(vocab, added_tokens, text_ids)`` for a Whisper-layout vocabulary in which ``text`` is a few tokens.

    Text tokens: the 256 byte tokens, then one token per word-like piece of ``text`` (``" voice"`` -> ``"Ġvoice"``),
    then ``tok<N>`` fillers up to ``n_text_vocab - 1``, then ``""`` (the real vocabulary has it last; CTranslate2
    uses it to tell multilingual models). Special tokens follow in OpenAI's order, so with ``n_text_vocab=50257``
    the ids match the real multilingual Whisper (``<|endoftext|>`` 50257 ... 51865 tokens in all).
    """
    b2u = bytes_to_unicode()
    vocab = {b2u[b]: i for i, b in enumerate(sorted(b2u))}
    pieces = [
        "".join(b2u[b] for b in p.encode()) for p in re.findall(r" ?\w+| ?[^\w\s]+|\s+", text)
    ]
    # onnx-asr drops tokens that start with "<|" and one leading space of the transcript.
    if not text or text[0].isspace() or any(p.startswith("<|") for p in pieces):
        raise ValueError(
            f"unsupported text {text!r}: empty, leading whitespace or a piece starting with '<|'"
        )
    for piece in pieces:
        vocab.setdefault(piece, len(vocab))
    while len(vocab) < n_text_vocab - 1:
        vocab.setdefault(f"tok{len(vocab)}", len(vocab))  # never emitted; only pads the vocabulary
    vocab[""] = len(vocab)
    specials = [
        "<|endoftext|>",
        "<|startoftranscript|>",
        *(f"<|{lang}|>" for lang in LANGUAGES),
        "<|translate|>",
        "<|transcribe|>",
        "<|startoflm|>",
        "<|startofprev|>",
        "<|nospeech|>",
        "<|notimestamps|>",
        *(f"<|{i * 0.02:.2f}|>" for i in range(1501)),
    ]
    added = {tok: len(vocab) + i for i, tok in enumerate(specials)}
    return vocab, added, [vocab[p] for p in pieces]


# ----------------------------------------------------------------------------------------------------------------
# Model (parameter names follow transformers' WhisperModel)
# ----------------------------------------------------------------------------------------------------------------
class Attention(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.q_proj, self.k_proj = nn.Linear(d, d), nn.Linear(d, d, bias=False)
        self.v_proj, self.out_proj = nn.Linear(d, d), nn.Linear(d, d)

    def split(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, d) -> (B, H, T, d/H)
        return x.reshape(x.shape[0], x.shape[1], self.heads, -1).transpose(1, 2)

    def attend(
        self, x: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None
    ) -> torch.Tensor:
        q = self.split(self.q_proj(x)) * (k.shape[-1] ** -0.5)
        w = q @ k.transpose(2, 3)
        if mask is not None:
            w = w.masked_fill(mask, float("-inf"))
        y = (w.softmax(-1) @ v).transpose(1, 2)
        return self.out_proj(y.reshape(y.shape[0], y.shape[1], -1))


class EncoderLayer(nn.Module):
    def __init__(self, d: int, heads: int, ffn: int):
        super().__init__()
        self.self_attn, self.self_attn_layer_norm = Attention(d, heads), nn.LayerNorm(d)
        self.fc1, self.fc2, self.final_layer_norm = (
            nn.Linear(d, ffn),
            nn.Linear(ffn, d),
            nn.LayerNorm(d),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.self_attn_layer_norm(x)
        x = x + self.self_attn.attend(
            h,
            self.self_attn.split(self.self_attn.k_proj(h)),
            self.self_attn.split(self.self_attn.v_proj(h)),
            None,
        )
        return x + self.fc2(F.gelu(self.fc1(self.final_layer_norm(x))))


class DecoderLayer(nn.Module):
    def __init__(self, d: int, heads: int, ffn: int):
        super().__init__()
        self.self_attn, self.self_attn_layer_norm = Attention(d, heads), nn.LayerNorm(d)
        self.encoder_attn, self.encoder_attn_layer_norm = Attention(d, heads), nn.LayerNorm(d)
        self.fc1, self.fc2, self.final_layer_norm = (
            nn.Linear(d, ffn),
            nn.Linear(ffn, d),
            nn.LayerNorm(d),
        )

    def forward(self, x, mask, past_k, past_v, cross_k, cross_v):
        h = self.self_attn_layer_norm(x)
        k = self.self_attn.split(self.self_attn.k_proj(h))
        v = self.self_attn.split(self.self_attn.v_proj(h))
        if past_k is not None:
            k, v = torch.cat([past_k, k], 2), torch.cat([past_v, v], 2)
        x = x + self.self_attn.attend(h, k, v, mask)
        x = x + self.encoder_attn.attend(self.encoder_attn_layer_norm(x), cross_k, cross_v, None)
        return x + self.fc2(F.gelu(self.fc1(self.final_layer_norm(x)))), k, v


class Encoder(nn.Module):
    def __init__(self, dims: Dims):
        super().__init__()
        d = dims.d_model
        self.conv1 = nn.Conv1d(N_MELS, d, 3, padding=1)
        self.conv2 = nn.Conv1d(d, d, 3, stride=2, padding=1)
        self.embed_positions = nn.Embedding(N_AUDIO_CTX, d)
        self.layers = nn.ModuleList(
            EncoderLayer(d, dims.heads, dims.ffn) for _ in range(dims.encoder_layers)
        )
        self.layer_norm = nn.LayerNorm(d)

    def forward(self, input_features: torch.Tensor) -> torch.Tensor:
        x = (
            F.gelu(self.conv2(F.gelu(self.conv1(input_features)))).transpose(1, 2)
            + self.embed_positions.weight
        )
        for layer in self.layers:
            x = layer(x)
        return self.layer_norm(x)


class Decoder(nn.Module):
    def __init__(self, dims: Dims, vocab_size: int):
        super().__init__()
        d = dims.d_model
        self.embed_tokens = nn.Embedding(vocab_size, d)
        self.embed_positions = nn.Embedding(N_TEXT_CTX, d)
        self.layers = nn.ModuleList(
            DecoderLayer(d, dims.heads, dims.ffn) for _ in range(dims.decoder_layers)
        )
        self.layer_norm = nn.LayerNorm(d)

    def forward(self, input_ids, cross_kv, past=None):
        """Logits and per-layer self-attention (key, value); ``past``: per-layer (key, value) or None."""
        n_past = 0 if past is None else past[0][0].shape[2]
        n_new = input_ids.shape[1]
        q_pos = torch.arange(n_new) + n_past
        # causal: key position > query position
        mask = torch.arange(n_past + n_new)[None, :] > q_pos[:, None]
        x = self.embed_tokens(input_ids) + self.embed_positions(q_pos)
        present = []
        for i, layer in enumerate(self.layers):
            pk, pv = (None, None) if past is None else past[i]
            x, k, v = layer(x, mask, pk, pv, *cross_kv[i])
            present.append((k, v))
        return self.layer_norm(x) @ self.embed_tokens.weight.T, present

    def cross_kv(self, encoder_hidden_states):
        return [
            (a.split(a.k_proj(encoder_hidden_states)), a.split(a.v_proj(encoder_hidden_states)))
            for a in (layer.encoder_attn for layer in self.layers)
        ]


class WhisperModel(nn.Module):
    def __init__(self, dims: Dims, vocab_size: int):
        super().__init__()
        self.dims = dims
        self.encoder, self.decoder = Encoder(dims), Decoder(dims, vocab_size)


@torch.no_grad()
def make_model(
    size: str = "tiny", text: str = "This is my voice.", seed: int = 0
) -> tuple[WhisperModel, dict[str, int], dict[str, int]]:
    """Return ``(model, vocab, added_tokens)``: random weights, decoder wired to always emit ``text`` (see top)."""
    dims = SIZES[size]
    vocab, added, text_ids = make_vocab(text, dims.n_text_vocab)
    model = WhisperModel(dims, len(vocab) + len(added)).eval()
    gen = torch.Generator().manual_seed(seed)
    for name, p in model.named_parameters():
        if "layer_norm" in name:
            p.fill_(1.0 if name.endswith("weight") else 0.0)
        else:
            p.normal_(0.0, 0.02, generator=gen)
    d = dims.d_model
    pos = torch.arange(N_AUDIO_CTX)[:, None] * torch.exp(
        -math.log(10000) / (d // 2 - 1) * torch.arange(d // 2)
    )
    # Whisper's sinusoids
    model.encoder.embed_positions.weight.copy_(torch.cat([pos.sin(), pos.cos()], 1))

    dec = model.decoder
    for layer in dec.layers:  # residual stream = token embedding + position embedding
        for lin in (layer.self_attn.out_proj, layer.encoder_attn.out_proj, layer.fc2):
            lin.weight.zero_()
            lin.bias.zero_()
    eot = added["<|endoftext|>"]
    # Token wanted after position t. Position 0 (after <|startoftranscript|>) is what onnx-asr reads as the detected
    # language; positions 1-2 are inside the prompt; the text starts after <|notimestamps|> (position 3).
    schedule = [added["<|en|>"], eot, eot, *text_ids]
    if len(schedule) >= N_TEXT_CTX:
        raise ValueError(f"text is {len(text_ids)} tokens, too long")
    schedule += [eot] * (N_TEXT_CTX - len(schedule))
    targets = sorted(set(schedule))
    if len(targets) >= d:
        raise ValueError(f"text has too many distinct tokens for d_model={d}")
    # Orthogonal, zero-mean codes with entries of order 1: LayerNorm leaves their direction unchanged.
    a = torch.randn(d, len(targets), generator=gen, dtype=torch.float64)
    codes = torch.linalg.qr(a - a.mean(0)).Q.T.float() * math.sqrt(d)
    code = dict(zip(targets, codes, strict=True))
    for tok in targets:
        dec.embed_tokens.weight[tok] = code[tok]
    dec.embed_positions.weight.copy_(4.0 * torch.stack([code[tok] for tok in schedule]))
    dec.layer_norm.weight.fill_(1.0)
    dec.layer_norm.bias.zero_()
    return model, vocab, added


# ----------------------------------------------------------------------------------------------------------------
# ONNX export
# ----------------------------------------------------------------------------------------------------------------
class _DecoderNoPast(nn.Module):
    def __init__(self, model: WhisperModel):
        super().__init__()
        self.decoder = model.decoder

    def forward(self, input_ids, encoder_hidden_states):
        cross = self.decoder.cross_kv(encoder_hidden_states)
        logits, present = self.decoder(input_ids, cross)
        return logits, *(
            t for (k, v), (ck, cv) in zip(present, cross, strict=True) for t in (k, v, ck, cv)
        )


class _DecoderWithPast(nn.Module):
    def __init__(self, model: WhisperModel):
        super().__init__()
        self.decoder = model.decoder

    def forward(self, input_ids, encoder_hidden_states, *past):
        # past, per layer: decoder.key, decoder.value, encoder.key, encoder.value
        layers = [past[i : i + 4] for i in range(0, len(past), 4)]
        cross, self_kv = [(ek, ev) for _, _, ek, ev in layers], [(k, v) for k, v, _, _ in layers]
        logits, present = self.decoder(input_ids, cross, self_kv)
        # Cross-attention keys/values do not change. Like optimum's merged decoders, return empty (batch 0) tensors
        # for them, which onnx-asr reads as "keep the previous ones"; passing the inputs back would copy them.
        return logits, *(
            t
            for (k, v), (ek, ev) in zip(present, cross, strict=True)
            for t in (k, v, ek[:0], ev[:0])
        )


def _kv_names(prefix: str, n_layers: int) -> list[str]:
    parts = [f"{part}.{kv}" for part in ("decoder", "encoder") for kv in ("key", "value")]
    return [f"{prefix}.{i}.{part}" for i in range(n_layers) for part in parts]


def _export(module, args, path, inputs, outputs, dynamic_axes) -> None:
    # The TorchScript exporter (dynamo=False) writes opset 17 directly and traces the shape-dependent positions
    # (past length) as graph ops; torch >= 2.9 flags it as legacy, hence the local warning filter.
    axes = {name: ax for name, ax in dynamic_axes.items() if name in inputs or name in outputs}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", "You are using the legacy TorchScript-based ONNX export", DeprecationWarning
        )
        torch.onnx.export(
            module,
            args,
            str(path),
            input_names=inputs,
            output_names=outputs,
            dynamic_axes=axes,
            opset_version=17,
            dynamo=False,
        )


def _merge_decoders(no_past: onnx.ModelProto, with_past: onnx.ModelProto) -> onnx.ModelProto:
    """Optimum-style merged decoder: ``If(use_cache_branch, with_past, no_past)``, shared weights stored once."""
    weights: dict[str, onnx.TensorProto] = {}

    def branch(model: onnx.ModelProto, prefix: str) -> onnx.GraphProto:
        g = model.graph
        rename = {i.name: i.name for i in g.input}
        for init in g.initializer:  # move initializers to the outer graph, deduplicated by content
            unnamed = onnx.TensorProto()
            unnamed.CopyFrom(init)
            unnamed.name = ""
            key = hashlib.sha1(unnamed.SerializeToString()).hexdigest()
            if key not in weights:
                weights[key] = onnx.TensorProto()
                weights[key].CopyFrom(init)
                weights[key].name = f"w{len(weights)}"
            rename[init.name] = weights[key].name
        nodes = []
        for node in g.node:
            for i, name in enumerate(node.input):
                if name:
                    node.input[i] = rename.get(name, prefix + name)
            for i, name in enumerate(node.output):
                node.output[i] = rename[name] = prefix + name
            node.name = prefix + node.name
            nodes.append(node)
        outs = [
            onnx.helper.make_tensor_value_info(rename[o.name], onnx.TensorProto.FLOAT, None)
            for o in g.output
        ]
        return onnx.helper.make_graph(nodes, prefix + "graph", [], outs)

    else_graph, then_graph = branch(no_past, "no_past/"), branch(with_past, "with_past/")
    names = [o.name for o in no_past.graph.output]
    node = onnx.helper.make_node(
        "If", ["use_cache_branch"], names, then_branch=then_graph, else_branch=else_graph
    )
    # encoder_hidden_states is unused (so not an input) in the with-past graph, but onnx-asr always feeds it.
    inputs = list({i.name: i for i in [*no_past.graph.input, *with_past.graph.input]}.values())
    inputs.append(
        onnx.helper.make_tensor_value_info("use_cache_branch", onnx.TensorProto.BOOL, [1])
    )
    rank = {"logits": 3}  # present.*: 4
    outputs = [
        onnx.helper.make_tensor_value_info(
            o.name, onnx.TensorProto.FLOAT, [None] * rank.get(o.name, 4)
        )
        for o in no_past.graph.output
    ]
    graph = onnx.helper.make_graph(
        [node], "decoder_model_merged", inputs, outputs, list(weights.values())
    )
    merged = onnx.helper.make_model(
        graph, opset_imports=no_past.opset_import, ir_version=no_past.ir_version
    )
    onnx.checker.check_model(merged)
    return merged


def _quantize(src: Path, dst: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # MatMul only: ORT's CPU provider has no int8 ConvInteger kernel; the convs are a small part of the encoder.
    quantize_dynamic(src, dst, op_types_to_quantize=["MatMul"], weight_type=QuantType.QInt8)


def build_whisper(
    out_dir,
    size: str = "tiny",
    text: str = "This is my voice.",
    *,
    quantize: bool = False,
    seed: int = 0,
) -> Path:
    """Write an onnx-asr "whisper" model folder whose greedy transcript of any audio is ``text``; return its path.

    ``size``: "tiny" (d_model 64, 1+1 layers; builds in seconds) or "base" (whisper-base shapes: d_model 512, 6+6
    layers, 8 heads, FFN 2048, vocabulary 51865). ``quantize``: also write ``*_int8.onnx`` (dynamic int8
    quantization of the MatMul weights), loaded by ``onnx_asr.load_model(..., quantization="int8")``.
    """
    out = Path(out_dir)
    graphs = out / "onnx"  # as onnx-community publishes them
    graphs.mkdir(parents=True, exist_ok=True)
    model, vocab, added = make_model(size, text, seed)
    dims, n = model.dims, model.dims.decoder_layers
    heads, dh = dims.heads, dims.d_model // dims.heads
    feats = torch.zeros(1, N_MELS, N_FRAMES)
    ids = torch.tensor(
        [
            [
                added[t]
                for t in ("<|startoftranscript|>", "<|en|>", "<|transcribe|>", "<|notimestamps|>")
            ]
        ]
    )
    hidden = torch.zeros(1, N_AUDIO_CTX, dims.d_model)

    present, past = _kv_names("present", n), _kv_names("past_key_values", n)
    dec_axes = {"input_ids": {0: "batch", 1: "seq"}, "encoder_hidden_states": {0: "batch"}}
    dec_axes |= {"logits": {0: "batch", 1: "seq"}} | {
        name: {0: "batch", 2: "seq"} for name in present + past
    }
    past_args = [
        torch.zeros(1, heads, PROMPT_LEN if "decoder" in p else N_AUDIO_CTX, dh) for p in past
    ]

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        enc_axes = {"input_features": {0: "batch"}, "last_hidden_state": {0: "batch"}}
        _export(
            model.encoder,
            (feats,),
            graphs / "encoder_model.onnx",
            ["input_features"],
            ["last_hidden_state"],
            enc_axes,
        )
        dec_inputs, dec_outputs = ["input_ids", "encoder_hidden_states"], ["logits", *present]
        _export(
            _DecoderNoPast(model),
            (ids, hidden),
            tmp / "no_past.onnx",
            dec_inputs,
            dec_outputs,
            dec_axes,
        )
        _export(
            _DecoderWithPast(model),
            (ids[:, -1:], hidden, *past_args),
            tmp / "with_past.onnx",
            [*dec_inputs, *past],
            dec_outputs,
            dec_axes,
        )
        variants = [("", tmp / "no_past.onnx", tmp / "with_past.onnx")]
        if quantize:
            _quantize(graphs / "encoder_model.onnx", graphs / "encoder_model_int8.onnx")
            for name in ("no_past", "with_past"):
                _quantize(tmp / f"{name}.onnx", tmp / f"{name}_int8.onnx")
            variants.append(("_int8", tmp / "no_past_int8.onnx", tmp / "with_past_int8.onnx"))
        for suffix, no_past, with_past in variants:
            merged = _merge_decoders(onnx.load(no_past), onnx.load(with_past))
            onnx.save(merged, graphs / f"decoder_model_merged{suffix}.onnx")

    (out / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (out / "added_tokens.json").write_text(json.dumps(added, ensure_ascii=False), encoding="utf-8")
    (out / "config.json").write_text(
        json.dumps({"model_type": "whisper", "num_mel_bins": N_MELS}), encoding="utf-8"
    )
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m omnivoice_build.whisper_fixture --output DIR``: build the fixture, then check
    that onnx-asr hears its text in noise of several lengths and rates, fp32 and int8."""
    import argparse
    import time

    import onnx_asr

    parser = argparse.ArgumentParser(
        prog="python -m omnivoice_build.whisper_fixture",
        description="A random-weight Whisper (onnx-community layout) that hears one fixed text in any "
        "audio, checked with onnx-asr.",
    )
    parser.add_argument("--output", required=True, help="the folder to write the model into")
    parser.add_argument("--text", default="This is my voice.", help="what it hears")
    parser.add_argument("--size", default="tiny", choices=list(SIZES))
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    path = build_whisper(args.output, args.size, args.text, quantize=True)
    print(f"built the {args.size} Whisper in {path} in {time.perf_counter() - t0:.1f} s")
    rng = np.random.default_rng(0)
    for quantization in (None, "int8"):
        asr = onnx_asr.load_model("whisper", path, quantization=quantization)
        for sr, seconds in ((24_000, 1.0), (16_000, 10.0), (24_000, 3.7)):
            wave = (0.3 * rng.standard_normal(int(sr * seconds))).astype(np.float32)
            for language in ("en", None):
                got = asr.recognize(wave, sample_rate=sr, language=language)
                if got != args.text:
                    print(f"heard {got!r} ({quantization}, {sr} Hz, {seconds} s, {language})")
                    return 1
    print("ok: it hears", repr(args.text))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
