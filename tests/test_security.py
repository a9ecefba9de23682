"""The server as an attacker meets it: started as the Space starts it (``python app.py``, the same
``main`` and mount), with ``OMNIVOICE_API_KEY`` set and MCP on, on 127.0.0.1.

Every door that takes a file (the page, gradio_client, the raw HTTP API, MCP) is asked for a
planted secret file and for ``/proc/self/environ`` (which holds the API key): neither may be
copied into Gradio's upload folder, nor served by ``/gradio_api/file=``, and no answer may name
the upload folder. Clients that go away stop their work (one piece, mid-stream, or while waiting
in line), bad bodies are 400s in OpenAI's shape, and the log has no traceback.
"""

from __future__ import annotations

import asyncio
import io
import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import quote

import httpx
import numpy as np
import pytest
import soundfile as sf
from gradio_client import Client, handle_file

from omnivoice_build.equivalence import write_reference
from tests.conftest import TRANSCRIPT, running_app
from tests.test_app import FIXED

ROOT = Path(__file__).resolve().parents[1]
KEY = "sk-secret-omnivoice-key"
MARK = b"PLANTED-SECRET-7f3a"
ONE_PIECE = (
    "This is a long sentence, said slowly and clearly, with many words in it to make the work last."
)
LONG = " ".join(
    f"This is sentence number {n} of a longer text, said slowly and clearly." for n in range(8)
)


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> Path:
    """A real wav outside every upload folder, with a secret after its samples."""
    folder = tmp_path_factory.mktemp("private")
    path = Path(write_reference(str(folder / "secret.wav")))
    path.write_bytes(path.read_bytes() + MARK)
    return path


@pytest.fixture(scope="module")
def server(cpu_artifacts, tiny_whisper, tmp_path_factory):
    folder = tmp_path_factory.mktemp("security")
    uploads, log = folder / "uploads", folder / "server.log"
    args = ["--artifacts", str(cpu_artifacts), "--asr-model", str(tiny_whisper), "--mcp"]
    with running_app(
        args, log, HF_HUB_OFFLINE="1", OMNIVOICE_API_KEY=KEY, GRADIO_TEMP_DIR=str(uploads)
    ) as url:
        yield url, uploads, log


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> str:
    return write_reference(str(tmp_path_factory.mktemp("reference") / "reference.wav"))


def file_data(path) -> dict:
    return {"path": str(path), "meta": {"_type": "gradio.FileData"}}


def leaked(uploads: Path) -> list[str]:
    """Files of the upload folder that hold the planted secret or the API key."""
    return [
        str(p)
        for p in uploads.rglob("*")
        if p.is_file() and (MARK in p.read_bytes() or KEY.encode() in p.read_bytes())
    ]


def page_call(url: str, elem_id: str, data: list) -> dict:
    """What the page's button ``elem_id`` gets back, called as the browser calls it (queue/join)."""
    config = httpx.get(f"{url}/config").json()
    button = next(
        c["id"] for c in config["components"] if c.get("props", {}).get("elem_id") == elem_id
    )
    index = next(
        i for i, d in enumerate(config["dependencies"]) if any(t[0] == button for t in d["targets"])
    )
    session = f"attacker-{index}-{time.monotonic_ns()}"
    body = {
        "data": data,
        "fn_index": index,
        "trigger_id": button,
        "session_hash": session,
        "event_data": None,
    }
    assert httpx.post(f"{url}/gradio_api/queue/join", json=body).status_code == 200
    with httpx.stream(
        "GET", f"{url}/gradio_api/queue/data", params={"session_hash": session}, timeout=120
    ) as events:
        for line in events.iter_lines():
            message = json.loads(line[5:]) if line.startswith("data:") else {}
            if message.get("msg") == "process_completed":
                return message
    raise AssertionError("the page's call never completed")


def mcp_calls(url: str, calls: list[tuple[str, dict]], headers: dict | None = None) -> list:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    async def session():
        async with streamablehttp_client(f"{url}/gradio_api/mcp/", headers=headers) as (
            read,
            write,
            _,
        ):
            async with ClientSession(read, write) as mcp:
                await mcp.initialize()
                return [await mcp.call_tool(name, arguments) for name, arguments in calls]

    return asyncio.run(session())


def text_of(result) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


# ----------------------------------------------------------------------------- files


