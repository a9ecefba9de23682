"""Shared fixtures: one tiny random-weight checkpoint and its artifacts, built once per session.

The artifacts come from our own ``build_artifacts.py`` (the code under test), and the oracle is
the upstream ``omnivoice`` PyTorch model loaded from the same checkpoint. Both need PyTorch (the
``build`` extra). Without it, ``OMNIVOICE_TEST_FIXTURES=DIR`` takes the artifacts and the
recogniser from ``DIR``, made where PyTorch is (``python -m tests.prebuilt DIR``), so that
``pytest tests/runtime`` runs on the library alone; what needs the checkpoint or the oracle is
skipped, saying so.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# MatMulNBits in fp32 everywhere, the servers and commands the tests start too: only that gives
# the same numbers whatever the batch shape (tests/runtime/test_matmul.py tries the other modes).
os.environ.setdefault("OMNIVOICE_MATMUL", "fp32")
# words aligned by eSpeak NG, the default, whatever the machine's environment names
os.environ.pop("OMNIVOICE_ALIGN_MODEL", None)
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PREBUILT = os.environ.get("OMNIVOICE_TEST_FIXTURES")  # a folder of tests/prebuilt.py's


def needs_torch(what: str) -> None:
    """Skip, saying why, where PyTorch is not installed."""
    if importlib.util.find_spec("torch") is None:
        pytest.skip(
            f"{what} needs PyTorch (pip install 'omnivoice-onnx[build]'); the library's tests run "
            "without it on fixtures made before: OMNIVOICE_TEST_FIXTURES (tests/prebuilt.py)"
        )


def prebuilt(name: str, make, *args) -> Path:
    """``PREBUILT/name`` where fixtures were made before, else ``make(*args)``."""
    if PREBUILT:
        if not (Path(PREBUILT) / name).exists():
            pytest.skip(f"OMNIVOICE_TEST_FIXTURES has no {name}: make it with tests/prebuilt.py")
        return Path(PREBUILT) / name
    needs_torch(f"building the {name} fixture")
    return make(*args)


def build(checkpoint: Path, output: Path, *args: str) -> Path:
    from omnivoice_build import artifacts as build_artifacts

    code = build_artifacts.main(["--model", str(checkpoint), "--output", str(output), *args])
    if code != 0:
        raise RuntimeError(f"build_artifacts {args} exited with {code}")
    return output


def make_tiny_checkpoint(folder: Path) -> Path:
    from omnivoice_build.fixtures import make_checkpoint

    return make_checkpoint(folder / "tiny", "tiny", seed=0)


def make_fp32(checkpoint: Path, out: Path) -> Path:
    """The all-fp32 profile and an fp32 codec: the reference for equivalence."""
    args = ("--device", "cpu_fp32", "--include-higgs", "--higgs-precision", "fp32")
    return build(checkpoint, out, *args)


def make_cpu(checkpoint: Path, out: Path) -> Path:
    """The published layout: cpu (int4/) and cpu_fp16 (root) profiles and an fp16 codec, plus int8/."""
    build(checkpoint, out, "--device", "cpu")
    build(checkpoint, out, "--device", "cpu_int8")
    return build(checkpoint, out, "--device", "cpu_fp16", "--include-higgs")


def make_whisper(out: Path) -> Path:
    """A random-weight Whisper in the onnx-community layout (fp32 and int8) that hears ``TRANSCRIPT``."""
    from omnivoice_build.whisper_fixture import build_whisper

    return build_whisper(out, "tiny", TRANSCRIPT, quantize=True)


def make_speaker(folder: Path) -> Path:
    """A folder with Resemblyzer's trained speaker encoder exported to ONNX, resemblyzer.onnx."""
    from omnivoice_build.speaker_fixture import export_resemblyzer

    folder.mkdir(parents=True, exist_ok=True)
    export_resemblyzer(folder / "resemblyzer.onnx")
    return folder


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory) -> Path:
    needs_torch("the random-weight checkpoint")
    return make_tiny_checkpoint(tmp_path_factory.mktemp("checkpoint"))


