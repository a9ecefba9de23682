"""The servers several files of tests/server/ share, started once a session, and their helpers."""

from __future__ import annotations

import asyncio
import json

import httpx
import numpy as np
import pytest
from wyoming.client import AsyncTcpClient
from wyoming.event import Event
from wyoming.info import Describe, Info

from omnivoice_rt.audio.formats import pcm16
from omnivoice_rt.request import DOOR_PRESET, Request
from tests.conftest import free_port, running_app, save_narrator

KEY = "sk-secret-omnivoice-key"


@pytest.fixture(scope="session")
def secured_server(cpu_artifacts, tiny_whisper, tmp_path_factory):
    """``python app.py`` as the Space starts it, with ``OMNIVOICE_API_KEY`` set and MCP on: (url,
    upload folder, log)."""
    folder = tmp_path_factory.mktemp("security")
    uploads, log = folder / "uploads", folder / "server.log"
    args = ["--artifacts", str(cpu_artifacts), "--asr-model", str(tiny_whisper), "--mcp"]
    with running_app(
        args, log, HF_HUB_OFFLINE="1", OMNIVOICE_API_KEY=KEY, GRADIO_TEMP_DIR=str(uploads)
    ) as url:
        yield url, uploads, log


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


def mcp_calls(
    url: str, calls: list[tuple[str, dict]], headers: dict | None = None, local_address=None
) -> list:
    """The official MCP client's calls, in one session (from ``local_address``, such as
    127.0.0.3, where given: another address of this machine)."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    def client(headers=None, timeout=None, auth=None):
        transport = httpx.AsyncHTTPTransport(local_address=local_address)
        return httpx.AsyncClient(headers=headers, timeout=timeout, auth=auth, transport=transport)

    async def session():
        async with streamablehttp_client(
            f"{url}/gradio_api/mcp/", headers=headers, httpx_client_factory=client
        ) as (read, write, _):
            async with ClientSession(read, write) as mcp:
                await mcp.initialize()
                return [await mcp.call_tool(name, arguments) for name, arguments in calls]

    return asyncio.run(session())


def text_of(result) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


# ----------------------------------------------------------------------------- the voice library's server

LIBRARY_KEY = "sk-test-wyoming"


@pytest.fixture(scope="session")
def voices_dir(cpu_artifacts, tmp_path_factory):
    return save_narrator(tmp_path_factory.mktemp("library"), cpu_artifacts)


@pytest.fixture(scope="session")
def wyoming_server(cpu_artifacts, tiny_whisper, voices_dir, tmp_path_factory):
    """The app with its Wyoming door, a writable voice library and an API key; yields (url, port, log)."""
    log = tmp_path_factory.mktemp("wyoming") / "server.log"
    port = free_port()
    args = [
        *("--artifacts", str(cpu_artifacts), "--asr-model", str(tiny_whisper)),
        *("--voices", str(voices_dir), "--voices-writable"),
        *("--wyoming", f"tcp://127.0.0.1:{port}", "--mcp"),
        *("--wyoming-zeroconf", f"omnivoice-test-{port}"),
        *("--concurrency", "1"),  # the Wyoming tests assert the line's order of arrival
    ]
    with running_app(args, log, HF_HUB_OFFLINE="1", OMNIVOICE_API_KEY=LIBRARY_KEY) as url:
        yield url, port, log


@pytest.fixture(scope="session")
def keyless_server(cpu_artifacts, tiny_whisper, voices_dir, tmp_path_factory):
    """The same app without an API key: the page and MCP may write to its library (the
    library's rule); yields (url, port, log)."""
    log = tmp_path_factory.mktemp("keyless") / "server.log"
    port = free_port()
    args = [
        *("--artifacts", str(cpu_artifacts), "--asr-model", str(tiny_whisper)),
        *("--voices", str(voices_dir), "--voices-writable"),
        *("--wyoming", f"tcp://127.0.0.1:{port}", "--mcp"),
    ]
    with running_app(args, log, HF_HUB_OFFLINE="1") as url:
        yield url, port, log


def expected(runtime, text: str, seed: int, prompt=None, **options) -> np.ndarray:
    """What the door should send: the runtime's ``stream`` (sentence pieces) for the same voice,
    seed and the doors' settings, as 16-bit samples."""
    request = Request.from_options(
        {"text": text, "seed": seed, "normalize_text": True, **options}, DOOR_PRESET
    )
    if prompt is not None:
        request = request.with_prompt(prompt)
    return np.concatenate(
        [pcm16(piece.waveform) for piece in runtime.stream(request, sentences=True)]
    )


def expected_dialogue(runtime, text: str, seed: int, **options):
    """What a door should make of a dialogue script: the library's, each name a built-in voice,
    with the doors' settings."""
    from omnivoice_rt import dialogue
    from omnivoice_rt.voices import VoiceLibrary

    speakers = dialogue.library_speakers(VoiceLibrary())
    return runtime.generate(
        text, script=True, speakers=speakers, seed=seed, preset=DOOR_PRESET, **options
    )


async def answer(
    client: AsyncTcpClient, until: str = "audio-stop", rate: int = 24000
) -> tuple[list[str], bytes]:
    """The event types up to ``until`` (or an error) and the audio they carried, at ``rate``."""
    types, audio = [], b""
    while True:
        event = await asyncio.wait_for(client.read_event(), 120)
        assert event is not None, "the server closed the connection"
        types.append(event.type)
        if event.type == "audio-chunk":
            assert (event.data["rate"], event.data["width"], event.data["channels"]) == (
                rate,
                2,
                1,
            )
            audio += event.payload
        if event.type in (until, "error"):
            return types, audio


def speak(
    port: int, text: str, seed: int, voice: dict | None = None, **options
) -> tuple[list[str], np.ndarray]:
    async def run():
        async with AsyncTcpClient("127.0.0.1", port) as client:
            data = {"text": text, "seed": seed, **({"voice": voice} if voice else {}), **options}
            await client.write_event(Event("synthesize", data))
            return await answer(client, rate=options.get("sample_rate", 24000))

    types, audio = asyncio.run(run())
    return types, np.frombuffer(audio, np.int16)


async def describe(client: AsyncTcpClient) -> Info:
    await client.write_event(Describe().event())
    return Info.from_event(await asyncio.wait_for(client.read_event(), 30))
