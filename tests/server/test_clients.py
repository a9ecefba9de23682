"""One client cannot take the server (``line.ClientLine``, ``clients.py``): a client is its
address, behind a proxy the address the proxy reports where the server believes the proxy;
its requests beyond ``--per-client`` wait while other clients' pass them, through every door.
Real servers over loopback, the requests as the official clients send them."""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import pytest
from wyoming.event import async_read_event, async_write_event
from wyoming.tts import Synthesize

from omnivoice_rt.server.clients import client_key
from tests.conftest import ROOT, free_port, running_app
from tests.server.conftest import mcp_calls, text_of

LONG = " ".join(f"This is sentence number {n} of a long text, said slowly." for n in range(10))
A, B = "203.0.113.7", "198.51.100.4"  # documentation addresses (RFC 5737)


@pytest.mark.parametrize(
    "address, client",
    [
        ("203.0.113.7", "203.0.113.7"),
        ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),  # one host's /64 is one client
        ("2001:db8:1:2:bbbb::9", "2001:db8:1:2::/64"),
        ("::ffff:203.0.113.7", "203.0.113.7"),  # IPv4 on a dual-stack socket
        ("testclient", "testclient"),
        ("x" * 300, "x" * 64),
        (None, None),
        ("", None),
    ],
)
def test_a_client_is_its_address_an_ipv6_client_its_network(address, client):
    assert client_key(address) == client


def test_a_space_believes_its_proxy_from_the_private_networks_alone():
    """app.py on a Space: X-Forwarded-For believed from where a Space's proxy connects (a
    private address), read as uvicorn reads FORWARDED_ALLOW_IPS; never from a public one."""
    import importlib.util

    from uvicorn.middleware.proxy_headers import _TrustedHosts

    spec = importlib.util.spec_from_file_location("space_app", ROOT / "app.py")
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)  # not as __main__: nothing starts
    trusted = _TrustedHosts(app.SPACE_PROXIES)
    for proxy in ("10.20.30.40", "172.20.0.5", "192.168.1.1", "fd12::1", "127.0.0.1"):
        assert proxy in trusted, proxy
    for visitor in ("203.0.113.7", "8.8.8.8", "2001:db8::1", "172.32.0.1"):
        assert visitor not in trusted, visitor


def health(url: str) -> dict:
    return httpx.get(f"{url}/health", timeout=10).json()


def wait_for(condition, seconds: float = 60) -> None:
    deadline = time.time() + seconds
    while not condition():
        assert time.time() < deadline, "timed out"
        time.sleep(0.02)


class Speaking:
    """Requests to the OpenAI door in threads, each from ``local`` (an address of this machine:
    127.0.0.2 is another peer than 127.0.0.1) with ``X-Forwarded-For: forwarded``."""

    def __init__(self, url: str):
        self.url, self.done, self.threads, self.answers = url, [], [], {}

    def send(self, name, forwarded, text=LONG, preset="best", local="127.0.0.1") -> None:
        def run():
            body = {"model": "omnivoice", "input": text, "voice": "auto", "seed": 1}
            transport = httpx.HTTPTransport(local_address=local)
            with httpx.Client(transport=transport, timeout=300) as client:
                answer = client.post(
                    f"{self.url}/v1/audio/speech",
                    json={**body, "response_format": "pcm", "preset": preset},
                    headers={"X-Forwarded-For": forwarded},
                )
            self.answers[name] = answer
            self.done.append(name)

        self.threads.append(threading.Thread(target=run))
        self.threads[-1].start()

    def join(self) -> None:
        for thread in self.threads:
            thread.join(300)
        assert all(answer.status_code == 200 for answer in self.answers.values()), self.answers


def test_a_client_holds_its_share_and_another_client_passes_its_surplus(app_server):
    """Four long texts of one client (the default: 4 generations, 2 a client's): two under way,
    two waiting although two slots are free; another client's short text is served at once and
    ends before the first client's third has begun. X-Forwarded-For comes from 127.0.0.1, which
    the server believes by default."""
    assert (health(app_server)["slots"], health(app_server)["per_client"]) == (4, 2)
    speaking = Speaking(app_server)
    for n in range(4):
        speaking.send(f"a{n}", A)
    wait_for(lambda: (health(app_server)["serving"], health(app_server)["waiting"]) == (2, 2))
    speaking.send("b", B, "Hi there.", "balanced")
    wait_for(lambda: "b" in speaking.done)
    assert speaking.answers["b"].headers["X-Queue-Ahead"] == "0"
    assert not {"a2", "a3"} & set(speaking.done)
    speaking.join()
    assert set(speaking.done) == {"a0", "a1", "a2", "a3", "b"}
    assert (health(app_server)["serving"], health(app_server)["waiting"]) == (0, 0)