@pytest.fixture(scope="session")
def fp32_artifacts(request, tmp_path_factory) -> Path:
    """The all-fp32 profile and an fp32 codec: the reference for equivalence."""

    def make():
        checkpoint = request.getfixturevalue("tiny_checkpoint")
        return make_fp32(checkpoint, tmp_path_factory.mktemp("artifacts_fp32"))

    return prebuilt("fp32", make)


@pytest.fixture(scope="session")
def cpu_artifacts(request, tmp_path_factory) -> Path:
    """The published layout: cpu (int4/) and cpu_fp16 (root) profiles and an fp16 codec, plus int8/."""

    def make():
        checkpoint = request.getfixturevalue("tiny_checkpoint")
        return make_cpu(checkpoint, tmp_path_factory.mktemp("artifacts_cpu"))

    return prebuilt("cpu", make)


@pytest.fixture(scope="session")
def fp32_voice(fp32_artifacts):
    """The fp32 model, loaded once for every test that only generates with it (none changes it)."""
    from omnivoice_rt.model import OmniVoiceONNX

    return OmniVoiceONNX.load(fp32_artifacts, "fp32")


@pytest.fixture(scope="session")
def int4_voice(cpu_artifacts):
    """The int4 model of the published layout, loaded once, as the servers of the tests load it."""
    from omnivoice_rt.model import OmniVoiceONNX

    return OmniVoiceONNX.load(cpu_artifacts, "int4")


@pytest.fixture(scope="session")
def upstream(tiny_checkpoint):
    """The upstream OmniVoice PyTorch model on the same weights, in eval mode."""
    from omnivoice.models.omnivoice import OmniVoice

    return OmniVoice.from_pretrained(str(tiny_checkpoint)).eval()


# text, language, instruct, precision, num_step, guidance_scale, speed, duration, seed, randomize,
# denoise, postprocess_output (tests/runtime/test_asr.py calls with the older names, guidance and postprocess)
FIXED = dict(
    num_step=8,
    guidance_scale=2.0,
    speed=1.0,
    duration=2.0,
    seed=3,
    randomize_seed=False,
    denoise=True,
    postprocess_output=False,
)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def running_app(
    args: list[str],
    log_path: Path,
    prefix: tuple[str, ...] = (),
    command: tuple[str, ...] = (),
    **env: str,
):
    """``python app.py ARGS`` (or ``command``, such as an installed ``omnivoice-onnx-server``) as a
    real server on a free port of 127.0.0.1 (run by ``prefix``, such as ``prlimit --nofile=1024``,
    where given); yields its URL."""
    import os
    import subprocess
    import time
    import urllib.request

    port = free_port()
    environment = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", **env}
    for inherited in ("OMNIVOICE_ARTIFACTS", "FORWARDED_ALLOW_IPS", "SPACE_ID"):
        environment.pop(inherited, None)  # who the server trusts is the test's to say
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [
                *prefix,
                *(command or (sys.executable, str(ROOT / "app.py"))),
                *args,
                "--port",
                str(port),
            ],
            cwd=ROOT,
            env=environment,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 120
        try:
            while True:
                try:
                    urllib.request.urlopen(url, timeout=2)
                    break
                except OSError:
                    if process.poll() is not None or time.time() > deadline:
                        raise RuntimeError(f"the app did not start; see {log_path}") from None
                    time.sleep(0.5)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()


def app_process(url: str):
    """The ``psutil.Process`` of the app ``running_app`` serves at ``url``."""
    import psutil

    port = url.rsplit(":", 1)[1]
    return next(
        p
        for p in psutil.process_iter(["cmdline"])
        if p.info["cmdline"]
        and "app.py" in " ".join(p.info["cmdline"])
        and port in p.info["cmdline"]
    )


