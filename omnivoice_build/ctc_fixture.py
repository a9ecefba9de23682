"""A small random-weight CTC acoustic model in the layout of an aligner folder
(``omnivoice_rt/align/ctc.py``): what a user's exported MMS forced-alignment model looks like to
the runtime, for testing the aligner's mechanics (random weights place words nowhere in
particular). Build side only: it needs torch.

    export_ctc(folder)   # folder/model.onnx ([1, samples] at 16 kHz -> [1, frames, 29] logits),
                         # folder/aligner.json (MMS-FA's labels, blank 0)
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

# MMS-FA's labels (torchaudio's MMS_FA bundle, with its star token): blank first
LABELS = list("-aientousrmklvdghybpwcjzf'qx*")
HOP = 320  # samples a frame at 16 kHz: 20 ms, as wav2vec2's


class TinyCtc(torch.nn.Module):
    def __init__(self, labels: int, seed: int):
        super().__init__()
        torch.manual_seed(seed)
        self.frames = torch.nn.Conv1d(1, 16, 400, stride=HOP, padding=40)
        self.out = torch.nn.Linear(16, labels)

    def forward(self, samples: torch.Tensor) -> torch.Tensor:
        hidden = torch.relu(self.frames(samples[:, None]))  # (1, 16, frames)
        return self.out(hidden.transpose(1, 2))  # (1, frames, labels)


def export_ctc(folder: str | Path, seed: int = 0) -> Path:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model = TinyCtc(len(LABELS), seed).eval()
    with torch.no_grad():
        torch.onnx.export(
            model,
            (torch.zeros(1, 16000),),
            str(folder / "model.onnx"),
            input_names=["waveform"],
            output_names=["logits"],
            dynamic_axes={"waveform": {1: "samples"}, "logits": {1: "frames"}},
            opset_version=17,
            dynamo=False,
        )
    config = {"labels": LABELS, "blank": 0, "sample_rate": 16000}
    (folder / "aligner.json").write_text(json.dumps(config), encoding="utf-8")
    return folder
