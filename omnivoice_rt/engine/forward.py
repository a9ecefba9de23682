"""The backbone's three graphs as the unmasking loop calls them: target codes -> logits.

    backbone = Backbone(graphs, head_dim=128)
    forward = GuidedForward(backbone, prompt, settings, timings)   # one piece of one request
    cond, uncond = forward(tokens)                                   # once per unmasking step

Each call runs the conditional row (the whole prompt and the target) and, for guidance, the
unconditional row (the target alone). Three settings forward fewer tokens (``docs/design.md``
section 1), all off in ``best``:

- ``prompt_cache_refresh`` r: calls 0, r, 2r... run the whole conditional row and keep its prompt
  positions' keys and values; the calls between run the target alone after them (attention both
  ways, positions continuing after the prompt), so the prompt's keys and values lag the target
  by up to r - 1 steps. Run on the same codes, the cached target equals the full forward
  (``tests/runtime/test_speed.py``).
- ``frame_cache_refresh`` r (experimental; it replaces the prompt cache): every r-th run of a row
  is a full forward that keeps the keys and values of every position and the target's hidden
  states (:class:`FrameCache`); the runs between forward only the target frames whose codes
  changed since they last ran, at their own positions, against the kept keys and values of all
  the others, and reuse the others' hidden states (the dKV-Cache / dLLM-Cache idea for masked
  diffusion LMs), and their logits: the heads run per frame, so only frames whose hidden states
  changed go through them. Early steps commit few codes, so they forward a few frames, not all.
  Needs an LLM that takes ``position_ids`` (ours do); without one it runs every row in full.
- ``cache_refresh_share`` s (with either cache): a row also runs in full as soon as a share s of
  all codes has changed since its last full run, so refreshes follow the commits (few early, many
  late) rather than the step count.
- ``frame_refresh_prompt`` False (experimental, with the frame cache): the conditional row's
  first run is the whole row; its later refreshes run the target alone after the prompt's keys
  and values from that first run, as the prompt cache keeps them (a cloning row is ~60% prompt:
  the reference and the texts). Run on the same codes, such a refresh equals the full forward.
- ``guidance_every`` k: the unconditional logits are computed every k-th call and reused
  between; at guidance 0 the unconditional row never runs.

In every preset, exactly: the unconditional row's first run, every code a mask, is one embedding
repeated, so it runs one position (:meth:`Backbone.uniform`).

The seconds spent in each graph go to the ``timings`` dict the caller passes (one per request).
"""

from __future__ import annotations

import logging
import time
from functools import cached_property

import numpy as np

from omnivoice_rt.artifacts.bidirectional import (
    llm_feeds,
    present_names,
    rotary_tables,
    rotate_keys,
)
from omnivoice_rt.engine.prompt import Prompt
from omnivoice_rt.request import GenerationSettings

logger = logging.getLogger(__name__)


