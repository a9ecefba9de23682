"""The conditional prompt: token ids (C, S) and the audio mask, as upstream's
``OmniVoice._prepare_inference_inputs`` builds them.

    [<|denoise|>] <|lang_start|>{lang|None}<|lang_end|><|instruct_start|>{instruct|None}<|instruct_end|>
    <|text_start|>{ref_text + " " + text}<|text_end|>   (non-verbal tags tokenized on their own)
    reference codes (C, R)                              (voice cloning only)
    target codes (C, T), all mask ids

Text positions carry the same id on every codebook row; audio positions carry codes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from omnivoice_rt.text.chunks import NONVERBAL_PATTERN, combine_text


class TextTokenizer:
    """The artifacts' ``tokenizer.json`` through the ``tokenizers`` library."""

    def __init__(self, path: str | Path):
        from tokenizers import Tokenizer

        self._tokenizer = Tokenizer.from_file(str(path))

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self._tokenizer.encode(text, add_special_tokens=add_special_tokens).ids

    def encode_with_tags(self, text: str) -> list[int]:
        """Tokenize with every non-verbal tag (e.g. ``[laughter]``) on its own, as upstream does."""
        ids: list[int] = []
        last = 0
        for match in NONVERBAL_PATTERN.finditer(text):
            if match.start() > last:
                ids += self.encode(text[last : match.start()], add_special_tokens=False)
            ids += self.encode(match.group(), add_special_tokens=False)
            last = match.end()
        if last < len(text):
            ids += self.encode(text[last:], add_special_tokens=False)
        return ids or self.encode(text)


@dataclass
class Prompt:
    """One item's conditional row. ``ids`` is (C, S); the target is the last ``target_len`` columns."""

    ids: np.ndarray
    audio_mask: np.ndarray  # (S,) bool
    target_len: int

    @property
    def prefix_len(self) -> int:
        return self.ids.shape[1] - self.target_len


def text_ids(
    tokenizer: TextTokenizer,
    text: str,
    *,
    ref_text: str | None = None,
    language: str | None = None,
    instruct: str | None = None,
    denoise: bool = False,
) -> list[int]:
    """The prompt's text positions: style (``denoise`` only applies with a reference), then text."""
    style = "<|denoise|>" if denoise else ""
    style += f"<|lang_start|>{language or 'None'}<|lang_end|>"
    style += f"<|instruct_start|>{instruct or 'None'}<|instruct_end|>"
    return tokenizer.encode(style) + tokenizer.encode_with_tags(
        f"<|text_start|>{combine_text(text, ref_text)}<|text_end|>"
    )


def build_prompt(
    tokenizer: TextTokenizer,
    text: str,
    target_len: int,
    *,
    num_codebooks: int,
    mask_id: int,
    ref_text: str | None = None,
    ref_codes: np.ndarray | None = None,
    language: str | None = None,
    instruct: str | None = None,
    denoise: bool = True,
) -> Prompt:
    ids = text_ids(
        tokenizer,
        text,
        ref_text=ref_text,
        language=language,
        instruct=instruct,
        denoise=denoise and ref_codes is not None,
    )
    parts = [np.tile(np.asarray(ids, dtype=np.int64), (num_codebooks, 1))]
    if ref_codes is not None:
        parts.append(np.asarray(ref_codes, dtype=np.int64))
    parts.append(np.full((num_codebooks, target_len), mask_id, dtype=np.int64))
    ids_array = np.concatenate(parts, axis=1)
    audio_mask = np.zeros(ids_array.shape[1], dtype=bool)
    audio_mask[len(ids) :] = True
    return Prompt(ids=ids_array, audio_mask=audio_mask, target_len=target_len)