def numeric_text(length: int, seed: int) -> str:
    """A text of numbers, ``length`` characters: the costliest to read as words (about 3 ms and
    0.4 MB a character)."""
    import random

    rng = random.Random(seed)
    words = []
    while sum(map(len, words)) + len(words) < length:
        words.append(str(rng.randrange(10 ** rng.randrange(1, 7))))
    return " ".join(words)[:length]


def in_arrival_order(url: str, callers: list) -> tuple[list[int], dict]:
    """Call ``callers[n](n)`` each in its own thread, starting each once the server's line
    (``/health``) holds the ones before it, so they arrive in order while the first is served;
    returns the order they finished in and their results."""
    import threading
    import time

    import httpx

    finished, results = [], {}

    def call(n):
        results[n] = callers[n](n)
        finished.append(n)

    def in_line() -> int:
        health = httpx.get(f"{url}/health").json()
        return health["serving"] + health["waiting"]

    threads = [threading.Thread(target=call, args=(n,)) for n in range(len(callers))]
    for n, thread in enumerate(threads):
        thread.start()
        deadline = time.time() + 60
        while in_line() < n + 1:
            assert time.time() < deadline, f"caller {n} never reached the line"
            time.sleep(0.02)
    for thread in threads:
        thread.join(timeout=300)
    return finished, results


TRANSCRIPT = "This is my voice."  # what the tiny recogniser hears in any audio


def save_narrator(folder: Path, artifacts: Path) -> Path:
    """Save one voice prompt, ``narrator``, encoded from a test recording, into the library
    ``folder``; returns the folder."""
    from omnivoice_build.equivalence import write_reference
    from omnivoice_rt.model import OmniVoiceONNX

    reference = write_reference(str(folder.parent / "narrator.wav"))
    voice = OmniVoiceONNX.load(artifacts, "int4")
    voice.create_voice_prompt(reference, "This is the narrator speaking.").save(
        folder / "narrator.npz"
    )
    return folder


@pytest.fixture(scope="session")
def tiny_whisper(tmp_path_factory) -> Path:
    """A random-weight Whisper in the onnx-community layout (fp32 and int8) that hears ``TRANSCRIPT``."""
    return prebuilt("whisper", lambda: make_whisper(tmp_path_factory.mktemp("whisper")))


def pytest_configure(config):
    if importlib.util.find_spec("torch") is not None:  # the ONNX exports' tracing, at build time
        config.addinivalue_line("filterwarnings", "ignore::torch.jit.TracerWarning")


