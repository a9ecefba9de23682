"""A stranger's probe of the server, exactly as ``main`` starts it (``OMNIVOICE_API_KEY`` set,
``--mcp``, ``--wyoming``, a writable voice library, under an open-file limit of 1,024): one
request must not freeze it, hold its memory, exhaust its connections or flood its log.

Judged by what cannot be noise: the order requests finish in, counts (pieces the text worker
read, open file descriptors, log lines), and memory against a bound far from the baseline;
``bench/hardening.py`` measures the times and sizes for docs/reliability.md."""

from __future__ import annotations

import asyncio
import json
import resource
import shutil
import socket
import threading
import time

import httpx
import pytest
from gradio_client import Client, handle_file

from omnivoice_rt.limits import MAX_TEXT_CHARS
from tests.conftest import app_process, free_port, numeric_text, running_app

KEY = "probe-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
NOFILE = 1024

pytestmark = pytest.mark.skipif(
    shutil.which("prlimit") is None, reason="needs prlimit (util-linux)"
)


@pytest.fixture(scope="module")
def server(fp32_artifacts, tmp_path_factory):
    folder = tmp_path_factory.mktemp("hardening")
    (folder / "voices").mkdir()
    wyoming = free_port()
    args = [
        "--artifacts",
        str(fp32_artifacts),
        "--asr-model",
        "none",
        "--mcp",
        "--wyoming",
        f"tcp://127.0.0.1:{wyoming}",
        "--voices",
        str(folder / "voices"),
        "--voices-writable",
        "--header-timeout",
        "2",
        "--wyoming-idle-timeout",
        "3",
    ]
    log = folder / "server.log"
    limit = ("prlimit", f"--nofile={NOFILE}")
    with running_app(args, log, limit, HF_HUB_OFFLINE="1", OMNIVOICE_API_KEY=KEY) as url:
        yield url, wyoming, log


def speech(url: str, text: str, **body) -> httpx.Response:
    body = {"input": text, "response_format": "wav", **body}
    return httpx.post(f"{url}/v1/audio/speech", json=body, headers=AUTH, timeout=300)


def pieces_read(url: str) -> int:
    return httpx.get(f"{url}/health", timeout=30).json()["text_pieces_read"]


def server_rss(url: str) -> int:
    """The server's resident memory with its text worker's."""
    process = app_process(url)
    return sum(p.memory_info().rss for p in [process, *process.children(recursive=True)])


def test_the_raw_text_limit_refuses_before_any_text_is_read(server):
    url, wyoming, _ = server
    before = pieces_read(url)
    too_long = numeric_text(MAX_TEXT_CHARS + 1, 1)
    answer = speech(url, too_long)
    assert answer.status_code == 400
    assert f"text is {MAX_TEXT_CHARS + 1} characters long" in answer.json()["error"]["message"]
    client = Client(url, verbose=False)
    with pytest.raises(Exception, match=f"text is {MAX_TEXT_CHARS + 1} characters long"):
        client.predict(too_long, api_name="/synthesize")
    (event,) = wyoming_events(wyoming, {"type": "synthesize", "data": {"text": too_long}})
    assert event["code"] == "bad-request" and "characters long" in event["text"]
    assert pieces_read(url) == before  # nothing was read as words


def test_a_short_request_is_answered_while_a_long_text_is_read(server):
    """A text whose numbers make it too long is read piece by piece in the worker, off the
    server's interpreter lock: /health and a short request are answered meanwhile, and it is
    refused as soon as its words pass the limit."""
    url, _, _ = server
    finished, results = [], {}

    def call(name, function):
        results[name] = function()
        finished.append(name)

    before = pieces_read(url)
    long = threading.Thread(target=call, args=("long", lambda: speech(url, numeric_text(9_999, 2))))
    long.start()
    deadline = time.time() + 60
    while pieces_read(url) < before + 2:  # its reading is under way
        assert time.time() < deadline, "the long text was never read"
        time.sleep(0.05)
    call("health", lambda: httpx.get(f"{url}/health", timeout=60))
    call("short", lambda: speech(url, "I have 5 apples."))
    long.join(300)
    assert finished == ["health", "short", "long"], finished
    assert results["short"].status_code == 200
    assert results["long"].status_code == 400
    message = results["long"].json()["error"]["message"]
    assert f"over {MAX_TEXT_CHARS} characters long with its numbers read as words" in message
    # refused as its words passed the limit: about a fifth of the text was read
    assert pieces_read(url) - before < 0.6 * 9_999 / 200
    read = pieces_read(url)
    assert (
        speech(url, numeric_text(9_999, 2)).status_code == 400
    )  # the same text: refused from memory
    assert pieces_read(url) == read


