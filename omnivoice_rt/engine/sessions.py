"""Open the ONNX Runtime sessions of one precision of an artifact folder, each bound to its role.

``load_graphs(root, "int4")`` reads the manifest (ours, or one described from the published
layout), checks that the files it needs are there (optionally their hashes), opens every graph
once, binds each to its role by its input and output names (:mod:`omnivoice_rt.artifacts.signatures`),
picks a codec that loads and decodes to finite samples (the published ``audio_tokenizer/fp16/``
may not), and refuses an LLM that attends causally.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path

from omnivoice_rt.artifacts.bidirectional import check_bidirectional
from omnivoice_rt.artifacts.manifest import (
    ArtifactError,
    CodecEntry,
    Manifest,
    load_manifest,
    safe_join,
    verify_files,
)
from omnivoice_rt.artifacts.signatures import CODEC_ROLES, Port, Signature, bind, ports_of_session
from omnivoice_rt.engine.kernels import KERNELS
from omnivoice_rt.errors import SynthesisError

logger = logging.getLogger(__name__)


@dataclass
class Graph:
    """One loaded graph: its role, the signature it was bound by, and its session."""

    role: str
    path: Path
    session: object  # onnxruntime.InferenceSession
    signature: Signature
    inputs: list[Port] = field(default_factory=list)
    outputs: list[Port] = field(default_factory=list)

    def run(self, outputs: list[str] | None, feeds: dict) -> list:
        """The session's run; an ONNX Runtime failure becomes a ``SynthesisError``, its detail logged."""
        try:
            return self.session.run(outputs, feeds)
        except Exception as exc:  # onnxruntime raises its own exception types
            shapes = {name: getattr(value, "shape", None) for name, value in feeds.items()}
            logger.error("%s (%s) failed on inputs %s: %s", self.role, self.path, shapes, exc)
            first = " ".join(str(exc).split())[:200]
            raise SynthesisError(
                f"the model's {self.role} graph failed on this request ({first}); the server log has the details. "
                "A shorter text or reference may pass; if it keeps failing, re-download or rebuild the artifacts"
            ) from exc

    def input(self, name: str) -> Port | None:
        return next((p for p in self.inputs if p.name == name), None)


def default_providers(precision: str) -> list[str]:
    return (
        ["CUDAExecutionProvider", "CPUExecutionProvider"]
        if precision == "cuda"
        else ["CPUExecutionProvider"]
    )


def cuda_available() -> bool:
    """Whether this onnxruntime can run the cuda profile."""
    import onnxruntime as ort

    return "CUDAExecutionProvider" in ort.get_available_providers()


def require_cuda(precision: str) -> None:
    """Fail before any download when the cuda profile is asked for without a GPU runtime."""
    if precision == "cuda" and not cuda_available():
        raise ArtifactError(
            "the cuda profile needs a GPU and onnxruntime-gpu (pip install onnxruntime-gpu); "
            "on a CPU use precision 'int4' or 'fp16'"
        )


# Every session's settings. A synthesis runs several sessions one after another (embeddings,
# LLM, heads; then the codec), each with its own thread pool, whose threads by default spin for
# a while after a run waiting for more work; on two cores the spinning threads of the session
# that just ran slow the next one. Stopping them when a run ends (they still spin between the
# operators of one run) made ``turbo`` 21% faster and ``balanced`` 11% (docs/performance.md
# "Thread pools that stop spinning"); the numbers computed do not change.
SESSION_CONFIG = {
    "session.force_spinning_stop": "1",
    # One arena for the working memory of every session of the process (``shared_arena``), its
    # weights outside it: per-session arenas each kept their own peak and grew by doubling.
    "session.use_env_allocators": "1",
    "session.use_device_allocator_for_initializers": "1",
}
_arena = threading.Lock()
_arena_registered = False


def shared_arena() -> None:
    """Register, once per process, the CPU arena every session shares (``SESSION_CONFIG``),
    extended by what is asked rather than by doubling. Four streams made at once on the
    full-size model (int4, ``balanced``, AMD EPYC Zen 5, 2 cores, AVX-512 VNNI) peaked at 2.60 GB against
    2.85 GB with an arena per session, as fast (44.2 / 39.8 s against 45.3 / 41.9 s, alternating;
    docs/performance.md "One arena"). The arena keeps what it took until the process ends."""
    global _arena_registered
    import onnxruntime as ort

    with _arena:
        if _arena_registered:
            return
        memory = ort.OrtMemoryInfo(
            "Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, ort.OrtMemType.DEFAULT
        )
        ort.create_and_register_allocator(memory, ort.OrtArenaCfg({"arena_extend_strategy": 1}))
        _arena_registered = True


