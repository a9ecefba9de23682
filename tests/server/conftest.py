"""The servers several files of tests/server/ share, started once a session, and their helpers."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from tests.conftest import running_app

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
