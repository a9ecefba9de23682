"""``python -m omnivoice_rt inspect [SOURCE] [--precision P]``: what an artifact source holds and
how the runtime would use it, without loading the model.

For each graph: its file and size, its inputs and outputs, and the signature it binds by (or
why none fits); for the LLM, whether it attends both ways or would be repaired, and where to, and
the kernel it would multiply with on this CPU (:mod:`omnivoice_rt.engine.matmul`);
for each codec folder, which precisions try it and whether it loads. From the Hub only the
graphs are fetched, not their external weights (sizes come from the repo's file list), so this
is the cheap first thing to run when the published repository changes.
"""

from __future__ import annotations

from pathlib import Path

from omnivoice_rt.artifacts.bidirectional import GQA, declares_causal
from omnivoice_rt.artifacts.hub import fetch, remote_files, repair_storage, repo_of
from omnivoice_rt.artifacts.manifest import (
    CODEC_DIR,
    CODEC_VARIANTS,
    FOUND,
    PROFILE_DIRS,
    CodecEntry,
    load_manifest,
    safe_join,
)
from omnivoice_rt.artifacts.profiles import ROLE_NAMES, weights_of
from omnivoice_rt.artifacts.signatures import CODEC_ROLES, bind, ports_of_graph
from omnivoice_rt.engine.kernels import KERNELS
from omnivoice_rt.engine.matmul import resolve as resolve_matmul
from omnivoice_rt.engine.sessions import open_graph
from omnivoice_rt.errors import ArtifactError


def _size(folder: Path, relative: str, remote: dict[str, int] | None) -> int | None:
    total, found = 0, False
    for name in (relative, relative + ".data"):
        if remote is not None and name in remote:
            total, found = total + remote[name], True
        elif (folder / name).is_file():
            total, found = total + (folder / name).stat().st_size, True
    return total if found else None


def _ports(ports, cache: str) -> str:
    """The ports, with the key/value caches (names containing ``cache``) summed up as one item."""
    caches = [p for p in ports if cache in p.name]
    shown = [str(p) for p in ports if cache not in p.name]
    if caches:
        shown.append(f"{len(caches)} {cache} key/values like {caches[0]}")
    return ", ".join(shown)


def _graph_lines(folder: Path, role: str, relative: str, remote) -> list[str]:
    path = safe_join(folder, relative)
    size = _size(folder, relative, remote)
    lines = [f"  {role}: {relative}, {'?' if size is None else f'{size / 1e6:.1f} MB'}"]
    inputs, outputs = ports_of_graph(path)
    if role in ROLE_NAMES:
        lines.append(f"    weights: {weights_of(path)}")
    lines.append(f"    inputs:  {_ports(inputs, 'past')}")
    lines.append(f"    outputs: {_ports(outputs, 'present')}")
    try:
        lines.append(f"    binds as: {bind(role, inputs, outputs).describe()}")
    except ArtifactError as exc:
        lines.append(f"    binds as: NOTHING ({exc})")
    return lines


def _attention_line(folder: Path, relative: str, precision: str) -> str:
    path = safe_join(folder, relative)
    if declares_causal(path):
        return (
            f"    attention: CAUSAL ({GQA} without causal=0): would be repaired into "
            f"{repair_storage(folder)}/{precision}-<content key>/, the original left as it is"
        )
    return f"    attention: bidirectional (causal=0 on every {GQA} node)"


def _kernel_line(folder: Path, relative: str, precision: str) -> str:
    """The kernel the LLM would multiply with on this CPU (``$OMNIVOICE_MATMUL`` or measured)."""
    if precision == "cuda":
        return "    kernel: ONNX Runtime's CUDA kernels"
    kernel, why = resolve_matmul(None, safe_join(folder, relative), None)
    return f"    kernel here: {kernel}, {KERNELS[kernel].summary} ({why})"


def _codec_lines(folder: Path, name: str, spec: CodecEntry) -> list[str]:
    users = CODEC_VARIANTS.get(name.rsplit("/", 1)[-1]) if name != CODEC_DIR else None
    who = (
        f"tried first by {', '.join(users)}" if users else "used by every precision (the fallback)"
    )
    lines = [f"codec {name}/: {who}"]
    for role in CODEC_ROLES:
        relative = spec.graphs[role].file
        lines += _graph_lines(folder, role, relative, None)
        try:
            open_graph(role, safe_join(folder, relative), ["CPUExecutionProvider"])
            lines.append("    loads: yes")
        except ArtifactError as exc:
            lines.append(f"    loads: NO ({exc})")
    return lines


def inspect(source: str | Path | None, precision: str | None = None) -> list[str]:
    """The report's lines for ``source`` (a folder or Hub repo id; None: the default repo)."""
    repo_id = repo_of(source)
    if repo_id is None:
        folder, remote, where = Path(source).expanduser(), None, str(Path(source).expanduser())
    else:
        folder = fetch(repo_id, precision, graphs_only=True)
        remote, where = remote_files(repo_id), f"{repo_id} (graphs fetched into {folder})"
    manifest = load_manifest(folder)
    model = manifest.model
    lines = [
        f"source: {where}",
        f"manifest: {FOUND[manifest.found]}",
        f"model: hidden {model.hidden_size}, {model.num_hidden_layers} layers, "
        f"{model.num_key_value_heads} key/value heads of {model.head_dim}, "
        f"positions {model.max_position_embeddings or 'unknown'}",
        f"profiles: {', '.join(manifest.profiles) or 'none'}",
    ]
    for name in [precision] if precision else list(manifest.profiles):
        profile = manifest.profiles.get(name)
        if profile is None:
            lines.append(f"profile {name}: not in this source")
            continue
        lines.append(f"profile {name} ({PROFILE_DIRS[name]}/):")
        for role, spec in profile.graphs.items():
            lines += _graph_lines(folder, role, spec.file, remote)
            if role == "llm_decoder":
                lines.append(_attention_line(folder, spec.file, name))
                lines.append(_kernel_line(folder, spec.file, name))
    codecs = [(CODEC_DIR, manifest.audio_tokenizer)]
    codecs += [(f"{CODEC_DIR}/{n}", spec) for n, spec in manifest.codec_variants.items()]
    for name, spec in codecs:
        lines += _codec_lines(folder, name, spec) if spec.graphs else [f"codec {name}/: MISSING"]
    return lines
