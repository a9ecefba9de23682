"""The server's flags (``omnivoice_rt/server/flags.py``): one table makes the parser, the checks
and docs/server.md's table; a value from the command line or the environment outside its type or
bound is one line naming it."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from omnivoice_rt.server import flags
from omnivoice_rt.server.main import together
from tests.conftest import ROOT

DOCS = ROOT / "docs" / "server.md"


def test_the_docs_table_is_the_flags_table_and_names_every_flag_of_the_parser():
    text = DOCS.read_text()
    block = re.search(r"<!-- flags:[^\n]*-->\n(.*?)<!-- /flags -->", text, re.S)
    assert block, "docs/server.md has lost its <!-- flags --> block"
    assert block.group(1) == flags.markdown(), (
        "docs/server.md's flag table is not the flags' own: paste in the output of "
        "python -m omnivoice_rt.server.flags"
    )
    documented = set(re.findall(r"^\| `(--[a-z-]+)", block.group(1), re.M))
    parsed = {
        option
        for action in flags.parser()._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    }
    assert documented == parsed == {flag.name for flag in flags.FLAGS}


def parse(monkeypatch, argv: list[str], **env: str):
    for flag in flags.FLAGS:
        if flag.env:
            monkeypatch.delenv(flag.env, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return flags.parse(argv, check=together)


def test_a_value_comes_from_the_flag_else_the_environment_else_the_default(monkeypatch):
    args = parse(monkeypatch, [])
    assert (args.port, args.max_waiting, args.idle_unload, args.mcp) == (7860, 32, None, False)
    args = parse(
        monkeypatch,
        ["--port", "9000"],
        GRADIO_SERVER_PORT="8000",
        OMNIVOICE_MAX_WAITING="5",
        OMNIVOICE_IDLE_UNLOAD="0",  # 0: keep the models, as before
        GRADIO_MCP_SERVER="TRUE",
        OMNIVOICE_VOICES_WRITABLE="false",
    )
    assert (args.port, args.max_waiting, args.idle_unload) == (9000, 5, None)
    assert args.mcp is True and args.voices_writable is False
    assert (
        parse(
            monkeypatch, ["--wyoming-zeroconf", "--wyoming", "tcp://127.0.0.1:10200"]
        ).wyoming_zeroconf
        == "omnivoice"
    )


@pytest.mark.parametrize(
    "argv, env, words",
    [
        (["--max-waiting", "1001"], {}, "--max-waiting takes 0 to 1000, not 1001"),
        ([], {"OMNIVOICE_MAX_WAITING": "-1"}, "--max-waiting takes 0 to 1000, not -1"),
        (["--concurrency", "0"], {}, "--concurrency takes at least 1"),
        (["--idle-unload", "-5"], {}, "--idle-unload takes above 0"),
        (["--header-timeout", "0"], {}, "--header-timeout takes above 0"),
        (
            [],
            {"OMNIVOICE_STOP_TIMEOUT": "soon"},
            "OMNIVOICE_STOP_TIMEOUT='soon' (--stop-timeout) is not a number",
        ),
        (
            [],
            {"GRADIO_SERVER_PORT": "http"},
            "GRADIO_SERVER_PORT='http' (--port) is not a whole number",
        ),
        ([], {"OMNIVOICE_PRECISION": "int3"}, "OMNIVOICE_PRECISION='int3' (--precision): one of"),
        (["--turns", "fair"], {}, "argument --turns: invalid choice: 'fair'"),
        (
            [],
            {"OMNIVOICE_TURNS": "fair"},
            "OMNIVOICE_TURNS='fair' (--turns): one of step, shortest, request",
        ),
        (["--wyoming-zeroconf"], {}, "--wyoming-zeroconf advertises the Wyoming door"),
        (["--voices-writable"], {}, "--voices-writable needs --voices DIR"),
        (["--per-client", "0"], {}, "--per-client takes at least 1, not 0"),
        (["--per-client", "5"], {}, "--per-client 5 is above --concurrency 4"),
        (
            ["--concurrency", "2"],
            {"OMNIVOICE_PER_CLIENT": "3"},
            "--per-client 3 is above --concurrency 2",
        ),
    ],
)
def test_a_bad_value_is_one_line_naming_it(monkeypatch, capsys, argv, env, words):
    with pytest.raises(SystemExit) as stopped:
        parse(monkeypatch, argv, **env)
    assert stopped.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("omnivoice-onnx-server: error: ") and words in error, error


def test_a_bad_environment_is_one_line_before_gradio_reads_it(tmp_path):
    # Gradio reads GRADIO_SERVER_PORT as it is imported, and failed there with a traceback
    done = subprocess.run(
        [sys.executable, str(ROOT / "app.py")],
        cwd=tmp_path,
        env={"GRADIO_SERVER_PORT": "abc", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip() == (
        "omnivoice-onnx-server: error: GRADIO_SERVER_PORT='abc' (--port) is not a whole number"
    )