def test_mcp_calls_the_page_here_whatever_the_first_request_says(server):
    """Mounted, Gradio's MCP would build its client of the page's API from the first request's
    headers; this server tells it its own address. (First in the module: the client is made once.)"""
    url, _, _ = server
    lying = {"X-Gradio-Server": "http://127.0.0.1:1/", "X-Forwarded-Host": "127.0.0.1:1"}
    call = ("synthesize", {"text": "Hi.", "seed": 1, "randomize_seed": False, "num_step": 4})
    (first,) = mcp_calls(url, [call], headers=lying)
    (second,) = mcp_calls(url, [call])
    assert not first.isError and not second.isError, (text_of(first), text_of(second))


def api_call(url: str, name: str, data: list) -> str:
    """The API endpoint ``name`` called over raw HTTP, as the issue's curl does: gradio_client would
    upload a path that exists on its own machine rather than name it."""
    # ASCII: a lone surrogate goes as its escape, as a browser's JSON does
    body = json.dumps({"data": data})
    event = httpx.post(
        f"{url}/gradio_api/call/{name}", content=body, headers={"Content-Type": "application/json"}
    )
    event = event.json()["event_id"]
    return httpx.get(f"{url}/gradio_api/call/{name}/{event}", timeout=60).text


def test_no_door_copies_or_serves_a_file_it_was_not_given(server, planted):
    url, uploads, _ = server
    settings = [8, 2.0, 1.0, 2.0, 3, False, True, False, "balanced"]
    answers = []
    for target in (planted, Path("/proc/self/environ")):
        given = file_data(target)
        for name, data in (
            ("clone", ["Hi.", given, "Hi.", None, "Auto", "int4", *settings]),
            ("clone", ["Hi.", None, "", given, "Auto", "int4", *settings]),
            ("save_voice_prompt", [given, "Hi.", "int4"]),
            ("transcribe", [given, "Auto"]),
        ):
            answer = api_call(url, name, data)
            assert "event: error" in answer, answer
            answers.append(answer)
        # the page's buttons, as the browser calls them
        for elem_id, data in (
            ("clone-generate", ["Hi.", given, "Hi.", None, "Auto", "int4", *settings, False]),
            ("ref-audio", [given, "Auto"]),
        ):
            answer = page_call(url, elem_id, data)
            assert not answer["success"], answer
            answers.append(json.dumps(answer))
        # MCP: a path, and this server's file URL for it.
        own = f"{url}/gradio_api/file={quote(str(target))}"
        results = mcp_calls(
            url,
            [
                ("clone", {"text": "Hi.", "ref_audio": str(target), "ref_text": "Hi."}),
                ("clone", {"text": "Hi.", "voice_prompt": own}),
                ("transcribe", {"ref_audio": str(target)}),
                ("save_voice_prompt", {"ref_audio": own, "ref_text": "Hi."}),
                ("transcribe", {"ref_audio": given}),  # a FileData object, not a string
            ],
        )
        assert all(result.isError for result in results)
        answers += [text_of(result) for result in results]
        assert httpx.get(own).status_code == 403
    # A path relative to the server's folder: refused without saying where that folder is.
    answers.append(api_call(url, "transcribe", [file_data("tests/conftest.py"), "Auto"]))
    assert leaked(uploads) == []
    # No answer points at a copy, or says where the server runs.
    assert not [a for a in answers if str(uploads) in a or str(ROOT) in a], answers
    for path in ("/etc/passwd", str(planted), f"{uploads}/../{planted.parent.name}/{planted.name}"):
        assert httpx.get(f"{url}/gradio_api/file={path}").status_code == 403
    for proxied in ("https://example.com/a.wav", "http%3A//127.0.0.1:1/x"):  # nobody's proxy
        refused = httpx.get(f"{url}/gradio_api/file={proxied}")  # before Gradio tries to fetch it
        assert (refused.status_code, refused.text) == (403, "File not allowed."), refused.text


def test_a_file_that_is_not_audio_is_refused_without_naming_its_copy(server, tmp_path):
    url, uploads, _ = server
    junk = tmp_path / "notes.wav"
    junk.write_bytes(b"just some text, not audio " * 40)
    client = Client(url, verbose=False)
    for call in (
        lambda: client.predict(handle_file(str(junk)), "Auto", api_name="/transcribe"),
        lambda: client.predict(
            "Hi.", handle_file(str(junk)), "Hi.", None, "Auto", "int4", **FIXED, api_name="/clone"
        ),
    ):
        with pytest.raises(Exception, match="could not read the reference audio") as caught:
            call()
        assert str(uploads) not in str(caught.value) and "notes.wav" not in str(caught.value)