# A test's tier, from the fixtures it uses, directly or through others (pyproject.toml declares
# the markers): each mark below where its fixtures are among them, else ``unit``. A module's own
# ``pytestmark`` of one of these names counts too.
NEEDS = {
    "build": {
        "tiny_checkpoint",
        "fp32_artifacts",
        "cpu_artifacts",
        "upstream",
        "published",
        "published_int4",
        "tiny_whisper",
        "ctc_model",
        "wheel",
        "fresh",
    },
    "server": {
        "app_server",
        "secured_server",
        "server",
        "wyoming_server",
        "keyless_server",
        "deployed",
        "cluster",
    },
    "browser": {"browser", "page"},
    "container": {"image", "rootfs"},
    "slow": {"full_checkpoint", "full_voice", "full_upstream"},
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        uses = set(getattr(item, "fixturenames", ()))
        needs = {mark for mark, fixtures in NEEDS.items() if uses & fixtures}
        needs |= {mark.name for mark in item.iter_markers() if mark.name in NEEDS}
        for mark in sorted(needs) or ["unit"]:
            item.add_marker(mark)


@pytest.fixture(scope="session")
def app_server(cpu_artifacts, tiny_whisper, tmp_path_factory):
    """The app over the tiny int4/fp16 artifacts, with the tiny recogniser."""
    log = tmp_path_factory.mktemp("app") / "server.log"
    with running_app(
        ["--artifacts", str(cpu_artifacts), "--asr-model", str(tiny_whisper)],
        log,
        HF_HUB_OFFLINE="1",
    ) as url:
        yield url


# ----------------------------------------------------------------------------- the published repo


def make_causal(path: Path) -> None:
    """Drop ``causal=0``: the graph becomes the builder's own, causal, output."""
    import onnx

    model = onnx.load(str(path))
    for node in model.graph.node:
        kept = [a for a in node.attribute if a.name != "causal"]
        del node.attribute[:]
        node.attribute.extend(kept)
    path.with_name(path.name + ".data").unlink()
    onnx.save_model(model, str(path), save_as_external_data=True, location=path.name + ".data")


def is_causal(path: Path) -> bool:
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    return not any(a.name == "causal" for n in model.graph.node for a in n.attribute)


@pytest.fixture(scope="session")
def published(tiny_checkpoint, tmp_path_factory) -> Path:
    """A replica of onnx-community/OmniVoice-Onnx built to its contract (omnivoice_build.published):
    the root fp16 profile as published, and in ``int4/`` fp32 graphs under the published names
    with a causal LLM, so that, repaired, its codes must equal our fp32 build's exactly."""
    from omnivoice_build.published import build_replica

    return build_replica(tiny_checkpoint, tmp_path_factory.mktemp("published") / "repo", exact=True)


@pytest.fixture(scope="session")
def published_int4(tiny_checkpoint, tmp_path_factory) -> Path:
    """The replica as published: ``int4/`` with int4 encoder and heads (block 128) and int4 LLM."""
    from omnivoice_build.published import build_replica

    return build_replica(tiny_checkpoint, tmp_path_factory.mktemp("published-int4") / "repo")


# ----------------------------------------------------------------------------------------- Ray

RAY_TOKEN = "omnivoice-tests-" + "0123456789abcdef" * 2  # a token of the tests' own clusters
# What a Ray test's cluster and commands are given, by name: "none", no token anywhere (a cluster
# that `ray start --head` makes without authentication); "file", a token in HOME/.ray/auth_token
# and RAY_AUTH_MODE unset (`ray start --head` turns authentication on by itself, as on a machine
# where `ray.init(address="local")` once wrote the file); "env", RAY_AUTH_MODE=token with
# RAY_AUTH_TOKEN, as docs/replicas.md tells a cluster's operator to set it on every node.
RAY_AUTH = ("none", "file", "env")


def ray_environment(home: Path, auth: str = "none") -> dict[str, str]:
    """The environment of a Ray test's processes: a HOME of its own (never the machine's
    ``~/.ray``), no ``RAY_*`` variable of the caller's, and the authentication ``auth`` names."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    environment.update(HOME=str(home), RAY_USAGE_STATS_ENABLED="0")
    (home / ".ray").mkdir(parents=True, exist_ok=True)
    if auth == "file":
        (home / ".ray" / "auth_token").write_text(RAY_TOKEN)
    elif auth == "env":
        environment.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=RAY_TOKEN)
    elif auth != "none":
        raise ValueError(f"auth: one of {RAY_AUTH}, not {auth!r}")
    return environment


RAY_CLI = (sys.executable, "-m", "ray.scripts.scripts")


def ray_head(port: int, environment: dict, cpus: int = 1) -> None:
    """``ray start --head`` on 127.0.0.1:``port`` (one line of its output where it fails)."""
    import subprocess

    done = subprocess.run(
        [*RAY_CLI, "start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(port)]
        + ["--num-cpus", str(cpus), "--include-dashboard", "false", "--disable-usage-stats"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=180,
    )
    if done.returncode != 0:
        raise RuntimeError(f"ray start --head failed: {done.stderr[-2000:]}")


def ray_stop(environment: dict) -> None:
    """``ray stop --force``: every Ray process on this machine."""
    import subprocess

    subprocess.run([*RAY_CLI, "stop", "--force"], env=environment, capture_output=True, timeout=120)
