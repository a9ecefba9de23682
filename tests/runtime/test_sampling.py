"""The sampling path against upstream: the default generation (position noise at temperature 5,
and class sampling at 0.8) with the same random draws on both sides.

Upstream draws its Gumbel noise with ``torch.rand_like``, one tensor per use, in the order the loop
uses it (class noise, then position noise, each step); our loop draws the same shapes in the same
order from ``numpy.random.default_rng(seed)``. Replacing upstream's draws with that generator's
makes the two loops see identical noise, so their codes must be equal, as greedy codes are.
"""

from __future__ import annotations

import numpy as np
import pytest

from omnivoice_build.equivalence import upstream_codes

torch = pytest.importorskip("torch", reason="the oracle is upstream's PyTorch model")

CASES = [
    ("default temperatures", {"text": "Hello world, this is a test."}, {}),
    (
        "class sampling",
        {"text": "The quick brown fox jumps over the lazy dog."},
        {"class_temperature": 0.8},
    ),
    (
        "voice design",
        {"text": "Hello there.", "instruct": "female, low pitch"},
        {"position_temperature": 2.0},
    ),
]


def upstream_sampled(model, seed: int, monkeypatch, **kwargs) -> list[np.ndarray]:
    """Upstream's codes with every ``torch.rand_like`` draw taken from numpy's generator."""
    rng = np.random.default_rng(seed)
    monkeypatch.setattr(
        torch, "rand_like", lambda t: torch.from_numpy(rng.random(tuple(t.shape), dtype=np.float32))
    )
    return upstream_codes(model, greedy=False, **kwargs)[0]


@pytest.mark.parametrize("name,kwargs,temperatures", CASES, ids=[c[0] for c in CASES])
def test_sampled_codes_equal_upstream_with_the_same_draws(
    name, kwargs, temperatures, upstream, fp32_voice, monkeypatch
):
    expected = upstream_sampled(upstream, 11, monkeypatch, **kwargs, **temperatures)
    codes = fp32_voice.generate(**kwargs, **temperatures, seed=11).codes
    assert len(codes) == len(expected) == 1
    np.testing.assert_array_equal(codes[0], expected[0])
    greedy = fp32_voice.generate(**kwargs, position_temperature=0.0, class_temperature=0.0).codes[0]
    assert not np.array_equal(codes[0], greedy)  # the noise did change the result
