"""The Higgs Audio V2 tokenizer (OmniVoice's codec) as four ONNX graphs, in the published contract.

Upstream's ``HiggsAudioV2TokenizerModel.encode`` / ``.decode`` split into the graphs and names of
onnx-community/OmniVoice-Onnx (docs/design.md section 2), so that a folder we build is a drop-in
replacement for the published one:

    acoustic_encoder    waveform_24k (B,1,N)                 -> acoustic_features (B,Ha,T)  DAC encoder
    semantic_encoder    waveform_16k (B,N), resampled from    -> semantic_features (B,Hs,T)  HuBERT with
                        24 kHz by the runtime                                               (160,160) pad, mean
                                                                                            of all hidden states,
                                                                                            every 2nd frame
    quantizer_encoder   acoustic_features, semantic_features  -> codes (8,B,T) int64         fc + RVQ
    higgs_decoder       codes (8,B,T)                         -> waveform_24k (B,1,N)        RVQ decode, fc2, DAC

N must be a multiple of the hop (960 samples); the runtime trims references to it, as upstream
does, and resamples to 16 kHz with torchaudio's kernel in numpy, so the codes equal upstream's.
``quantizer_encoder`` stays fp32 in every precision: its argmin over codebook distances is where
half precision would flip codes.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F
import torchaudio
from torch import nn

from omnivoice_rt.artifacts.signatures import CODEC_ROLES, published

logger = logging.getLogger(__name__)

# Each graph's (inputs, outputs): the published names, which the runtime binds by.
GRAPHS = {
    name: (list(published(name).inputs), list(published(name).outputs)) for name in CODEC_ROLES
}
# The dynamic axes of each graph's inputs then outputs, in the order of GRAPHS.
_AXES = {
    "acoustic_encoder": [{0: "batch_size", 2: "samples"}, {0: "batch_size", 2: "frames"}],
    "semantic_encoder": [{0: "batch_size", 1: "samples"}, {0: "batch_size", 2: "frames"}],
    "quantizer_encoder": [
        {0: "batch_size", 2: "frames"},
        {0: "batch_size", 2: "frames"},
        {1: "batch_size", 2: "frames"},
    ],
    "higgs_decoder": [{1: "batch_size", 2: "frames"}, {0: "batch_size", 2: "samples"}],
}
FP32_ONLY = {"quantizer_encoder"}


class AcousticEncoder(nn.Module):
    def __init__(self, higgs):
        super().__init__()
        self.encoder = higgs.acoustic_encoder

    def forward(self, waveform):
        return self.encoder(waveform)


class SemanticEncoder(nn.Module):
    def __init__(self, higgs):
        super().__init__()
        self.higgs = higgs

    def forward(self, waveform_16k):
        # HiggsAudioV2TokenizerModel._extract_semantic_features after its resampling, then encoder_semantic.
        higgs = self.higgs
        audio = F.pad(waveform_16k, (160, 160))
        hidden = higgs.semantic_model(audio, output_hidden_states=True).hidden_states
        features = torch.stack(hidden, dim=1).mean(dim=1)
        step = higgs.config.semantic_downsample_factor
        if step > 1:
            features = features[:, ::step, :]
        return higgs.encoder_semantic(features.transpose(1, 2))


class QuantizerEncoder(nn.Module):
    def __init__(self, higgs):
        super().__init__()
        self.higgs = higgs

    def forward(self, acoustic_features, semantic_features):
        embeddings = torch.cat([acoustic_features, semantic_features], dim=1)
        embeddings = self.higgs.fc(embeddings.transpose(1, 2)).transpose(1, 2)
        # (8, B, T)
        return self.higgs.quantizer.encode(embeddings, self.higgs.config.target_bandwidths[-1])


class HiggsDecoder(nn.Module):
    def __init__(self, higgs):
        super().__init__()
        self.higgs = higgs

    def forward(self, codes):
        return self.higgs.decode(codes.transpose(0, 1), return_dict=False)


MODULES = {
    "acoustic_encoder": AcousticEncoder,
    "semantic_encoder": SemanticEncoder,
    "quantizer_encoder": QuantizerEncoder,
    "higgs_decoder": HiggsDecoder,
}


def load_higgs(audio_tokenizer_dir: str | Path):
    from transformers import HiggsAudioV2TokenizerModel

    model = HiggsAudioV2TokenizerModel.from_pretrained(str(audio_tokenizer_dir)).eval()
    model.remove_weight_norm()  # plain weights export faster and run faster
    return model


def _dummy_inputs(higgs, name: str) -> tuple:
    frames = 10
    wav = torch.randn(1, 1, frames * higgs.config.hop_length) * 0.1
    wav_16k = torchaudio.functional.resample(
        wav[:, 0], higgs.config.sample_rate, higgs.config.semantic_sample_rate
    )
    if name == "acoustic_encoder":
        return (wav,)
    if name == "semantic_encoder":
        return (wav_16k,)
    with torch.no_grad():
        acoustic = higgs.acoustic_encoder(wav)
        semantic = MODULES["semantic_encoder"](higgs)(wav_16k)
    if name == "quantizer_encoder":
        return (acoustic, semantic)
    return (MODULES["quantizer_encoder"](higgs)(acoustic, semantic),)


def _dynamic_axes(name: str) -> dict:
    inputs, outputs = GRAPHS[name]
    return dict(zip(inputs + outputs, _AXES[name], strict=True))


def export_graph(higgs, name: str, path: Path) -> None:
    """Export one of the four graphs to ``path`` (fp32, opset 17)."""
    module = MODULES[name](higgs).eval()
    inputs, outputs = GRAPHS[name]
    # The tracer warns about Python branches on shapes; the traced graphs are checked against
    # upstream on lengths other than the dummy's (tests/build/test_higgs.py).
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            _dummy_inputs(higgs, name),
            str(path),
            input_names=inputs,
            output_names=outputs,
            dynamic_axes=_dynamic_axes(name),
            opset_version=17,
            dynamo=False,
        )


def to_fp16(path: Path) -> None:
    """Convert a graph's weights and math to fp16 in place, keeping fp32 inputs and outputs."""
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    model = onnx.load(str(path))
    model = convert_float_to_float16(model, keep_io_types=True, disable_shape_infer=True)
    onnx.save(model, str(path))


def export_higgs(audio_tokenizer_dir: str | Path, out_dir: Path, precision: str = "fp16") -> None:
    """Write the four graphs into ``out_dir`` in ``precision`` (fp16 or fp32)."""
    if precision not in ("fp16", "fp32"):
        raise ValueError(f"unknown Higgs precision {precision!r}; use fp16 or fp32")
    higgs = load_higgs(audio_tokenizer_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in GRAPHS:
        path = out_dir / f"{name}.onnx"
        logger.info(
            "higgs: exporting %s (%s)", name, precision if name not in FP32_ONLY else "fp32"
        )
        export_graph(higgs, name, path)
        if precision == "fp16" and name not in FP32_ONLY:
            to_fp16(path)
