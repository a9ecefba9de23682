"""Clients that go away stop their work, on every door: one piece being made, mid-stream, while
waiting in the line, while sending a body (the OpenAI door), a cancelled gradio_client job; and
the line itself hands a slot to nobody who left. (A text being read as words whose client left:
test_hardening.py.)"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest
import soundfile as sf
from gradio_client import Client

from tests.conftest import FIXED
from tests.server.conftest import KEY

ONE_PIECE = (
    "This is a long sentence, said slowly and clearly, with many words in it to make the work last."
)
LONG = " ".join(
    f"This is sentence number {n} of a longer text, said slowly and clearly." for n in range(8)
)


@pytest.fixture(scope="module")
def server(secured_server):
    return secured_server


def stopped_after(log: Path, since: int) -> list[int]:
    lines = log.read_text().splitlines()[since:]
    return [
        int(line.split("after step ")[1].split(" ")[0])
        for line in lines
        if "stopped an abandoned synthesis" in line
    ]


def log_lines(log: Path) -> int:
    return len(log.read_text().splitlines())


def client(n: int) -> dict:
    """The headers of client number ``n``: each its own address, as a proxy on this machine
    (which the server believes) reports it, so that one client's share does not bound them."""
    return {"Authorization": f"Bearer {KEY}", "X-Forwarded-For": f"203.0.113.{n}"}


def speech(url: str, text: str, timeout: float, n: int = 0, **fields) -> httpx.Response:
    body = {"model": "tts-1-hd", "voice": "auto", "input": text, "response_format": "pcm", **fields}
    return httpx.post(f"{url}/v1/audio/speech", json=body, headers=client(n), timeout=timeout)


def streamed_long_text(url: str, n: int = 0):
    """A long text, sentence by sentence at 32 steps a piece, as a stream the caller reads."""
    body = {"model": "tts-1-hd", "voice": "auto", "input": LONG, "response_format": "pcm"}
    return httpx.stream(
        "POST",
        f"{url}/v1/audio/speech",
        json={**body, "sentences": True},
        headers=client(n),
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
    """Every place under way is held (``--concurrency`` streams whose clients hold them); ten
    more wait, then give up. They leave the line at once: a newcomer finds only the ones being
    served ahead of it. Each request is a client of its own."""
    url, _, log = server
    since = log_lines(log)
    slots = httpx.get(f"{url}/health").json()["slots"]
    with contextlib.ExitStack() as held:
        streams = [held.enter_context(streamed_long_text(url, n)) for n in range(slots)]
        chunks = [stream.iter_raw() for stream in streams]
        for each in chunks:
            next(each)

        def leave(n):
            with pytest.raises(httpx.TimeoutException):
                speech(url, "Me too.", 1.0, n)

        leavers = [threading.Thread(target=leave, args=(100 + n,)) for n in range(10)]
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
            target=lambda: result.update(r=speech(url, "Now me.", 120, 200, model="tts-1"))
        )
        newcomer.start()
        rest = b"".join(chunks[0])  # the first served one goes on to its end: a place frees
        newcomer.join(120)
    assert len(rest) > 0
    assert result["r"].status_code == 200
    assert result["r"].headers["x-queue-ahead"] == str(slots)


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


def test_an_abandoned_request_stops_and_the_next_one_starts(server):
    """A long synthesis whose client cancels stops at its next step (the server log says after
    which), and the request behind it runs at once instead of after all 64 steps."""
    url, _, log = server
    client = Client(url, verbose=False)
    long = client.submit(
        "A long one.",
        "Auto",
        "",
        "int4",
        **{**FIXED, "num_step": 64, "duration": 30.0},
        api_name="/synthesize",
    )
    deadline = time.time() + 60
    started_at = 0
    while time.time() < deadline and started_at < 2:
        progress = long.status().progress_data
        started_at = round((progress[0].progress or 0) * 64) if progress else 0
        time.sleep(0.05)
    assert started_at >= 2, "the long synthesis never reported progress"
    long.cancel()
    path, _, _ = Client(url, verbose=False).predict(
        "Next.", "Auto", "", "int4", **FIXED, api_name="/synthesize"
    )
    assert sf.read(path)[1] == 24000
    lines = [
        line for line in log.read_text().splitlines() if "stopped an abandoned synthesis" in line
    ]
    assert lines, log.read_text()[-2000:]
    stopped_after = int(lines[-1].split("after step ")[1].split(" ")[0])
    assert started_at <= stopped_after < 64 and stopped_after <= started_at + 6, (
        started_at,
        stopped_after,
    )
