"""The distribution as a user installs it: the wheel built from this checkout, installed into a
fresh virtual environment (no system packages, outside the repository), first without extras (the
library and its command line, no Gradio), then with the ``server`` extra (the server's console
script serves the page and ``/health``). And the requirement files the Space and CI install are
the dependencies ``pyproject.toml`` declares; and the package's modules import one way."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import urllib.request
import venv
import zipfile
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import tomllib
from packaging.requirements import Requirement

from tests.conftest import ROOT, running_app

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
EXTRAS = PROJECT["optional-dependencies"]
SCRIPTS = {
    "omnivoice-onnx",
    "omnivoice-onnx-server",
    "omnivoice-onnx-replicas",
    "omnivoice-onnx-build",
}


def requirements(path: Path) -> set[str]:
    """A requirements file's requirements, normalized (``-r`` lines and comments left out)."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return {str(Requirement(line)) for line in lines if line and not line.startswith("-")}


def normalized(specs: list[str]) -> set[str]:
    return {str(Requirement(spec)) for spec in specs}


def test_the_requirement_files_are_the_declared_dependencies():
    space = normalized(PROJECT["dependencies"] + EXTRAS["server"] + EXTRAS["asr"] + EXTRAS["align"])
    assert requirements(ROOT / "requirements.txt") == space
    dev = normalized(EXTRAS["build"] + EXTRAS["ray"] + EXTRAS["dev"])
    assert requirements(ROOT / "requirements-dev.txt") == dev
    assert set(PROJECT["scripts"]) == SCRIPTS


def imports() -> dict[str, set[str]]:
    """Each module of ``omnivoice_rt`` -> the modules it imports, anywhere in it (a function's
    imports too), from this package and from outside it (top-level names)."""
    package = ROOT / "omnivoice_rt"
    modules = {}
    for path in package.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        modules[name] = path
    graph = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    found.add(full if full in modules else node.module)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
        graph[name] = {m if m in modules else m.split(".")[0] for m in found} - {name}
    return graph


