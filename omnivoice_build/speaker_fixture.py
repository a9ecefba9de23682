"""resemblyzer's trained speaker encoder as an ONNX graph that takes the 16 kHz waveform.

``export_resemblyzer(path)`` writes ``path`` (input ``wav`` (1, samples) -> ``embedding``
(1, 256), unit length), the speaker model the quality check's tests use on real speech
(``omnivoice_rt.tools.quality.SpeakerEncoder``). What resemblyzer does in numpy is in the graph:
the volume raised to -30 dBFS (never lowered), its 40-band mel power spectrogram (25 ms Hann
windows every 10 ms, librosa's filters), then its LSTM and projection, run over the whole
utterance at once (resemblyzer averages 1.6 s partials; its silence trimming is left out).
Build side only: it needs torch, librosa and resemblyzer (``pip install resemblyzer``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch


class WaveformVoiceEncoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        import librosa
        from resemblyzer import VoiceEncoder, hparams

        encoder = VoiceEncoder("cpu", verbose=False)
        self.lstm, self.linear = encoder.lstm, encoder.linear
        self.target_dbfs = hparams.audio_norm_target_dBFS
        n_fft = int(hparams.sampling_rate * hparams.mel_window_length / 1000)
        self.hop = int(hparams.sampling_rate * hparams.mel_window_step / 1000)
        window = np.hanning(n_fft + 1)[:-1]  # periodic, as librosa's
        k = np.arange(n_fft // 2 + 1)[:, None] * np.arange(n_fft)[None] * 2 * np.pi / n_fft
        dft = np.concatenate([np.cos(k), -np.sin(k)]) * window  # (2 * bins, n_fft)
        self.register_buffer("dft", torch.tensor(dft[:, None], dtype=torch.float32))
        mel = librosa.filters.mel(
            sr=hparams.sampling_rate, n_fft=n_fft, n_mels=hparams.mel_n_channels
        )
        self.register_buffer("mel", torch.tensor(mel, dtype=torch.float32))
        self.pad = n_fft // 2

    def forward(self, wav: torch.Tensor) -> torch.Tensor:
        dbfs = 10 * torch.log10(torch.mean(wav**2) + 1e-12)
        gain = torch.clamp(10 ** ((self.target_dbfs - dbfs) / 20), min=1.0)
        x = torch.nn.functional.pad(wav * gain, (self.pad, self.pad))[:, None]
        spectrum = torch.nn.functional.conv1d(x, self.dft, stride=self.hop)[0]
        half = spectrum.shape[0] // 2
        power = spectrum[:half] ** 2 + spectrum[half:] ** 2  # (bins, frames)
        mels = (self.mel @ power).T[None]  # (1, frames, 40)
        _, (hidden, _) = self.lstm(mels)
        embedding = torch.relu(self.linear(hidden[-1]))
        return embedding / torch.norm(embedding, dim=1, keepdim=True)


def export_resemblyzer(path: str | Path) -> Path:
    path = Path(path)
    model = WaveformVoiceEncoder().eval()
    with torch.no_grad():
        torch.onnx.export(
            model,
            (torch.zeros(1, 16000),),
            str(path),
            input_names=["wav"],
            output_names=["embedding"],
            dynamic_axes={"wav": {1: "samples"}},
            opset_version=17,
            dynamo=False,
        )
    return path
