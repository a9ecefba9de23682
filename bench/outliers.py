#!/usr/bin/env python3
"""How much each matrix kernel's rounding of the activations costs, with and without the rare,
huge activations real LLMs carry and random weights lack.

    python bench/outliers.py --artifacts FULL_ARTIFACTS [--precision int4] [--kernels fp32,int8,qgemm-row,qgemm]
        [--gain 50] [--channels 4] [--text "..."]

For each kernel of ``omnivoice_rt.engine.kernels.KERNELS`` and each variant of the LLM, against the
``fp32`` kernel (MatMulNBits' weights, exactly, in fp32) on the same variant:

- ``hidden``: the relative error of the LLM's hidden states after one forward of 2 x 300
  random embeddings, on the ordinary tokens;
- ``prompts``: the same on the prompts of four sentences unlike the calibration's, as a
  generation feeds them halfway (:func:`prompt_error`): the model's own kind of input;
- ``codes``: the share of ``best``'s codes (one short text, the same seed) equal to fp32's.

The integer kernels run twice: as they are, and with the LLM's activations smoothed
(``+smooth``, ``OMNIVOICE_SMOOTH=1``, the default: :mod:`omnivoice_rt.engine.smooth`).

Variants: ``as built`` (the fixture's random weights); ``norms`` (``--channels`` channels of
every RMSNorm weight of the hidden size scaled by ``--gain``: channel outliers in the inputs of q,
k, v, gate and up, on every token); ``products`` (``--channels`` output columns of every up and
value product scaled by ``--gain``: channel outliers in down's and o's inputs); ``token`` (one forward only: the first token's embedding carries two channels 1000x the
rest, a "massive activation" that every layer's norm turns into a few huge inputs of that token).
Random weights say nothing about the released model's outliers: the figures show what each
rounding does when they are there. The rewritten graphs are cached under ``$HF_HOME`` as the
runtime caches them.

Extras: none (the package's own dependencies).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from bench.benchmark import machine  # noqa: E402
from omnivoice_rt.engine.smooth import NORMS, norm_weight, product_width, sites  # noqa: E402

WHERE = ("norms", "products")  # where with_channel_outliers puts them


def with_channel_outliers(
    artifacts: Path,
    precision: str,
    channels: int,
    gain: float,
    folder: Path | None = None,
    where: str = "norms",
) -> Path:
    """A folder (``folder``, else a new temporary one) like ``artifacts`` (links) whose LLM carries
    channel outliers: ``where="norms"``, ``channels`` channels of every RMSNorm weight of the
    hidden size scaled by ``gain`` (q, k, v, gate and up's inputs); ``"products"``, ``channels``
    output columns of every up and value product (down's and o's inputs: where real LLMs' massive
    activations come from)."""
    import onnx

    from omnivoice_rt.artifacts.bidirectional import load_with_weights
    from omnivoice_rt.artifacts.manifest import load_manifest

    if where not in WHERE:
        raise ValueError(f"where={where!r}: use one of {', '.join(WHERE)}")
    folder = Path(folder or tempfile.mkdtemp(prefix="outliers-"))
    folder.mkdir(parents=True, exist_ok=True)
    for item in artifacts.iterdir():
        (folder / item.name).symlink_to(item.resolve())
    relative = load_manifest(artifacts).profile(precision).graphs["llm_decoder"].file
    source = artifacts / relative
    (folder / Path(relative).parts[0]).unlink()
    (folder / Path(relative).parent).mkdir(parents=True)
    for item in source.parent.iterdir():
        if not item.name.startswith("llm_decoder.onnx"):
            (folder / Path(relative).parent / item.name).symlink_to(item.resolve())
    model = load_with_weights(source)
    (norm_outliers if where == "norms" else product_outliers)(model, channels, gain)
    target = folder / relative
    onnx.save_model(model, str(target), save_as_external_data=True, location=target.name + ".data")
    return folder


def norm_outliers(model, channels: int, gain: float) -> None:
    from onnx import numpy_helper

    initializers = {t.name: t for t in model.graph.initializer}
    hidden = model_hidden(model)
    picked = np.random.default_rng(0).choice(hidden, channels, replace=False)
    for node in model.graph.node:
        if node.op_type in NORMS:
            weight = initializers[norm_weight(node)]
            values = numpy_helper.to_array(weight).copy()
            if values.shape != (hidden,):  # the per-head q and k norms
                continue
            values[picked] *= gain
            weight.CopyFrom(numpy_helper.from_array(values, weight.name))


def product_outliers(model, channels: int, gain: float) -> None:
    """``channels`` of the columns each up or value product makes for the next product's input
    (:func:`omnivoice_rt.engine.smooth.sites`) scaled by ``gain``: in its weights' scales
    (MatMulNBits) or its weights (MatMul)."""
    from onnx import numpy_helper

    from omnivoice_rt.engine.qgemm import is_product

    initializers = {t.name: t for t in model.graph.initializer}
    rng = np.random.default_rng(0)
    for site in sites(model, lambda node: is_product(node, initializers)):
        if site.producer is None:
            continue
        picked = rng.choice(np.unique(site.columns), channels, replace=False)
        node = site.producer
        if node.op_type == "MatMulNBits":  # scales (N x blocks): w = (q - zero) * scale
            tensor = initializers[node.input[2]]
            values = numpy_helper.to_array(tensor).copy()
            rows = values.reshape(int(product_width(node, initializers)), -1)
            rows[picked] *= gain
        else:
            tensor = initializers[node.input[1]]
            values = numpy_helper.to_array(tensor).copy()
            values[:, picked] *= gain
        tensor.CopyFrom(numpy_helper.from_array(values, tensor.name))


def model_hidden(model) -> int:
    arg = next(i for i in model.graph.input if i.name == "inputs_embeds")
    return arg.type.tensor_type.shape.dim[-1].dim_value


# Prompts unlike the calibration's (omnivoice_rt.engine.smooth.CALIBRATION): (language, text).
PROMPTS = [
    ("en", "Please remember to water the plants while I am away next week."),
    ("fr", "Bonjour à tous, la réunion commence dans cinq minutes."),
    ("en", "Numbers like forty two and seventeen are read aloud clearly."),
    ("zh", "我们明天早上八点在车站见面。"),
]


def prompt_error(voices: dict, frames: int = 80) -> dict[str, float]:
    """The relative error of the LLM's hidden states on ``PROMPTS``' prompts as a generation
    feeds them halfway (half the target's codes committed at random, the rest masks)."""
    from omnivoice_rt.engine.prompt import TextTokenizer, build_prompt

    exact = voices["fp32"]
    tokenizer = TextTokenizer(exact.root / "tokenizer.json")
    config = exact.config
    rng = np.random.default_rng(5)
    errors = {k: 0.0 for k in voices}
    total = 0.0
    for language, text in PROMPTS:
        prompt = build_prompt(
            tokenizer,
            text,
            frames,
            num_codebooks=config.num_audio_codebook,
            mask_id=config.audio_mask_id,
            language=language,
        )
        target = prompt.ids[:, -frames:]
        committed = rng.random(target.shape) < 0.5
        target[committed] = rng.integers(0, config.audio_mask_id, committed.sum())
        embeds = exact.backbone.embed(prompt.ids, prompt.audio_mask)
        reference = exact.backbone.llm(embeds)[0].astype(np.float64)
        total += float(np.square(reference).sum())
        for k, voice in voices.items():
            errors[k] += float(np.square(voice.backbone.llm(embeds)[0] - reference).sum())
    return {k: float(np.sqrt(e / total)) for k, e in errors.items()}


def hidden_error(voices: dict, massive: bool) -> dict[str, float]:
    rng = np.random.default_rng(0)
    any_voice = next(iter(voices.values()))
    embeds = rng.standard_normal((2, 300, any_voice.config.hidden_size)).astype(np.float32)
    ordinary = np.ones(300, dtype=bool)
    if massive:
        embeds[:, 0, :2] = 1000 * np.abs(embeds[:, 0, :2]).max()
        ordinary[0] = False
    states = {k: v.backbone.llm(embeds.astype(v.backbone.dtype))[0] for k, v in voices.items()}
    exact = states["fp32"][:, ordinary].astype(np.float64)
    return {
        k: float(np.linalg.norm(s[:, ordinary] - exact) / np.linalg.norm(exact))
        for k, s in states.items()
    }


def codes_equal(voices: dict, text: str) -> dict[str, float]:
    codes = {
        k: v.generate(text, seed=0, preset="best", duration=2.0).codes[0] for k, v in voices.items()
    }
    return {k: float((c == codes["fp32"]).mean()) for k, c in codes.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--artifacts", required=True, help="artifacts of the full fixture")
    parser.add_argument("--precision", default="int4")
    parser.add_argument("--kernels", default="fp32,int8,qgemm-row,qgemm")
    parser.add_argument("--channels", type=int, default=4)
    parser.add_argument("--gain", type=float, default=50.0)
    parser.add_argument("--text", default="Good evening, the lights are on.")
    args = parser.parse_args(argv)

    from omnivoice_rt import OmniVoiceONNX
    from omnivoice_rt.engine.kernels import KERNELS

    kernels = args.kernels.split(",")
    if kernels[0] != "fp32":
        kernels.insert(0, "fp32")
    print(f"machine: {machine()}; {args.precision}; errors against the fp32 kernel")
    variants = {
        "as built": Path(args.artifacts),
        **{
            f"{where} x{args.gain:g}": with_channel_outliers(
                Path(args.artifacts), args.precision, args.channels, args.gain, where=where
            )
            for where in WHERE
        },
    }
    labels = [k + s for k in kernels for s in (("", "+smooth") if KERNELS[k].rounding else ("",))]
    print(f"{'variant':16s} {'measure':8s} " + " ".join(f"{k:>16s}" for k in labels))
    for name, folder in variants.items():
        voices = {}
        for kernel in kernels:
            for smooth in ("0", "1") if KERNELS[kernel].rounding else ("0",):
                os.environ["OMNIVOICE_SMOOTH"] = smooth
                label = kernel + "+smooth" * (smooth == "1")
                voices[label] = OmniVoiceONNX.load(folder, args.precision, matmul=kernel)
        rows = {"hidden": hidden_error(voices, massive=False)}
        if name == "as built":
            rows["hidden, token"] = hidden_error(voices, massive=True)
        rows["prompts"] = prompt_error(voices)
        rows["codes"] = codes_equal(voices, args.text)
        for measure, values in rows.items():
            label = "token" if measure.endswith("token") else name
            kind = measure.split(",")[0]
            cells = " ".join(
                f"{values[k]:16.4f}" if kind == "codes" else f"{100 * values[k]:15.2f}%"
                for k in labels
            )
            print(f"{label:16s} {kind:8s} {cells}", flush=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