def test_uploads_stay_in_the_upload_folder_and_the_api_schema_is_not_served(server):
    url, uploads, _ = server
    response = httpx.post(
        f"{url}/gradio_api/upload", files={"files": ("../../../../escaped.txt", b"hello")}
    )
    (path,) = response.json()
    assert (
        Path(path).resolve().is_relative_to(uploads.resolve())
        and Path(path).read_bytes() == b"hello"
    )
    assert not list(uploads.parent.parent.glob("escaped.txt"))
    # with a key set as without, nothing to read there
    for route in ("/openapi.json", "/docs", "/redoc"):
        assert httpx.get(f"{url}{route}").status_code == 404


def test_mcp_tools_take_uploads_leave_optional_files_out_and_pass_results_on(server, reference):
    url, _, _ = server
    uploaded = httpx.post(
        f"{url}/gradio_api/upload", files={"files": open(reference, "rb")}
    ).json()[0]
    clone = {
        "text": "Hello from MCP.",
        "ref_text": TRANSCRIPT,
        "seed": 5,
        "randomize_seed": False,
        "num_step": 4,
        "duration": 1.0,
        "precision": "int4",
    }
    results = mcp_calls(
        url,
        [
            ("clone", {**clone, "ref_audio": uploaded}),  # voice_prompt left out
            ("clone", {**clone, "ref_audio": uploaded, "voice_prompt": ""}),  # or empty
            ("transcribe", {"ref_audio": uploaded}),
            ("save_voice_prompt", {"ref_audio": uploaded, "ref_text": TRANSCRIPT}),
        ],
    )
    assert not [text_of(r) for r in results if r.isError]
    assert TRANSCRIPT in text_of(results[2])
    prompt_url = text_of(results[3]).strip()
    assert prompt_url.startswith(f"{url}/gradio_api/file=") and prompt_url.endswith(".npz")
    # the server's own URL
    (again,) = mcp_calls(url, [("clone", {**clone, "voice_prompt": prompt_url})])
    assert not again.isError, text_of(again)

    def audio(result) -> np.ndarray:
        text = text_of(result)
        link = text[text.index(f"{url}/gradio_api/file=") :].split("'")[0]
        return sf.read(io.BytesIO(httpx.get(link).content), dtype="int16")[0]

    direct, _ = Client(url, verbose=False).predict(
        "Hello from MCP.",
        handle_file(reference),
        TRANSCRIPT,
        None,
        "Auto",
        "int4",
        num_step=4,
        duration=1.0,
        seed=5,
        randomize_seed=False,
        api_name="/clone",
    )
    expected = sf.read(direct, dtype="int16")[0]
    for result in (results[0], results[1], again):
        np.testing.assert_array_equal(audio(result), expected)


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "body,param,words",
    [
        (b"[" * 10_000 + b"]" * 10_000, None, "nested too deeply"),
        (b'{"input": "Hello \\ud800 world"}', "input", "U+D800"),
        (b'{"input": "Hello.", "speed": 1e-310}', "speed", "from 0.1 to 10"),
        (b'{"input": "Hello.", "speed": 1e-300}', "speed", "got 1e-300"),
        (b'{"input": "Hello.", "speed": 1' + b"0" * 400 + b"}", "speed", "from 0.1 to 10"),
        (b'{"input": "Hello.", "language": "en\\udc00"}', "language", "U+DC00"),
        (b'{"input": "Hello.", "instructions": "\\ud83d"}', "instructions", "U+D83D"),
    ],
)
def test_bad_bodies_are_400s_with_short_messages(server, body, param, words):
    url, _, _ = server
    response = httpx.post(
        f"{url}/v1/audio/speech",
        content=body,
        headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
    )
    error = response.json()["error"]
    assert (
        response.status_code == 400
        and error["type"] == "invalid_request_error"
        and error["param"] == param
    )
    assert words in error["message"] and len(error["message"]) < 300, error


def test_wrong_types_through_gradio_client_are_messages(server, reference):
    url, _, log = server
    client = Client(url, verbose=False)
    with pytest.raises(Exception, match="language.* must be a string"):
        client.predict("Hi.", 5, "", "int4", **FIXED, api_name="/synthesize")
    with pytest.raises(Exception, match="language.* must be a string"):
        client.predict(handle_file(reference), 5, api_name="/transcribe")
    answer = api_call(
        url,
        "synthesize",
        ["Hi \ud800 there.", "Auto", "", "int4", *FIXED.values(), "balanced", True, None, None],
    )
    assert "event: error" in answer and "U+D800" in answer, answer
    assert "Traceback" not in log.read_text()


