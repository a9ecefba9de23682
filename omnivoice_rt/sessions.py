"""Open the ONNX Runtime sessions of one precision of an artifact folder.

``load_sessions(root, "int4")`` reads the manifest, checks that the files it needs are there
(optionally their hashes), opens every graph once, checks each graph's inputs and outputs against
the manifest, and refuses an LLM that attends causally.
"""

from __future__ import annotations

import logging
from pathlib import Path

from omnivoice_rt.bidirectional import check_bidirectional
from omnivoice_rt.manifest import (
    EXPECTED_IO,
    ArtifactError,
    load_manifest,
    profile_files,
    safe_join,
    verify_files,
)

logger = logging.getLogger(__name__)


def default_providers(precision: str) -> list[str]:
    return ["CUDAExecutionProvider", "CPUExecutionProvider"] if precision == "cuda" else ["CPUExecutionProvider"]


def open_session(path: Path, providers: list[str], threads: int | None = None):
    import onnxruntime as ort

    options = ort.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    options.log_severity_level = 3
    try:
        return ort.InferenceSession(str(path), sess_options=options, providers=providers)
    except Exception as exc:  # onnxruntime raises its own exception types
        raise ArtifactError(f"{path.name} could not be loaded ({exc}); rebuild or re-download it") from exc


def _check_io(session, name: str) -> None:
    """Each graph must have the inputs and outputs the runtime feeds and reads."""
    inputs, outputs = EXPECTED_IO[name]
    actual_in = {i.name for i in session.get_inputs()}
    actual_out = {o.name for o in session.get_outputs()}
    missing = [n for n in inputs if n not in actual_in] + [n for n in outputs if n not in actual_out]
    if missing:
        raise ArtifactError(
            f"{name}: expected inputs {inputs} and outputs {outputs}, but the graph has inputs "
            f"{sorted(actual_in)} and outputs {sorted(actual_out)}; rebuild it with build_artifacts.py"
        )


def load_sessions(
    root: str | Path,
    precision: str = "int4",
    providers: list[str] | None = None,
    verify_hashes: bool = False,
    threads: int | None = None,
    overrides: dict[str, Path] | None = None,
) -> dict:
    """Sessions for every graph of ``precision`` and of the codec, keyed by graph name.

    ``overrides`` maps a graph name to another file to load instead (a repaired LLM)."""
    root = Path(root)
    manifest = load_manifest(root)
    needed = profile_files(manifest, precision)
    bad = verify_files(root, manifest, needed) if verify_hashes else [
        f for f in needed if not safe_join(root, f).is_file()
    ]  # fmt: skip
    if bad:
        raise ArtifactError(
            f"{root}: {len(bad)} file(s) missing or corrupt: {', '.join(bad[:5])}; "
            "rebuild or re-download the artifacts"
        )
    providers = providers or default_providers(precision)
    if precision == "cuda":
        import onnxruntime as ort

        if "CUDAExecutionProvider" not in ort.get_available_providers():
            raise ArtifactError(
                "the cuda profile needs a GPU and onnxruntime-gpu (pip install onnxruntime-gpu); "
                "on a CPU use precision 'int4' or 'fp16'"
            )
    graphs = dict(manifest["profiles"][precision]["graphs"])
    graphs.update(manifest.get("audio_tokenizer", {}).get("graphs", {}))
    sessions = {}
    for name, spec in graphs.items():
        path = (overrides or {}).get(name) or safe_join(root, spec["file"])
        session = open_session(Path(path), providers, threads)
        _check_io(session, name)
        sessions[name] = session
    if "llm_decoder" in sessions and "CUDAExecutionProvider" not in sessions["llm_decoder"].get_providers():
        check_bidirectional(sessions["llm_decoder"], manifest["model"]["head_dim"])
    logger.info("loaded %d graphs of the %s profile from %s", len(sessions), precision, root)
    return sessions