def test_a_client_that_leaves_stops_its_text_being_read(server):
    url, _, _ = server
    before = pieces_read(url)
    with pytest.raises(httpx.TimeoutException):
        httpx.post(
            f"{url}/v1/audio/speech",
            json={"input": numeric_text(9_999, 3)},
            headers=AUTH,
            timeout=httpx.Timeout(60, read=1.5),
        )
    time.sleep(2)  # a piece under way when it left is finished
    stopped = pieces_read(url)
    time.sleep(3)
    assert pieces_read(url) == stopped > before
    assert speech(url, "Still here.").status_code == 200


def test_memory_goes_back_after_a_burst_of_long_texts(server):
    url, _, _ = server
    with_numbers = [numeric_text(10_000, 100 + n) for n in range(10)]
    threads = [threading.Thread(target=speech, args=(url, text)) for text in with_numbers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)
    assert speech(url, "The burst is over.").status_code == 200
    assert server_rss(url) < 1.5e9, f"{server_rss(url) / 1e6:.0f} MB"


def test_idle_wyoming_connections_leave_every_door_answering(server):
    """Under an open-file limit of 1,024, 1,100 idle Wyoming connections: past the door's limit
    each is refused at once (a 'busy' event), so the OpenAI door and Wyoming still answer."""
    url, wyoming, log = server
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < 1_500:
        pytest.skip(f"this test's process may open {hard} files; it needs 1,500")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4_096)), hard))
    idle = []
    try:
        for _ in range(1_100):
            idle.append(socket.create_connection(("127.0.0.1", wyoming), timeout=10))
        assert speech(url, "Still answering.").status_code == 200
        idle[-1].settimeout(10)
        refusal = read_wyoming_event(idle[-1])
        assert refusal["type"] == "error" and refusal["code"] == "busy" and refusal["closed"]
        server_fds = app_process(url).num_fds()
        assert server_fds < 400, server_fds
    finally:
        for connection in idle:
            connection.close()
    (event,) = wyoming_events(
        wyoming, {"type": "synthesize", "data": {"text": "Hi."}}, until="audio-stop"
    )
    assert event["type"] == "audio-stop"
    text = log.read_text()
    assert "Too many open files" not in text and "Traceback" not in text
    assert text.count("refused a Wyoming connection") == 1  # once a minute


def test_idle_and_slow_connections_are_closed(server):
    url, wyoming, _ = server
    slow = socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=30)
    slow.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # and never the rest
    assert slow.recv(100) == b""  # closed after --header-timeout
    silent = socket.create_connection(("127.0.0.1", wyoming), timeout=30)
    closing = read_wyoming_event(silent)  # after --wyoming-idle-timeout
    assert closing["type"] == "error" and closing["code"] == "idle" and closing["closed"]


def test_a_pipelined_request_is_answered_past_the_header_timeout(server):
    """Two requests in one packet: the second is answered however long it takes (here its text
    is read for longer than --header-timeout) and the connection is not cut under it."""
    url, _, _ = server
    body = json.dumps({"input": numeric_text(9_999, 4)}).encode()
    second = (
        b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Authorization: Bearer {KEY}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    before = pieces_read(url)
    with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=120) as both:
        both.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n" + second)
        answers = b""
        while answers.count(b"HTTP/1.1 ") < 2 or not answers.endswith(b"}"):
            chunk = both.recv(65536)
            assert chunk, f"the connection was closed after {answers.count(b'HTTP/1.1 ')} answers"
            answers += chunk
    assert b"HTTP/1.1 200" in answers and b"HTTP/1.1 400" in answers
    assert pieces_read(url) - before > 4  # read for longer than the header timeout