def test_the_page_api_counts_its_caller_as_the_same_client(app_server):
    """gradio_client's call (the page's API) from the client that already has two texts under
    way waits for them although two slots are free."""
    from gradio_client import Client

    speaking = Speaking(app_server)
    for n in range(2):
        speaking.send(f"a{n}", A)
    wait_for(lambda: health(app_server)["serving"] == 2)
    page = Client(app_server, headers={"X-Forwarded-For": A}, verbose=False)
    job = page.submit("Hi there.", api_name="/synthesize")
    wait_for(lambda: health(app_server)["waiting"] == 1)
    assert health(app_server)["serving"] == 2
    audio, line, _captions = job.result(timeout=300)
    speaking.join()
    assert audio and "seed" in line


@pytest.fixture(scope="module")
def proxied_server(cpu_artifacts, tmp_path_factory):
    """A server behind one proxy, 127.0.0.2 (``--forwarded-allow-ips``): X-Forwarded-For is
    believed from it, not from 127.0.0.1. Two generations, one a client's; MCP and Wyoming on:
    yields (url, Wyoming's port)."""
    log = tmp_path_factory.mktemp("proxied") / "server.log"
    port = free_port()
    args = ["--artifacts", str(cpu_artifacts), "--asr-model", "none", "--mcp"]
    args += ["--concurrency", "2", "--per-client", "1", "--forwarded-allow-ips", "127.0.0.2"]
    args += ["--wyoming", f"tcp://127.0.0.1:{port}"]
    with running_app(args, log, HF_HUB_OFFLINE="1") as url:
        yield url, port


@pytest.mark.parametrize("proxy, clients", [("127.0.0.2", 2), ("127.0.0.1", 1)])
def test_a_forwarded_address_is_believed_from_the_trusted_proxy_alone(
    proxied_server, proxy, clients
):
    proxied_server, _ = proxied_server
    """Two texts named by X-Forwarded-For as two clients: from the proxy, two clients, both
    under way; from any other address, one client (the address they came from): the second
    waits for the first although a slot is free."""
    speaking = Speaking(proxied_server)
    speaking.send("a", A, local=proxy)
    wait_for(lambda: health(proxied_server)["serving"] == 1)
    speaking.send("b", B, "Hi there.", "balanced", local=proxy)
    if clients == 2:
        wait_for(lambda: "b" in speaking.done)
        assert speaking.answers["b"].headers["X-Queue-Ahead"] == "0" and "a" not in speaking.done
    else:
        wait_for(lambda: health(proxied_server)["waiting"] == 1)
        assert health(proxied_server)["serving"] == 1  # a slot free, and b waits for a
    speaking.join()
    assert speaking.done == (["b", "a"] if clients == 2 else ["a", "b"])


def test_an_mcp_client_is_its_own_address_not_the_loopback_call(proxied_server):
    """MCP reaches the page's API through Gradio's call from 127.0.0.1: the tool's request is
    still the MCP client's (127.0.0.3, headers forged as it likes), so it waits behind that
    client's own request; judged by the loopback call, it would have taken the free slot."""
    proxied_server, _ = proxied_server
    speaking = Speaking(proxied_server)
    speaking.send("a", A, local="127.0.0.3")
    wait_for(lambda: health(proxied_server)["serving"] == 1)
    results = []
    forged = {"X-Forwarded-For": B, "X-Omnivoice-Client": B, "X-Omnivoice-Hop": "guess"}
    call = [("synthesize", {"text": "Hi there.", "seed": 2})]
    tool = threading.Thread(
        target=lambda: results.extend(
            mcp_calls(proxied_server, call, headers=forged, local_address="127.0.0.3")
        )
    )
    tool.start()
    wait_for(lambda: health(proxied_server)["waiting"] == 1)  # behind its own client's
    assert health(proxied_server)["serving"] == 1
    tool.join(300)
    speaking.join()
    assert results and not results[0].isError, text_of(results[0])


def test_a_wyoming_connection_is_its_peer(proxied_server):
    """A Wyoming connection from 127.0.0.3, whose HTTP request holds that client's one slot,
    waits for it although a slot is free."""
    url, port = proxied_server
    speaking = Speaking(url)
    speaking.send("a", A, local="127.0.0.3")
    wait_for(lambda: health(url)["serving"] == 1)

    async def synthesize() -> list[str]:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, local_addr=("127.0.0.3", 0)
        )
        await async_write_event(Synthesize(text="Hi there.").event(), writer)
        types = []
        while not types or types[-1] not in ("audio-stop", "error"):
            types.append((await async_read_event(reader)).type)
        writer.close()
        return types

    heard = []
    wyoming = threading.Thread(target=lambda: heard.extend(asyncio.run(synthesize())))
    wyoming.start()
    wait_for(lambda: health(url)["waiting"] == 1)  # behind its own client's
    assert health(url)["serving"] == 1
    wyoming.join(300)
    speaking.join()
    assert heard[0] == "audio-start" and heard[-1] == "audio-stop"