def session_options(threads: int | None = None, config: dict[str, str] | None = None):
    """ONNX Runtime session options: ``threads`` intra-op threads (None: one per core),
    ``SESSION_CONFIG`` and ``config`` on top."""
    import onnxruntime as ort

    shared_arena()
    options = ort.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    options.log_severity_level = 3
    for key, value in {**SESSION_CONFIG, **(config or {})}.items():
        options.add_session_config_entry(key, value)
    return options


def open_session(
    path: Path, providers: list[str], threads: int | None = None, matmul: str = "fp32"
):
    """An ONNX Runtime session; ``matmul``: the kernel of its products (:mod:`omnivoice_rt.engine.matmul`),
    whose session settings it takes."""
    import onnxruntime as ort

    options = session_options(threads, KERNELS[matmul].config)
    try:
        return ort.InferenceSession(str(path), sess_options=options, providers=providers)
    except Exception as exc:  # onnxruntime raises its own exception types
        detail = " ".join(str(exc).split())[:400]
        raise ArtifactError(
            f"{path} could not be loaded ({detail}); rebuild or re-download it"
        ) from exc


def open_graph(
    role: str, path: Path, providers: list[str], threads: int | None = None, matmul: str = "fp32"
) -> Graph:
    session = open_session(path, providers, threads, matmul)
    inputs, outputs = ports_of_session(session)
    signature = bind(role, inputs, outputs, where=str(path))
    return Graph(role, path, session, signature, inputs, outputs)


def load_codec(
    root: Path,
    spec: CodecEntry,
    num_codebooks: int,
    providers: list[str],
    threads: int | None = None,
):
    """The codec whose four graphs ``spec`` lists; ``ArtifactError`` when one does not load or the
    decoder gives NaN."""
    from omnivoice_rt.engine.codec import Codec

    graphs = {
        role: open_graph(role, safe_join(root, spec.graphs[role].file), providers, threads)
        for role in CODEC_ROLES
    }
    return Codec(graphs, num_codebooks)


def open_codec(
    root: Path, manifest: Manifest, precision: str, providers: list[str], threads: int | None = None
):
    """The first codec of ``precision``'s candidates that loads and decodes to finite samples."""
    candidates = manifest.codec_candidates(precision)
    if not candidates:
        raise ArtifactError(
            f"{root} has no codec ({'/'.join(CODEC_ROLES)} in audio_tokenizer/): download the repository's "
            "audio_tokenizer/ folder, or build it with `python build_artifacts.py --include-higgs`"
        )
    codebooks = manifest.model.num_audio_codebook
    *preferred, (_, main) = candidates
    for index, (folder, spec) in enumerate(preferred):
        try:
            return load_codec(root, spec, codebooks, providers, threads)
        except ArtifactError as exc:
            logger.warning(
                "the codec in %s/ is unusable (%s); using the one in %s/ instead",
                folder,
                exc,
                candidates[index + 1][0],
            )
    return load_codec(root, main, codebooks, providers, threads)


def graph_path(
    root: Path,
    manifest: Manifest,
    precision: str,
    role: str,
    overrides: dict[str, Path] | None = None,
) -> Path:
    """Where ``precision``'s ``role`` graph loads from: its override (a repaired LLM), else the
    manifest's file."""
    override = (overrides or {}).get(role)
    return Path(override or safe_join(root, manifest.profile(precision).graphs[role].file))


def load_graphs(
    root: str | Path,
    precision: str = "int4",
    providers: list[str] | None = None,
    verify_hashes: bool = False,
    threads: int | None = None,
    overrides: dict[str, Path] | None = None,
    manifest: Manifest | None = None,
    matmul: str = "fp32",
) -> tuple[dict[str, Graph], object]:
    """``(graphs, codec)``: the three main graphs of ``precision`` keyed by role, and the codec.

    ``overrides`` maps a role to another file to load instead (a repaired LLM, a rewritten graph);
    ``matmul`` is the kernel of their products (:mod:`omnivoice_rt.engine.matmul`)."""
    root = Path(root)
    manifest = manifest or load_manifest(root)
    needed = manifest.files_of(precision)
    bad = (
        verify_files(root, manifest, needed)
        if verify_hashes
        else [f for f in needed if not safe_join(root, f).is_file()]
    )
    if bad:
        raise ArtifactError(
            f"{root}: {len(bad)} file(s) missing or corrupt: {', '.join(bad[:5])}; "
            "rebuild or re-download the artifacts"
        )
    require_cuda(precision)
    providers = providers or default_providers(precision)
    graphs = {}
    for role in manifest.profile(precision).graphs:
        path = graph_path(root, manifest, precision, role, overrides)
        graphs[role] = open_graph(role, path, providers, threads, matmul)
    llm = graphs["llm_decoder"].session
    if "CUDAExecutionProvider" not in llm.get_providers():
        check_bidirectional(llm, manifest.model.head_dim)
    codec = open_codec(root, manifest, precision, providers, threads)
    logger.info("loaded the %s profile and its codec from %s", precision, root)
    return graphs, codec
