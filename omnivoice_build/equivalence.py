"""Our runtime against upstream ``OmniVoice.generate`` on the same checkpoint (build requirements).

With ``position_temperature=0`` and ``class_temperature=0`` generation is deterministic, so the
codes from fp32 artifacts must equal upstream's exactly; the waveforms then differ only by the
codec's float rounding. Used by the tests and by ``python -m omnivoice_rt eval --mode equiv``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

GREEDY = {"position_temperature": 0.0, "class_temperature": 0.0}

# (name, generate keyword arguments); ``ref_audio`` is filled in by the caller.
LONG_TEXT = " ".join(
    f"This is sentence number {i} of a rather long text, which keeps going on and on."
    for i in range(12)
)
CASES = [
    ("auto voice", {"text": "Hello world, this is a test."}),
    (
        "voice design en",
        {"text": "Hello world, this is a test.", "instruct": "female, low pitch, british accent"},
    ),
    (
        "voice design zh",
        {"text": "你好，世界。今天天气很好。", "instruct": "男，河南话", "language": "zh"},
    ),
    ("language code", {"text": "Guten Tag, wie geht es?", "language": "de"}),
    ("language name", {"text": "Hello there.", "language": "English"}),
    ("duration", {"text": "Hello there.", "duration": 2.0}),
    ("speed", {"text": "Hello there my friend.", "speed": 1.5}),
    ("non-verbal tag", {"text": "Hello [laughter] there."}),
    ("voice clone", {"text": "Hello world, this is a test.", "ref_text": "This is my voice."}),
    ("chunked", {"text": LONG_TEXT}),
    # upstream's normalize_text: English and Chinese by WeTextProcessing, German by num2words;
    # the target text only (the reference's transcript stays as written)
    (
        "normalized en",
        {"text": "I paid $12.50 for 3 apples on Jan. 5, 2024.", "normalize_text": True},
    ),
    (
        "normalized zh",
        {"text": "我花了12.5元，2024年1月5日。", "language": "zh", "normalize_text": True},
    ),
    ("normalized de", {"text": "Ich habe 25 Äpfel.", "language": "de", "normalize_text": True}),
    (
        "normalized clone",
        {"text": "See you at 5 pm.", "ref_text": "I was born in 1990.", "normalize_text": True},
    ),
]


@dataclass
class Comparison:
    name: str
    codes_equal: bool
    chunks: int
    frames: int
    max_abs_diff: float  # of the final waveforms; inf when their lengths differ
    upstream_peak: float
    codes: list = None  # the runtime's (C, T) codes of each chunk

    def __str__(self) -> str:
        verdict = "equal" if self.codes_equal else "DIFFER"
        return (
            f"{self.name:18s} codes {verdict:6s} chunks {self.chunks} frames {self.frames:5d} "
            f"waveform max|diff| {self.max_abs_diff:.2e} (peak {self.upstream_peak:.2f})"
        )


def upstream_codes(model, greedy: bool = True, **kwargs) -> tuple[list[np.ndarray], np.ndarray]:
    """Upstream's waveform and the codes of every ``_generate_iterative`` call it made; greedy
    (both temperatures 0) unless ``greedy`` is False."""
    captured: list[np.ndarray] = []
    original = model._generate_iterative

    def spy(task, config):
        result = original(task, config)
        captured.extend(codes.cpu().numpy() for codes in result)
        return result

    model._generate_iterative = spy
    try:
        waveform = model.generate(**(GREEDY if greedy else {}), **kwargs)[0]
    finally:
        model._generate_iterative = original
    return captured, waveform


def compare(name: str, upstream_model, runtime, **kwargs) -> Comparison:
    expected_codes, expected = upstream_codes(upstream_model, **kwargs)
    speech = runtime.generate(**GREEDY, **kwargs)
    equal = len(expected_codes) == len(speech.codes) and all(
        np.array_equal(a, b) for a, b in zip(expected_codes, speech.codes, strict=True)
    )
    diff = (
        float(np.abs(expected - speech.waveform).max())
        if expected.shape == speech.waveform.shape
        else float("inf")
    )
    frames = sum(c.shape[1] for c in speech.codes)
    return Comparison(
        name, equal, len(speech.codes), frames, diff, float(np.abs(expected).max()), speech.codes
    )


def run_all(
    checkpoint: str, artifacts: str, ref_audio: str, precision: str = "fp32"
) -> list[Comparison]:
    from omnivoice.models.omnivoice import OmniVoice

    from omnivoice_rt.model import OmniVoiceONNX

    upstream_model = OmniVoice.from_pretrained(checkpoint).eval()
    runtime = OmniVoiceONNX.load(artifacts, precision)
    results = []
    for name, kwargs in CASES:
        if "ref_text" in kwargs:
            kwargs = {**kwargs, "ref_audio": ref_audio}
        results.append(compare(name, upstream_model, runtime, **kwargs))
    return results


def speechlike(seconds: float, rate: int, seed: int = 0) -> np.ndarray:
    """A test signal that survives silence removal: harmonics of a wobbling pitch, a slow
    loudness swell, a little noise, and 0.3 s of leading silence. (T,) float32."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(rate * seconds)) / rate
    pitch = 140 + 30 * np.sin(2 * np.pi * 3 * t)
    phase = 2 * np.pi * np.cumsum(pitch) / rate
    wave = (
        sum(np.sin(k * phase) / k for k in range(1, 6))
        * 0.2
        * (0.6 + 0.4 * np.sin(2 * np.pi * 1.5 * t))
    )
    wave = wave + 0.005 * rng.standard_normal(t.size)
    wave[: int(0.3 * rate)] = 0
    return wave.astype(np.float32)