def test_lone_surrogates_are_refused_by_the_library_and_the_cli(cpu_artifacts):
    from omnivoice_rt.model import OmniVoiceONNX

    voice = OmniVoiceONNX.load(cpu_artifacts, "int4")
    for kwargs in (
        {"text": "Hi \ud800."},
        {"text": "Hi.", "instruct": "female\udfff"},
        {"text": "Hi.", "language": "\ud800"},
    ):
        with pytest.raises(ValueError, match="surrogate"):
            voice.generate(**kwargs)
    # A command line's undecodable bytes arrive as lone surrogates (surrogateescape).
    command = [
        sys.executable.encode(),
        b"-m",
        b"omnivoice_rt",
        b"synthesize",
        b"--model-dir",
        str(cpu_artifacts).encode(),
        b"--precision",
        b"int4",
        b"--text",
        b"Hello \xff world",
        b"--output",
        b"/dev/null",
    ]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 2 and "surrogate" in done.stderr and "Traceback" not in done.stderr, (
        done.stderr
    )


# ----------------------------------------------------------------------------- clients that leave


def stopped_after(log: Path, since: int) -> list[int]:
    lines = log.read_text().splitlines()[since:]
    return [
        int(line.split("after step ")[1].split(" ")[0])
        for line in lines
        if "stopped an abandoned synthesis" in line
    ]


def log_lines(log: Path) -> int:
    return len(log.read_text().splitlines())


def speech(url: str, text: str, timeout: float, **fields) -> httpx.Response:
    body = {"model": "tts-1-hd", "voice": "auto", "input": text, "response_format": "pcm", **fields}
    return httpx.post(
        f"{url}/v1/audio/speech",
        json=body,
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=timeout,
    )


def streamed_long_text(url: str):
    """A long text, sentence by sentence at 32 steps a piece, as a stream the caller reads."""
    body = {"model": "tts-1-hd", "voice": "auto", "input": LONG, "response_format": "pcm"}
    return httpx.stream(
        "POST",
        f"{url}/v1/audio/speech",
        json={**body, "sentences": True},
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=120,
    )


def wait_for(condition, seconds: float = 60) -> None:
    deadline = time.time() + seconds
    while not condition():
        assert time.time() < deadline, "timed out"
        time.sleep(0.05)


def test_a_one_piece_request_whose_client_left_stops(server):
    """The client gives up while its only piece is being made: the synthesis stops at its next
    step, not after all 32."""
    url, _, log = server
    speech(url, "Warm up.", 60)
    since = log_lines(log)
    with pytest.raises(httpx.TimeoutException):
        # said slowly: about 20 s of speech, still one piece, more than a second's work on a fast CPU
        speech(url, ONE_PIECE, timeout=1.0, speed=0.3)
    wait_for(lambda: stopped_after(log, since))
    assert stopped_after(log, since)[0] < 32
    assert speech(url, "Next.", 60).status_code == 200


def test_a_client_that_leaves_mid_stream_stops_the_piece_being_made(server):
    url, _, log = server
    since = log_lines(log)
    with streamed_long_text(url) as response:
        next(response.iter_raw())  # the first piece is out; the second is being made
    wait_for(lambda: stopped_after(log, since))
    assert stopped_after(log, since)[0] < 64  # within the second piece of 32 steps


def test_clients_that_leave_while_waiting_leave_the_line(server):
    """One request is served (its client holds the stream); ten wait, then give up. They leave
    the line at once: a newcomer finds only the one being served ahead of it."""
    url, _, log = server
    since = log_lines(log)
    with streamed_long_text(url) as served:
        chunks = served.iter_raw()
        next(chunks)

        def leave():
            with pytest.raises(httpx.TimeoutException):
                speech(url, "Me too.", timeout=1.0)

        leavers = [threading.Thread(target=leave) for _ in range(10)]
        for thread in leavers:
            thread.start()
        for thread in leavers:
            thread.join(30)
        wait_for(
            lambda: (
                sum("left the line" in line for line in log.read_text().splitlines()[since:]) == 10
            )
        )
        result = {}
        newcomer = threading.Thread(
            target=lambda: result.update(r=speech(url, "Now me.", 120, model="tts-1"))
        )
        newcomer.start()
        rest = b"".join(chunks)  # the served one goes on to its end
        newcomer.join(120)
    assert len(rest) > 0
    assert result["r"].status_code == 200 and result["r"].headers["x-queue-ahead"] == "1"