def test_library_writes_need_the_key_on_every_door(server, tmp_path):
    from omnivoice_build.equivalence import write_reference
    from tests.server.conftest import mcp_calls, text_of

    url, _, _ = server
    reference = write_reference(str(tmp_path / "me.wav"))
    client = Client(url, verbose=False)
    with pytest.raises(Exception, match="with its API key only"):
        client.predict("me", handle_file(reference), "Hi.", "Auto", api_name="/save_to_library")
    (result,) = mcp_calls(url, [("save_to_library", {"name": "me2", "ref_text": "Hi."})])
    assert result.isError and "with its API key only" in text_of(result)
    design = {"name": "storyteller", "instruct": "male, low pitch"}
    assert httpx.post(f"{url}/v1/audio/voices", json=design).status_code == 401
    assert httpx.post(f"{url}/v1/audio/voices", json=design, headers=AUTH).status_code == 201
    # built-in names in any case
    upper = httpx.post(f"{url}/v1/audio/voices", json={**design, "name": "AUTO"}, headers=AUTH)
    assert upper.status_code == 400 and "built-in" in upper.json()["error"]["message"]
    names = [entry["name"] for entry in client.predict(api_name="/list_voices")]
    assert "storyteller" in names and "me" not in names and "AUTO" not in names


def test_refusals_are_one_line_of_the_log_without_a_traceback(server):
    from tests.server.conftest import api_call, mcp_calls, text_of

    url, wyoming, log = server
    settings = ["fp32", 8, 2.0, 1.0, 2.0, 3, False, True, False, "balanced", True, None, None]
    settings += [None, None, None, None]  # the older names of guidance_scale and
    # postprocess_output, sample_rate and words
    no_meta = api_call(
        url, "clone", ["Hi.", {"path": "/etc/passwd"}, "hi", None, "Auto", *settings]
    )
    assert "event: error" in no_meta
    (private,) = mcp_calls(
        url, [("clone", {"text": "Hi.", "ref_audio": "http://127.0.0.1:1/a.wav", "ref_text": "hi"})]
    )
    assert private.isError and "public address" in text_of(private)
    nested = b'{"type": ' + b"[" * 30_000 + b"]" * 30_000 + b"}\n"
    (event,) = wyoming_events(wyoming, raw=nested)
    assert event["code"] == "bad-frame" and "nested too deeply" in event["text"]
    time.sleep(0.5)
    text = log.read_text()
    assert "Traceback" not in text and "Task exception was never retrieved" not in text
    assert "refused a request: 1 validation error for FileData" in text


@pytest.mark.parametrize(
    "field,value",
    [
        ("instructions", "female, " * 100_000),
        ("model", "m" * 100_000),
        ("response_format", "f" * 100_000),
        ("language", "l" * 100_000),
        ("preset", "p" * 100_000),
        ("voice", "v" * 100_000),
    ],
)
def test_replies_quote_a_short_prefix_of_what_they_refuse(server, field, value):
    url, _, _ = server
    answer = speech(url, "Hello.", **{field: value})
    assert answer.status_code in (400, 404) and len(answer.content) < 2_000, len(answer.content)


def test_the_openai_door_takes_json_from_programs_and_its_own_pages(server):
    url, _, _ = server
    body = json.dumps({"input": "Hello.", "response_format": "wav"})
    plain = httpx.post(
        f"{url}/v1/audio/speech", content=body, headers={**AUTH, "Content-Type": "text/plain"}
    )
    assert plain.status_code == 415
    cross = {**AUTH, "Content-Type": "application/json"}
    for headers in ({"Sec-Fetch-Site": "cross-site"}, {"Origin": "http://evil.example"}):
        answer = httpx.post(f"{url}/v1/audio/speech", content=body, headers={**cross, **headers})
        assert answer.status_code == 403 and answer.json()["error"]["code"] == "cross_site_request"
        deleted = httpx.delete(f"{url}/v1/audio/voices/storyteller", headers={**AUTH, **headers})
        assert deleted.status_code == 403
    own = {**cross, "Sec-Fetch-Site": "same-origin", "Origin": url}
    assert httpx.post(f"{url}/v1/audio/speech", content=body, headers=own).status_code == 200


