"""The graph signatures we know, and binding a graph to its role by its input and output names.

An artifact folder has seven graphs, each with a role (docs/design.md section 2). Two contracts name
their inputs and outputs:

- ``published``: onnx-community/OmniVoice-Onnx as public scripts load it, and every folder that
  ``build_artifacts.py`` writes now. The codec takes ``waveform_24k`` (1,1,N) and ``waveform_16k``
  (1,N), resampled to 16 kHz *outside* the graph, and its codes are ``codes`` (C,1,T). The LLM may
  have ``position_ids``; its past key/value inputs are recognised by "past" in their names.
- ``omnivoice-onnx 1``: our first builds. Both codec encoders take ``waveform`` (B,1,N) at 24 kHz
  (the semantic one resamples inside) and the codes are ``audio_codes`` (B,C,T).

A graph is bound to the first signature whose inputs and outputs it has, by name; never by
position. A graph that matches none is refused with its actual inputs and outputs and the
signatures we know, so that a change in the published repo is easy to see (and ``python -m
omnivoice_rt inspect`` shows the same table).
"""

from __future__ import annotations

from dataclasses import dataclass

from omnivoice_rt.errors import ArtifactError

PUBLISHED = "published"
LEGACY = "omnivoice-onnx 1"


@dataclass(frozen=True)
class Port:
    """One input or output of a graph: its name, element type (``float``, ``int64``...) and shape."""

    name: str
    dtype: str
    shape: tuple

    def __str__(self) -> str:
        return f"{self.name} {self.dtype} ({', '.join(str(d) for d in self.shape)})"


@dataclass(frozen=True)
class Signature:
    """The inputs a role's graph is fed and the outputs read from it, under one contract."""

    contract: str
    inputs: tuple[str, ...]  # fed by these names, all required
    outputs: tuple[str, ...]  # read by these names (a graph may have more)
    optional: tuple[str, ...] = ()  # fed when the graph has them
    past: bool = False  # inputs whose names contain "past" are fed empty key/value caches
    sample_rate: int = 24000  # of a waveform input
    codes_layout: str = ""  # "CBT": codes (C,1,T), "BCT": (1,C,T)

    def accepts(self, inputs: list[Port], outputs: list[Port]) -> bool:
        names = {p.name for p in inputs}
        allowed = set(self.inputs) | set(self.optional)
        extra = [n for n in names if n not in allowed and not (self.past and "past" in n)]
        return (
            set(self.inputs) <= names
            and set(self.outputs) <= {p.name for p in outputs}
            and not extra
        )

    def describe(self) -> str:
        fed = (
            list(self.inputs) + [f"[{n}]" for n in self.optional] + (["past*"] if self.past else [])
        )
        return f"{self.contract}: ({', '.join(fed)}) -> ({', '.join(self.outputs)})"


_PUBLISHED_CODES = "CBT"
SIGNATURES: dict[str, tuple[Signature, ...]] = {
    "audio_embeddings_encoder": (
        Signature(PUBLISHED, ("input_ids", "audio_mask"), ("inputs_embeds",)),
    ),
    "llm_decoder": (
        Signature(
            PUBLISHED,
            ("inputs_embeds", "attention_mask"),
            ("hidden_states",),
            ("position_ids",),
            past=True,
        ),
    ),
    "audio_heads_decoder": (Signature(PUBLISHED, ("hidden_states",), ("logits",)),),
    "acoustic_encoder": (
        Signature(PUBLISHED, ("waveform_24k",), ("acoustic_features",)),
        Signature(LEGACY, ("waveform",), ("acoustic_features",)),
    ),
    "semantic_encoder": (
        Signature(PUBLISHED, ("waveform_16k",), ("semantic_features",), sample_rate=16000),
        Signature(LEGACY, ("waveform",), ("semantic_features",)),
    ),
    "quantizer_encoder": (
        Signature(
            PUBLISHED,
            ("acoustic_features", "semantic_features"),
            ("codes",),
            codes_layout=_PUBLISHED_CODES,
        ),
        Signature(
            LEGACY, ("acoustic_features", "semantic_features"), ("audio_codes",), codes_layout="BCT"
        ),
    ),
    "higgs_decoder": (
        Signature(PUBLISHED, ("codes",), ("waveform_24k",), codes_layout=_PUBLISHED_CODES),
        Signature(LEGACY, ("audio_codes",), ("waveform",), codes_layout="BCT"),
    ),
}
MAIN_ROLES = ("audio_embeddings_encoder", "llm_decoder", "audio_heads_decoder")
CODEC_ROLES = ("acoustic_encoder", "semantic_encoder", "quantizer_encoder", "higgs_decoder")


def published(role: str) -> Signature:
    """The published contract of ``role``: the names our builds give their graphs."""
    return next(s for s in SIGNATURES[role] if s.contract == PUBLISHED)


def bind(role: str, inputs: list[Port], outputs: list[Port], where: str = "") -> Signature:
    """The signature ``role``'s graph matches; ``ArtifactError`` naming both sides when none does."""
    for signature in SIGNATURES[role]:
        if signature.accepts(inputs, outputs):
            return signature
    known = "; ".join(s.describe() for s in SIGNATURES[role])
    raise ArtifactError(
        f"{where or role} matches no graph signature we know for {role}: it has inputs "
        f"[{', '.join(str(p) for p in inputs)}] and outputs [{', '.join(str(p) for p in outputs)}]; "
        f"we know {known}. The repository's files changed: run `python -m omnivoice_rt inspect` on it, "
        "or use a folder built with build_artifacts.py"
    )


def ports_of_session(session) -> tuple[list[Port], list[Port]]:
    """The inputs and outputs of an ONNX Runtime session."""

    def port(arg) -> Port:
        return Port(arg.name, arg.type.removeprefix("tensor(").removesuffix(")"), tuple(arg.shape))

    return [port(a) for a in session.get_inputs()], [port(a) for a in session.get_outputs()]


def ports_of_graph(path) -> tuple[list[Port], list[Port]]:
    """The inputs and outputs of an ONNX file, read without its weights."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    initializers = {t.name for t in model.graph.initializer}

    def port(value) -> Port:
        t = value.type.tensor_type
        dtype = onnx.helper.tensor_dtype_to_np_dtype(t.elem_type).name if t.elem_type else "?"
        dtype = {"float32": "float", "float16": "float16", "bool": "bool"}.get(dtype, dtype)
        return Port(value.name, dtype, tuple(d.dim_param or d.dim_value for d in t.shape.dim))

    inputs = [port(v) for v in model.graph.input if v.name not in initializers]
    return inputs, [port(v) for v in model.graph.output]
