"""The two small OmniVoice sub-models around the LLM, as plain PyTorch modules for export.

- ``AudioEmbeddingsEncoder``: upstream's ``OmniVoice._prepare_embed_inputs``. Text positions take
  the text embedding of ``input_ids[:, 0, :]``; audio positions the sum over the codebooks of
  ``audio_embeddings[id + audio_vocab_size * k]``.
- ``AudioHeadsDecoder``: upstream's ``audio_heads`` linear layer, reshaped to (B, C, S, V).

Both are built straight from ``model.safetensors`` so that the export does not load the LLM or
the audio tokenizer. ``load_encoder`` and ``load_heads`` are the loaders that Olive calls.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open
from torch import nn

from omnivoice_rt.artifacts.signatures import published  # the names the runtime feeds and reads

_ENCODER, _HEADS = published("audio_embeddings_encoder"), published("audio_heads_decoder")
ENCODER_INPUTS, ENCODER_OUTPUTS = list(_ENCODER.inputs), list(_ENCODER.outputs)
HEADS_INPUTS, HEADS_OUTPUTS = list(_HEADS.inputs), list(_HEADS.outputs)


def read_config(checkpoint: str | Path) -> dict:
    """The OmniVoice ``config.json`` of ``checkpoint``."""
    return json.loads((Path(checkpoint) / "config.json").read_text())


def _tensors(checkpoint: str | Path, names: list[str]) -> dict[str, torch.Tensor]:
    files = sorted(Path(checkpoint).glob("*.safetensors"))
    found: dict[str, torch.Tensor] = {}
    for file in files:
        with safe_open(str(file), framework="pt") as f:
            for name in names:
                if name in f.keys():
                    found[name] = f.get_tensor(name).float()
    missing = [n for n in names if n not in found]
    if missing:
        raise ValueError(
            f"{checkpoint}: the weights lack {missing}; is it an OmniVoice checkpoint?"
        )
    return found


class AudioEmbeddingsEncoder(nn.Module):
    def __init__(self, text_embeddings: torch.Tensor, audio_embeddings: torch.Tensor, config: dict):
        super().__init__()
        self.text_embeddings = nn.Embedding.from_pretrained(text_embeddings, freeze=True)
        self.audio_embeddings = nn.Embedding.from_pretrained(audio_embeddings, freeze=True)
        offsets = torch.arange(config["num_audio_codebook"]) * config["audio_vocab_size"]
        self.register_buffer("codebook_offsets", offsets.view(1, -1, 1))

    def forward(self, input_ids: torch.Tensor, audio_mask: torch.Tensor) -> torch.Tensor:
        text_embeds = self.text_embeddings(input_ids[:, 0, :])
        shifted_ids = input_ids * audio_mask.unsqueeze(1) + self.codebook_offsets
        audio_embeds = self.audio_embeddings(shifted_ids).sum(dim=1)
        return torch.where(audio_mask.unsqueeze(-1), audio_embeds, text_embeds)


class AudioHeadsDecoder(nn.Module):
    def __init__(self, weight: torch.Tensor, config: dict):
        super().__init__()
        self.num_codebook = config["num_audio_codebook"]
        self.vocab = config["audio_vocab_size"]
        self.heads = nn.Linear(weight.shape[1], weight.shape[0], bias=False)
        with torch.no_grad():
            self.heads.weight.copy_(weight)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = hidden_states.shape
        logits = self.heads(hidden_states)
        return logits.view(batch, seq, self.num_codebook, self.vocab).permute(0, 2, 1, 3)


def load_encoder(checkpoint: str) -> AudioEmbeddingsEncoder:
    names = ["llm.embed_tokens.weight", "audio_embeddings.weight"]
    w = _tensors(checkpoint, names)
    return AudioEmbeddingsEncoder(w[names[0]], w[names[1]], read_config(checkpoint)).eval()


def load_heads(checkpoint: str) -> AudioHeadsDecoder:
    w = _tensors(checkpoint, ["audio_heads.weight"])
    return AudioHeadsDecoder(w["audio_heads.weight"], read_config(checkpoint)).eval()


def encoder_io_config(config: dict) -> dict:
    codebooks = config["num_audio_codebook"]
    return {
        "input_names": ENCODER_INPUTS,
        "input_shapes": [[1, codebooks, 16], [1, 16]],
        "input_types": ["int64", "bool"],
        "output_names": ENCODER_OUTPUTS,
        "dynamic_axes": {
            "input_ids": {"0": "batch_size", "2": "sequence_length"},
            "audio_mask": {"0": "batch_size", "1": "sequence_length"},
            "inputs_embeds": {"0": "batch_size", "1": "sequence_length"},
        },
    }


def heads_io_config(config: dict) -> dict:
    hidden = config["llm_config"]["hidden_size"]
    return {
        "input_names": HEADS_INPUTS,
        "input_shapes": [[1, 16, hidden]],
        "input_types": ["float32"],
        "output_names": HEADS_OUTPUTS,
        "dynamic_axes": {
            "hidden_states": {"0": "batch_size", "1": "sequence_length"},
            "logits": {"0": "batch_size", "2": "sequence_length"},
        },
    }