def test_no_module_imports_one_that_imports_it():
    graph = imports()

    def reached(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for module in graph.get(todo.pop(), ()):
                if module not in seen and module != "omnivoice_rt":  # the public names
                    seen.add(module)
                    todo.append(module)
        return seen

    circles = {
        tuple(sorted((a, b)))
        for a in graph
        for b in graph[a]
        if b in graph and b != "omnivoice_rt" and a in reached(b)
    }
    assert not circles


def test_the_library_imports_neither_the_server_nor_build_tools():
    server = {"gradio", "fastapi", "starlette", "uvicorn", "wyoming", "zeroconf"}
    build = {"torch", "torchaudio", "omnivoice", "olive", "onnxruntime_genai", "omnivoice_build"}
    for module, imported in imports().items():
        if module.startswith("omnivoice_rt.server"):
            assert not imported & build, module
            continue
        assert not imported & (server | build), module
        assert not {m for m in imported if m.startswith("omnivoice_rt.server")}, module


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel, built from a copy of what it packages (a build writes into its source tree)."""
    source, out = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("dist")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    for package in ("omnivoice_rt", "omnivoice_build"):
        shutil.copytree(
            ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(source)],
        check=True,
        cwd=out,
    )
    (built,) = out.glob("omnivoice_onnx-*.whl")
    return built


def test_the_wheel_holds_the_packages_their_data_and_the_scripts(wheel):
    import omnivoice_rt

    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        info = f"omnivoice_onnx-{omnivoice_rt.__version__}.dist-info"
        metadata = archive.read(f"{info}/METADATA").decode()
        entry_points = archive.read(f"{info}/entry_points.txt").decode()
    for package in ("omnivoice_rt", "omnivoice_build"):
        for path in (ROOT / package).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                assert path.relative_to(ROOT).as_posix() in names
    assert not {name for name in names if name.startswith(("tests/", "bench/", "app.py"))}
    assert "Requires-Python: >=3.10" in metadata
    assert "License-Expression: Apache-2.0" in metadata
    for extra in ("server", "asr", "ray", "align", "build", "dev"):
        assert f"Provides-Extra: {extra}" in metadata
    assert "Requires-Dist: gradio" in metadata and 'extra == "server"' in metadata
    for script in SCRIPTS:
        assert f"{script} = " in entry_points


@pytest.fixture(scope="module")
def fresh(wheel, tmp_path_factory) -> Path:
    """A virtual environment without the system's packages, the wheel installed without extras."""
    env = tmp_path_factory.mktemp("fresh") / "venv"
    venv.create(env, with_pip=True)
    subprocess.run(
        [env / "bin" / "python", "-m", "pip", "install", "-q", str(wheel)],
        check=True,
        env=user_env(),
    )
    return env


def user_env(**extra: str) -> dict:
    """This process's environment less what points into the checkout or its virtual environment."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return {**env, "HF_HUB_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False", **extra}


def run(env: Path, *command: str, cwd: Path) -> subprocess.CompletedProcess:
    program = env / "bin" / command[0]
    return subprocess.run(
        [str(program), *command[1:]], cwd=cwd, env=user_env(), capture_output=True, text=True
    )


def synthesize(command: list[str], artifacts: Path, out: Path, cwd: Path, **kw) -> np.ndarray:
    """``synthesize`` of a text whose money the normalizers' FSTs (package data) read as words."""
    flags = ["--model-dir", str(artifacts), "--text", "It costs $5.", "--language", "en"]
    flags += ["--normalize-text", "--seed", "0", "--num-step", "4", "--output", str(out)]
    done = subprocess.run(
        [*command, "synthesize", *flags], cwd=cwd, capture_output=True, text=True, **kw
    )
    assert done.returncode == 0, done.stderr
    return sf.read(out, dtype="float32")[0]


def test_without_extras_the_library_and_its_cli_work_and_the_server_names_its_extra(
    fresh, cpu_artifacts, tmp_path
):
    where = run(
        fresh,
        "python",
        "-c",
        "import importlib.util, omnivoice_rt; "
        "print(omnivoice_rt.__file__); print(importlib.util.find_spec('gradio'))",
        cwd=tmp_path,
    )
    module, gradio = where.stdout.splitlines()
    assert module.startswith(str(fresh)) and gradio == "None"

    installed = synthesize(
        [str(fresh / "bin" / "omnivoice-onnx")],
        cpu_artifacts,
        tmp_path / "a.wav",
        tmp_path,
        env=user_env(),
    )
    here = synthesize(
        [sys.executable, "-m", "omnivoice_rt"], cpu_artifacts, tmp_path / "b.wav", ROOT
    )
    np.testing.assert_array_equal(installed, here)
    assert installed.size > 0

    server = run(fresh, "omnivoice-onnx-server", "--help", cwd=tmp_path)
    assert server.returncode == 2 and "Traceback" not in server.stderr
    assert "pip install 'omnivoice-onnx[server]'" in server.stderr
    replicas = run(fresh, "omnivoice-onnx-replicas", "--help", cwd=tmp_path)
    assert replicas.returncode == 2 and "Traceback" not in replicas.stderr
    assert "pip install 'omnivoice-onnx[server,ray]'" in replicas.stderr

    reference = tmp_path / "reference.wav"
    sf.write(reference, np.sin(np.arange(24000) / 12.0).astype(np.float32) * 0.3, 24000)
    clone = run(
        fresh,
        "omnivoice-onnx",
        "synthesize",
        *("--model-dir", str(cpu_artifacts), "--text", "Hello.", "--ref-audio", str(reference)),
        *("--output", str(tmp_path / "c.wav")),
        cwd=tmp_path,
    )
    assert clone.returncode == 2 and "Traceback" not in clone.stderr
    assert "pip install 'omnivoice-onnx[asr]' (or pass ref_text" in clone.stderr


def test_with_the_server_extra_its_script_serves_the_page_and_health(
    fresh, wheel, cpu_artifacts, tmp_path
):
    subprocess.run(
        [fresh / "bin" / "python", "-m", "pip", "install", "-q", f"{wheel}[server]"],
        check=True,
        env=user_env(),
    )
    command = (str(fresh / "bin" / "omnivoice-onnx-server"),)
    args = ["--artifacts", str(cpu_artifacts)]
    env = {"PYTHONPATH": "", "OMNIVOICE_ASR_MODEL": "none", "HF_HUB_OFFLINE": "1"}
    with running_app(args, tmp_path / "server.log", command=command, **env) as url:
        page = urllib.request.urlopen(url, timeout=30).read().decode()
        # the OpenAI door, its money read as words by the server's normalization worker
        body = {
            "model": "tts-1",
            "input": "It costs $5.",
            "voice": "alloy",
            "response_format": "wav",
        }
        speech = urllib.request.Request(
            f"{url}/v1/audio/speech",
            json.dumps(body).encode(),
            {"Content-Type": "application/json"},
        )
        audio = urllib.request.urlopen(speech, timeout=120).read()
        health = json.loads(urllib.request.urlopen(f"{url}/health", timeout=30).read())
    assert "OmniVoice" in page
    assert audio[:4] == b"RIFF" and len(audio) > 1000
    assert health["status"] == "ok" and health["text_pieces_read"] >= 1
    assert health["loaded"] and set(health["kernels"]) == set(health["loaded"])


def test_the_librarys_tests_run_without_torch(
    fresh, wheel, cpu_artifacts, fp32_artifacts, tiny_whisper, tmp_path
):
    """``pytest tests/runtime`` in the fresh environment (the wheel with its asr extra, pytest
    and hypothesis; no PyTorch, no upstream package) on the session's fixtures: what needs the
    checkpoint or the oracle is skipped, the rest passes."""
    from tests.conftest import make_speaker

    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    for name, path in (("cpu", cpu_artifacts), ("fp32", fp32_artifacts), ("whisper", tiny_whisper)):
        (fixtures / name).symlink_to(path)
    make_speaker(fixtures / "speaker")
    subprocess.run(
        [fresh / "bin" / "python", "-m", "pip", "install", "-q", f"{wheel}[asr]", "pytest"]
        + ["hypothesis"],
        check=True,
        env=user_env(),
    )
    torch = run(
        fresh,
        "python",
        "-c",
        "import importlib.util as u; print(u.find_spec('torch'))",
        cwd=tmp_path,
    )
    assert torch.stdout.strip() == "None"
    tests = subprocess.run(
        [
            str(fresh / "bin" / "python"),
            "-m",
            "pytest",
            "tests/runtime",
            "-q",
            "-p",
            "no:cacheprovider",
        ],
        cwd=ROOT,
        env={  # the Hub's tests reach a loopback Hub: not offline
            k: v
            for k, v in user_env(
                OMNIVOICE_TEST_FIXTURES=str(fixtures), HF_HOME=str(tmp_path / "hf")
            ).items()
            if k != "HF_HUB_OFFLINE"
        },
        capture_output=True,
        text=True,
    )
    summary = tests.stdout.strip().splitlines()[-1]
    assert tests.returncode == 0, tests.stdout[-3000:]
    assert int(summary.split(" passed")[0].split()[-1]) >= 100, summary


# ------------------------------------------------------------------------------- the bench scripts

BENCH = sorted((ROOT / "bench").glob("*.py"))


def bench_extras(script: Path) -> list[str]:
    """The extras a bench script's docstring names on its ``Extras:`` line (``none``: [])."""
    doc = ast.get_docstring(ast.parse(script.read_text())) or ""
    (line,) = [line for line in doc.splitlines() if line.startswith("Extras: ")] or [""]
    assert line, f"{script.name}: its docstring has no 'Extras:' line"
    named = line.removeprefix("Extras: ").split("(")[0].rstrip(" .")
    return [] if named == "none" else [extra.strip() for extra in named.split(",")]


def test_no_bench_script_or_top_level_name_hides_a_module():
    """``python bench/X.py`` puts ``bench/`` first on ``sys.path`` and the scripts put the
    repository root next: a file there named as a standard-library module or as a top-level
    module of an installed distribution would be imported instead of it (``bench/kernels.py``
    hid the ``kernels`` package transformers imports; ``bench/profile.py`` the ``profile`` that
    ``cProfile`` imports)."""
    import importlib.metadata

    installed = importlib.metadata.packages_distributions()
    names = {path.stem for path in BENCH}
    names |= {
        path.stem if path.suffix == ".py" else path.name
        for path in ROOT.iterdir()
        if (path.suffix == ".py" or path.is_dir()) and not path.name.startswith(".")
    }
    ours = {"omnivoice_rt", "omnivoice_build"}  # the checkout's own packages, installed or not
    hidden = {
        name: sorted(installed.get(name, [])) or "the standard library"
        for name in names - ours
        if name in sys.stdlib_module_names or name in installed
    }
    assert not hidden, f"rename these, they hide modules: {hidden}"


def test_each_bench_scripts_help_runs_with_the_extras_it_names(fresh, tmp_path):
    """``--help`` of each bench script, run as its docstring says from another folder: those that
    need no extra in the fresh environment of the wheel alone, the others here (the README's
    environment, with every extra)."""
    for script in BENCH:
        extras = bench_extras(script)
        assert set(extras) <= set(EXTRAS), (script.name, extras)
        python = fresh / "bin" / "python" if not extras else Path(sys.executable)
        done = subprocess.run(
            [str(python), str(script), "--help"],
            cwd=tmp_path,
            env=user_env(),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0 and "usage:" in done.stdout, (script.name, done.stderr[-2000:])


# Functions over the bound today, each at its length: none may grow, and each leaves this table as
# it is split (none left).
LONG_TODAY: dict[str, int] = {}
MAX_FUNCTION_LINES = 100


def own_lines(function: ast.AST) -> int:
    """A function's lines, those of the functions and classes defined inside it left out."""
    lines = set(range(function.lineno, function.end_lineno + 1))
    for inner in ast.walk(function):
        if inner is not function and isinstance(
            inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        ):
            lines -= set(range(inner.lineno, inner.end_lineno + 1))
    return len(lines)


def test_no_function_of_the_package_is_over_100_lines():
    found = {}
    for path in sorted((ROOT / "omnivoice_rt").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = own_lines(node)
                where = f"{path.relative_to(ROOT)}:{node.name}"
                if length > MAX_FUNCTION_LINES or where in LONG_TODAY:
                    found[where] = length
    over = {
        where: length
        for where, length in found.items()
        if length > LONG_TODAY.get(where, MAX_FUNCTION_LINES)
    }
    assert not over, f"split these (at most {MAX_FUNCTION_LINES} lines each): {over}"
    shorter = {where for where, length in found.items() if length < LONG_TODAY.get(where, 0)}
    assert not shorter, f"shorter now: lower or remove their entries in LONG_TODAY: {shorter}"