def test_a_client_that_leaves_while_sending_its_body_is_one_line_of_the_log(server):
    url, _, log = server
    host, port = url.removeprefix("http://").split(":")
    for path in ("/v1/audio/speech", "/gradio_api/upload"):
        with socket.create_connection((host, int(port))) as connection:
            connection.sendall(
                f"POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {KEY}\r\nContent-Type: "
                "multipart/form-data; boundary=b\r\nContent-Length: 100000\r\n\r\n--b\r\n".encode()
            )
            time.sleep(0.3)
    wait_for(lambda: log.read_text().count("went away while sending") >= 1)
    assert speech(url, "Still here.", 60).status_code == 200
    assert "Traceback" not in log.read_text() and "Exception in ASGI" not in log.read_text()


# ----------------------------------------------------------------------------- after a stop


def test_a_normal_stop_leaves_no_upload_folder(cpu_artifacts, tmp_path):
    temp = tmp_path / "tmp"
    temp.mkdir()
    with running_app(
        ["--artifacts", str(cpu_artifacts), "--asr-model", "none"],
        tmp_path / "app.log",
        HF_HUB_OFFLINE="1",
        TMPDIR=str(temp),
    ) as url:
        (folder,) = temp.glob("omnivoice-uploads-*")
        big = tmp_path / "big.wav"
        big.write_bytes(b"RIFF" + bytes(21 << 20))  # over the 20 MB limit: refused
        assert (
            httpx.post(f"{url}/gradio_api/upload", files={"files": open(big, "rb")}).status_code
            == 413
        )
        assert (
            httpx.post(f"{url}/gradio_api/upload", files={"files": ("a.wav", b"x")}).status_code
            == 200
        )
    assert not folder.exists(), sorted(folder.rglob("*"))


def test_a_named_upload_folder_is_pruned_of_what_refused_uploads_leave(tmp_path, monkeypatch):
    """Only what Gradio names: its temporary uploads and hash folders; another program's empty
    files and folders in a shared folder stay."""
    from omnivoice_rt.server.gradio_guard import prune_uploads

    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path))
    hashed = "0123456789abcdef" * 4
    (tmp_path / hashed).mkdir()
    (tmp_path / hashed / "empty.wav").write_bytes(b"")
    (tmp_path / "tmpk2j3h4").write_bytes(b"")
    (tmp_path / ("fedcba9876543210" * 4)).mkdir()
    (tmp_path / ("fedcba9876543210" * 4) / "result.wav").write_bytes(b"RIFF")
    (tmp_path / "someone-else").mkdir()
    (tmp_path / "someone-else.lock").write_bytes(b"")
    prune_uploads()
    left = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*"))
    kept = "fedcba9876543210" * 4
    assert left == [kept, f"{kept}/result.wav", "someone-else", "someone-else.lock"], left


def test_the_server_will_not_start_if_gradio_would_copy_any_file():
    import gradio as gr

    from omnivoice_rt.server.gradio_guard import check_file_guard

    with gr.Blocks() as demo:
        gr.Textbox()
    with pytest.raises(RuntimeError, match="hand out any file"):
        check_file_guard(demo)  # not marked launched: Gradio checks nothing
    demo.has_launched = True
    check_file_guard(demo)


def test_a_request_that_leaves_the_line_hands_nothing_to_nobody():
    """The line itself: a waiter whose client left raises Cancelled and drops out; one that leaves
    as the slot is handed to it passes the slot on; the rest are served in order."""
    from omnivoice_rt.errors import Cancelled
    from omnivoice_rt.server.line import Line

    line = Line(slots=1, max_waiting=5)
    gone = {"a": threading.Event(), "b": threading.Event(), "c": threading.Event()}
    served, cancelled = [], []

    def wait(name):
        try:
            with line.turn(should_stop=gone[name].is_set):
                served.append(name)
        except Cancelled:
            cancelled.append(name)

    with line.turn():
        threads = {}
        for name in gone:
            waiting = line.waiting
            threads[name] = threading.Thread(target=wait, args=(name,))
            threads[name].start()
            wait_for(lambda: line.waiting > waiting, 10)  # noqa: B023 - each waits for its own
        gone["a"].set()
        threads["a"].join(5)
        assert cancelled == ["a"] and line.waiting == 2
        gone["b"].set()  # as the slot is handed over: either way, it goes on to c
    threads["b"].join(5)
    threads["c"].join(5)
    assert served == ["c"] and cancelled == ["a", "b"] and line.waiting == 0
    with line.turn():  # the slot came back
        with pytest.raises(ZeroDivisionError):  # a should_stop that fails leaves the line too

            def broken():
                raise ZeroDivisionError

            with line.turn(should_stop=broken):
                pass
        assert line.waiting == 0
    with line.turn():
        pass