class Backbone:
    """The encoder, the LLM and the heads of one loaded precision."""

    def __init__(self, graphs: dict, head_dim: int):
        self.graphs, self.head_dim = graphs, head_dim
        llm_input = graphs["llm_decoder"].input("inputs_embeds")
        self.dtype = np.float16 if llm_input.dtype == "float16" else np.float32
        # The LLM's present key/value outputs, for the prompt K/V cache (empty: no cache).
        self.presents = present_names(graphs["llm_decoder"].session) or {}
        # Whether the LLM runs positions given to it (the frame cache needs that).
        self.takes_positions = bool(self.presents) and any(
            i.name == "position_ids" for i in graphs["llm_decoder"].session.get_inputs()
        )

    def run(self, name: str, feeds: dict, timings: dict | None, outputs=None) -> list[np.ndarray]:
        started = time.perf_counter()
        result = self.graphs[name].run(outputs, feeds)
        if timings is not None:
            timings[name] = timings.get(name, 0.0) + time.perf_counter() - started
        return result

    def embed(self, ids: np.ndarray, audio_mask: np.ndarray, timings: dict | None = None):
        feeds = {"input_ids": ids[None], "audio_mask": audio_mask[None]}
        return self.run("audio_embeddings_encoder", feeds, timings)[0].astype(self.dtype)

    def llm(
        self,
        embeds: np.ndarray,
        past: dict | None = None,
        keep: int = 0,
        timings=None,
        positions: np.ndarray | None = None,
    ) -> tuple[np.ndarray, dict]:
        """Hidden states for ``embeds`` after the ``past`` keys and values (None: none), at
        ``positions`` (None: after the past ones), and the keys and values of the first ``keep``
        positions (past and new), by past input name, for later calls. A row without a past
        whose positions all hold one embedding runs one position (:meth:`uniform`)."""
        whole_row = past is None and positions is None and embeds.shape[:2] != (1, 1)
        if whole_row and (embeds == embeds[:, :1]).all() and (not keep or self.rotary):
            return self.uniform(embeds, keep, timings)
        session = self.graphs["llm_decoder"].session
        feeds = llm_feeds(session, embeds, None, self.head_dim, past, positions)
        presents = self.presents if keep else {}
        result = self.run("llm_decoder", feeds, timings, ["hidden_states", *presents.values()])
        kept = {
            name: np.ascontiguousarray(value[:, :, :keep])
            for name, value in zip(presents, result[1:], strict=True)
        }
        return result[0], kept

    def uniform(self, embeds: np.ndarray, keep: int, timings) -> tuple[np.ndarray, dict]:
        """:meth:`llm` for a row whose positions all hold the same embedding (the unconditional
        row's first run: every code a mask), from its first position alone. Such a row's
        attention averages equal values, so every position's hidden state and value are the
        first position's, and its key is the first one's rotated to its own position (position
        0 is not rotated): the whole row's numbers up to float rounding (tests/runtime/test_speed.py)."""
        hidden, first = self.llm(embeds[:, :1], keep=1 if keep else 0, timings=timings)
        count = embeds.shape[1]
        kept = {
            name: rotate_keys(kv, *self.rotary, keep)
            if name.endswith(".key")
            else np.repeat(kv, keep, axis=2)
            for name, kv in first.items()
        }
        return np.repeat(hidden, count, axis=1), kept

    @cached_property
    def rotary(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The LLM's rotary tables, read when first needed; None when its keys are rotated
        otherwise (then :meth:`uniform` runs only rows whose keys are not kept)."""
        tables = rotary_tables(self.graphs["llm_decoder"].path)
        if tables is None or not all(name.endswith((".key", ".value")) for name in self.presents):
            logger.info("unknown rotary embedding: uniform rows with kept keys run in full")
            return None
        return tables

    def heads(self, hidden: np.ndarray, timings: dict | None = None) -> np.ndarray:
        feeds = {"hidden_states": hidden.astype(np.float32)}
        return self.run("audio_heads_decoder", feeds, timings)[0]


class FrameCache:
    """One row's keys and values at every position and its target's hidden states, as of the
    codes each frame last ran with; ``offset`` target frames start after the row's prompt."""

    def __init__(self, backbone: Backbone, offset: int, timings: dict, prompt_too: bool = True):
        self.backbone, self.offset, self.timings = backbone, offset, timings
        self.prompt_too = prompt_too  # whether a refresh after the first runs the prompt again
        self.kv: dict[str, np.ndarray] = {}
        self.hidden = self.seen = None

    def full(self, row: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """Run the whole row (its prompt and target embeddings) and keep everything."""
        hidden, self.kv = self.backbone.llm(row, keep=row.shape[1], timings=self.timings)
        self.hidden, self.seen = hidden[:, self.offset :].copy(), tokens.copy()
        return self.hidden

    def target_only(self, target: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """Run every target frame after the kept keys and values of the prompt; keep the
        target's new keys, values and hidden states."""
        past = {name: np.ascontiguousarray(kv[:, :, : self.offset]) for name, kv in self.kv.items()}
        positions = self.offset + np.arange(target.shape[1])
        self.hidden, self.kv = self.backbone.llm(
            target,
            past,
            keep=self.offset + target.shape[1],
            timings=self.timings,
            positions=positions,
        )
        self.seen = tokens.copy()
        return self.hidden

    def partial(self, target: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """Run only the frames whose codes changed, at their positions, against the kept keys and
        values of every other position; keep their new keys, values and hidden states."""
        changed = np.flatnonzero((tokens != self.seen).any(axis=0))
        if changed.size:
            at = self.offset + changed
            others = np.ones(next(iter(self.kv.values())).shape[2], dtype=bool)
            others[at] = False
            # np.take: kv[:, :, others] would lay the result out position-major, which ONNX
            # Runtime copies slowly (a 10-frame call took 85 ms against 47; docs/performance.md)
            kept = np.flatnonzero(others)
            past = {name: np.take(kv, kept, axis=2) for name, kv in self.kv.items()}
            hidden, new = self.backbone.llm(
                target[:, changed],
                past,
                keep=kept.size + changed.size,
                timings=self.timings,
                positions=at,
            )
            for name, kv in new.items():
                self.kv[name][:, :, at] = kv[:, :, -changed.size :]
            self.hidden[:, changed] = hidden
            self.seen[:, changed] = tokens[:, changed]
        return self.hidden

    def __call__(self, full: bool, row, target: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """In full when told so (``row()`` makes the whole row; after the first run, without
        ``prompt_too``, the target alone after the prompt), else partial."""
        if not full:
            return self.partial(target, tokens)
        if self.kv and self.offset and not self.prompt_too:
            return self.target_only(target, tokens)
        return self.full(row(), tokens)


class Refresh:
    """When a cached row runs in full: its first run; then once ``every`` runs have passed since
    the last full one; and, with ``share`` > 0, as soon as that share of all codes has changed
    since then (early steps commit few codes, late ones many: a refresh follows the commits)."""

    def __init__(self, every: int, share: float = 0.0):
        self.every, self.share = every, share
        self.since = 0
        self.base: np.ndarray | None = None  # the codes at the last full run

    def __call__(self, tokens: np.ndarray) -> bool:
        due = (
            self.base is None
            or self.since >= self.every
            or (self.share > 0 and (tokens != self.base).mean() >= self.share)
        )
        if due:
            self.since, self.base = 0, tokens.copy()
        self.since += 1
        return due


class GuidedForward:
    """The model for one piece: target codes -> (conditional, unconditional or None) logits,
    with the prompt cache, frame cache and guidance reuse that ``settings`` ask for."""

    def __init__(self, backbone: Backbone, prompt: Prompt, settings: GenerationSettings, timings):
        self.backbone, self.prompt, self.settings, self.timings = (
            backbone,
            prompt,
            settings,
            timings,
        )
        self.prefix = backbone.embed(
            prompt.ids[:, : prompt.prefix_len], prompt.audio_mask[: prompt.prefix_len], timings
        )
        self.target_mask = np.ones(prompt.target_len, dtype=bool)
        self.frames = settings.frame_cache_refresh if backbone.takes_positions else 0
        if settings.frame_cache_refresh and not self.frames:
            logger.info("this LLM takes no position_ids: the frame cache is off, rows run in full")
        refresh = self.frames or (settings.prompt_cache_refresh if backbone.presents else 0)
        # when each cached row runs in full (the conditional row, the unconditional one)
        self.due = [Refresh(refresh, settings.cache_refresh_share) for _ in range(2)]
        self.refresh = refresh and not self.frames  # the prompt cache is on
        self.calls = 0
        self.cache: dict | None = None  # the prompt's keys and values, from the last full row
        self.rows = [
            FrameCache(backbone, prompt.prefix_len, timings, settings.frame_refresh_prompt),
            FrameCache(backbone, 0, timings),
        ]
        self.uncond: np.ndarray | None = None  # the last unconditional logits
        # with the frame cache, per row: the hidden states its logits were last computed from
        self.logits: list[tuple[np.ndarray, np.ndarray] | None] = [None, None]

    def row_logits(self, index: int, hidden: np.ndarray) -> np.ndarray:
        """Row ``index``'s logits (C, T, V) for its hidden states (1, T, D): the heads run on the
        frames whose hidden states changed since the row's last logits (all, the first time)."""
        if self.logits[index] is None:
            logits = self.backbone.heads(hidden, self.timings)
        else:
            seen, logits = self.logits[index]
            changed = np.flatnonzero((hidden[0] != seen[0]).any(axis=-1))
            if changed.size:
                logits[:, :, changed] = self.backbone.heads(hidden[:, changed], self.timings)
        self.logits[index] = (hidden.copy(), logits)
        return logits[0]

    def __call__(self, tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        backbone, prompt, timings = self.backbone, self.prompt, self.timings
        call, self.calls = self.calls, self.calls + 1
        target = backbone.embed(
            tokens, self.target_mask, timings
        )  # the uncond row: the target alone
        guided = self.settings.guidance_scale != 0 and call % self.settings.guidance_every == 0
        if self.frames:
            whole = lambda: np.concatenate([self.prefix, target], axis=1)  # noqa: E731
            cond = self.row_logits(0, self.rows[0](self.due[0](tokens), whole, target, tokens))
            if guided:
                hidden = self.rows[1](self.due[1](tokens), lambda: target, target, tokens)
                self.uncond = self.row_logits(1, hidden)
            return cond, self.uncond
        if self.refresh and not self.due[0](tokens):
            cond, _ = backbone.llm(target, past=self.cache, timings=timings)
        else:
            whole = np.concatenate([self.prefix, target], axis=1)
            keep = prompt.prefix_len if self.refresh else 0
            cond, self.cache = backbone.llm(whole, keep=keep, timings=timings)
            cond = cond[:, -prompt.target_len :]
        rows = [cond]
        if guided:
            rows.append(backbone.llm(target, timings=timings)[0])
        logits = backbone.heads(np.concatenate(rows, axis=0), timings)
        if len(rows) == 2:
            self.uncond = logits[1]
        return logits[0], self.uncond