def test_no_log_flood_when_file_descriptors_run_out(fp32_artifacts, tmp_path):
    """With the connection limits above the open-file limit, accepts fail for want of file
    descriptors: one line of the log a minute, no traceback, and the server answers afterwards."""
    args = ["--artifacts", str(fp32_artifacts), "--asr-model", "none"]
    wyoming = free_port()
    args += ["--wyoming", f"tcp://127.0.0.1:{wyoming}", "--wyoming-max-connections", "1000"]
    args += ["--max-connections", "1000"]
    log = tmp_path / "server.log"
    with running_app(args, log, ("prlimit", "--nofile=160"), HF_HUB_OFFLINE="1") as url:
        port = int(url.rsplit(":", 1)[1])
        held = []
        try:
            for n in range(300):
                address = ("127.0.0.1", (wyoming, port)[n % 2])
                try:
                    held.append(socket.create_connection(address, timeout=5))
                except TimeoutError:  # a listen queue full: the server accepts no more
                    break
            time.sleep(3)
        finally:
            for connection in held:
                connection.close()
        time.sleep(1)
        answer = httpx.post(f"{url}/v1/audio/speech", json={"input": "Hi."}, timeout=120)
        assert answer.status_code == 200
    text = log.read_text()
    assert "Too many open files" in text  # it did run out
    assert text.count("Too many open files") <= 4 and "Traceback" not in text


# ----------------------------------------------------------------------------- helpers


def wyoming_events(port: int, event: dict | None = None, raw: bytes = b"", until="error") -> list:
    """Send one event with the ``wyoming`` package's own client (or ``raw`` bytes, which no client
    would send); the last event answered, up to ``until`` or an error, read by its own reader
    (its data, with its type)."""
    from wyoming.client import AsyncTcpClient
    from wyoming.event import Event

    async def exchange():
        async with AsyncTcpClient("127.0.0.1", port) as client:
            if event is not None:
                await client.write_event(Event(type=event["type"], data=event["data"]))
            if raw:
                client._writer.write(raw)
                await client._writer.drain()
            while True:
                answer = await asyncio.wait_for(client.read_event(), 120)
                if answer.type in (until, "error"):
                    return [{**answer.data, "type": answer.type}]

    return asyncio.run(exchange())


def read_wyoming_event(connection: socket.socket) -> dict:
    """The next event on a plain socket, by the ``wyoming`` package's own reader (its data, with
    its type), and whether the connection was then closed."""
    from wyoming.event import read_event

    stream = connection.makefile("rb")
    answer = read_event(stream)
    return {**answer.data, "type": answer.type, "closed": stream.read() == b""}


def test_accept_retries_that_outlive_their_server_are_one_line():
    """asyncio's accept loop, out of descriptors, retries each second; retries still pending when
    the server stops fail on descriptor -1 (847 tracebacks once in a full run). As asyncio's
    handler logs them: the first without its traceback, the rest of the minute counted."""
    import logging
    import sys

    from omnivoice_rt.server.connections import OncePerMinute

    def record():
        try:
            raise ValueError("Invalid file descriptor: -1")
        except ValueError:
            return logging.LogRecord(
                "asyncio",
                logging.ERROR,
                __file__,
                1,
                "Exception in callback BaseSelectorEventLoop._start_serving(<function>)",
                None,
                sys.exc_info(),
            )

    quiet = OncePerMinute()
    first, second = record(), record()
    assert quiet.filter(first) and first.exc_info is None
    assert "Invalid file descriptor: -1" in first.getMessage()
    assert not quiet.filter(second)
    other = logging.LogRecord("asyncio", logging.ERROR, __file__, 1, "another", None, None)
    assert quiet.filter(other) and other.getMessage() == "another"
