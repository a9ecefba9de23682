"""The iterative unmasking loop: upstream's ``_generate_iterative`` for one item, in numpy.

All target codes start as the mask id. Each of ``num_step`` steps runs the model once on the
conditional row (whole prompt) and the unconditional row (target only), mixes the two with
classifier-free guidance, and commits the most confident of the still-masked positions; the
number committed per step follows a shifted time schedule.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

# forward(tokens (C, T)) -> (cond_logits, uncond_logits), each (C, T, V) float32; uncond is None
# when guidance is off
Forward = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class UnmaskSettings:
    num_step: int = 32
    guidance_scale: float = 2.0
    t_shift: float = 0.1
    layer_penalty_factor: float = 5.0
    position_temperature: float = 5.0
    class_temperature: float = 0.0


def time_steps(num_step: int, t_shift: float) -> list[float]:
    """``t_shift * t / (1 + (t_shift - 1) * t)`` over ``linspace(0, 1, num_step + 1)``, in float32
    bit for bit as torch computes it, so that the step counts equal upstream's. torch's linspace
    counts up from 0 for the first half and down from 1 for the second, each value one fused
    multiply-add (exact in float64, then rounded once to float32)."""
    n = num_step + 1
    step = np.float64(np.float32(1.0) / np.float32(num_step))
    i = np.arange(n, dtype=np.float64)
    t = np.where(i < n // 2, step * i, 1.0 - step * (n - 1 - i)).astype(np.float32)
    shifted = np.float32(t_shift) * t / (np.float32(1) + np.float32(t_shift - 1) * t)
    return shifted.astype(np.float32).tolist()


def schedule(total: int, num_step: int, t_shift: float) -> list[int]:
    """How many of ``total`` masked codes each step commits; the last step commits the rest."""
    t = time_steps(num_step, t_shift)
    counts, remaining = [], total
    for step in range(num_step):
        n = (
            remaining
            if step == num_step - 1
            else min(math.ceil(total * (t[step + 1] - t[step])), remaining)
        )
        counts.append(int(n))
        remaining -= int(n)
    return counts


def log_softmax(x: np.ndarray) -> np.ndarray:
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def gumbel(logits: np.ndarray, temperature: float, rng: np.random.Generator) -> np.ndarray:
    """Logits over temperature plus Gumbel noise: an argmax of this is a sample."""
    u = rng.random(logits.shape, dtype=np.float32)
    return logits / temperature - np.log(-np.log(u + 1e-10) + 1e-10)


def predict(
    cond: np.ndarray, uncond: np.ndarray, s: UnmaskSettings, mask_id: int, rng: np.random.Generator
):
    """Guided log-probabilities -> (predicted code, confidence) per position, mask id excluded."""
    if s.guidance_scale != 0:
        c, u = log_softmax(cond), log_softmax(uncond)
        log_probs = log_softmax(c + s.guidance_scale * (c - u))
    else:
        log_probs = log_softmax(cond)
    log_probs[..., mask_id] = -np.inf
    if s.class_temperature > 0:
        k = math.ceil(0.1 * log_probs.shape[-1])  # sample among the top 10% of codes
        kth = np.partition(log_probs, -k, axis=-1)[..., -k : -k + 1]
        filtered = np.where(log_probs >= kth, log_probs, -np.inf)
        tokens = gumbel(filtered, s.class_temperature, rng).argmax(axis=-1)
    else:
        tokens = log_probs.argmax(axis=-1)
    return tokens, log_probs.max(axis=-1)


def unmask(
    forward: Forward,
    num_codebooks: int,
    target_len: int,
    mask_id: int,
    settings: UnmaskSettings,
    rng: np.random.Generator,
    on_step: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """Generate (C, T) codes. ``on_step(step, num_step)`` is called after each step."""
    tokens = np.full((num_codebooks, target_len), mask_id, dtype=np.int64)
    layer_penalty = (
        settings.layer_penalty_factor * np.arange(num_codebooks, dtype=np.float32)[:, None]
    )
    counts = schedule(num_codebooks * target_len, settings.num_step, settings.t_shift)
    for step, k in enumerate(counts):
        if k > 0:
            # 1. Both rows through the model, with the codes committed so far.
            cond, uncond = forward(tokens)
            # 2. Guided prediction and its confidence at every position.
            predicted, confidence = predict(cond, uncond, settings, mask_id, rng)
            # 3. Prefer earlier codebooks; add position noise; never revisit committed codes.
            scores = confidence - layer_penalty
            if settings.position_temperature > 0:
                scores = gumbel(scores, settings.position_temperature, rng)
            scores[tokens != mask_id] = -np.inf
            # 4. Commit the k best positions.
            chosen = np.argsort(-scores, axis=None, kind="stable")[:k]
            tokens.flat[chosen] = predicted.flat[chosen]
        if on_step is not None:
            on_step(step + 1, settings.num_step)
    return tokens