def write_reference(path: str, seconds: float = 3.0, rate: int = 16000, channels: int = 2) -> str:
    """Write :func:`speechlike` as a wav file (16 kHz stereo by default, as the tests use)."""
    import soundfile as sf

    mono = speechlike(seconds, rate)
    sf.write(path, np.stack([mono * (1 - 0.2 * c) for c in range(channels)], axis=1), rate)
    return path


def next_step_agreement(voice, reference, texts: list[str], seed: int = 1) -> list[float]:
    """How often ``voice`` predicts the code ``reference`` predicts, one step at a time.

    Greedy generations of two precisions part ways after a few steps (each choice changes the
    context of the next), so whole-generation agreement measures divergence, not precision. Here
    both models see the same states, taken from ``reference``'s own generation with a quarter to
    all of the codes masked again, and their guided argmax at the masked positions is compared.
    One share per state."""
    from omnivoice_rt.engine.prompt import build_prompt
    from omnivoice_rt.engine.unmask import predict
    from omnivoice_rt.request import GenerationSettings

    settings, rng = GenerationSettings(), np.random.default_rng(seed)

    def predictions(model, text, tokens):
        prompt = build_prompt(
            model.tokenizer,
            text,
            tokens.shape[1],
            num_codebooks=model.num_codebooks,
            mask_id=model.mask_id,
        )
        cond, uncond = model.forward_for(prompt, settings)(tokens)
        return predict(cond, uncond, settings, model.mask_id, rng)[0]

    shares = []
    for text in texts:
        final = reference.generate(text, **GREEDY).codes[0]
        for fraction in (1.0, 0.75, 0.5, 0.25):
            masked = rng.random(final.shape) < fraction
            tokens = np.where(masked, reference.mask_id, final)
            same = predictions(voice, text, tokens) == predictions(reference, text, tokens)
            shares.append(float(same[masked].mean()))
    return shares


def main(argv=None) -> int:
    """``python -m omnivoice_build.equivalence --model-dir FP32_ARTIFACTS --checkpoint CHECKPOINT``:
    every case of ``CASES`` through upstream and the runtime; exit 0 when all codes are equal."""
    import argparse
    import os
    import tempfile

    parser = argparse.ArgumentParser(
        prog="python -m omnivoice_build.equivalence", description=main.__doc__
    )
    parser.add_argument("--model-dir", required=True, help="artifacts built from --checkpoint")
    parser.add_argument("--checkpoint", required=True, help="the OmniVoice PyTorch checkpoint")
    parser.add_argument("--precision", default="fp32")
    parser.add_argument(
        "--ref-audio", help="reference for the voice-clone case (default: a test signal)"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        reference = args.ref_audio or write_reference(os.path.join(tmp, "reference.wav"))
        results = run_all(args.checkpoint, args.model_dir, reference, args.precision)
    for result in results:
        print(result)
    equal = sum(r.codes_equal for r in results)
    print(f"{equal} of {len(results)} cases give upstream's codes")
    return 0 if equal == len(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
