"""The app on a Hub source: the published repo as a Space starts on it, the Hub down at start, an unwritable cache."""

from __future__ import annotations

import re
import tempfile
import threading
import time
from pathlib import Path

import httpx
import pytest
import soundfile as sf
from gradio_client import Client

from omnivoice_rt.artifacts.hub import DEFAULT_REPO
from tests.conftest import FIXED, free_port, running_app
from tests.hub_server import HubServer

REPO = "test-org/OmniVoice-Onnx"


def hub_env(endpoint: str, hf_home, repo: str | None = REPO) -> dict:
    """The environment of an app on the loopback Hub; ``repo`` None: no OMNIVOICE_REPO (the
    default repo, as a Space starts)."""
    env = {
        "HF_ENDPOINT": endpoint,
        "HF_HOME": str(hf_home),
        "HF_HUB_DISABLE_XET": "1",
        "HF_HUB_ETAG_TIMEOUT": "5",
        "HF_HUB_DOWNLOAD_TIMEOUT": "10",
    }
    return env if repo is None else {**env, "OMNIVOICE_REPO": repo}


def test_hub_down_at_start_then_back(published, tmp_path):
    port = free_port()
    with running_app(
        [], tmp_path / "app.log", **hub_env(f"http://127.0.0.1:{port}", tmp_path / "hf")
    ) as url:
        client = Client(url, verbose=False)
        # The Hub could not be asked which profiles the repo has: the published layout's are offered.
        page = httpx.get(f"{url}/config").json()
        (selector,) = [
            c for c in page["components"] if c.get("props", {}).get("elem_id") == "precision"
        ]
        assert [choice[1] for choice in selector["props"]["choices"]] == ["int4", "fp16"]
        with pytest.raises(Exception, match="cannot reach"):
            client.predict("Hello.", "Auto", "", "int4", **FIXED, api_name="/synthesize")
        hub = HubServer(published, REPO, port=port).start()
        try:
            path, info, _ = client.predict(
                "Hello.", "Auto", "", "int4", **FIXED, api_name="/synthesize"
            )
        finally:
            hub.stop()
        assert sf.read(path)[1] == 24000 and "int4" in info


def test_unwritable_cache_is_reported(published, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    hub = HubServer(published, REPO).start()
    try:
        with running_app([], tmp_path / "app.log", **hub_env(hub.endpoint, blocker / "hf")) as url:
            with pytest.raises(Exception, match="set HF_HOME to a writable folder"):
                Client(url, verbose=False).predict(
                    "Hello.", "Auto", "", "int4", **FIXED, api_name="/synthesize"
                )
    finally:
        hub.stop()


# ----------------------------------------------------------------------------- the published repo, as a Space starts on it


def wait_for(condition, timeout: float = 120.0, what: str = "") -> None:
    deadline = time.time() + timeout
    while not condition():
        if time.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_where_int4_heads_are_int4_the_space_defaults_to_fp16(published_int4, tmp_path):
    """The default repo as published (int4/ has int4 heads, block 128): the server reads int4's
    graphs without their weights, then preloads fp16 (fp16 heads, the same int4 LLM), which is the
    API's default and what a request that names no precision gets; the page says why; int4's
    weights are not downloaded."""
    hub = HubServer(published_int4, DEFAULT_REPO).start()
    env = hub_env(hub.endpoint, tmp_path / "hf", repo=None)
    log = tmp_path / "app.log"
    try:
        with running_app([], log, **env) as url:
            wait_for(lambda: "loaded fp16" in log.read_text(), what="the fp16 preload")
            assert "int4/audio_heads_decoder.onnx" in hub.file_requests()
            client = Client(url, verbose=False)
            info = client.view_api(print_info=False, return_format="dict")["named_endpoints"]
            precision = next(
                p for p in info["/synthesize"]["parameters"] if p["parameter_name"] == "precision"
            )
            assert precision["parameter_default"] == "fp16"
            _, line, _ = client.predict(
                "Hello.", seed=1, randomize_seed=False, api_name="/synthesize"
            )
            assert "fp16" in line
            page = httpx.get(f"{url}/config").text
            assert "The server's default: int4's heads are int4 (block 128)" in page
            assert not any(
                r.startswith("int4/") and r.endswith(".data") for r in hub.file_requests()
            )
    finally:
        hub.stop()


def test_space_on_the_published_repo_starts_ready_and_offers_what_it_has(published, tmp_path):
    """The default repo (a replica of it), no OMNIVOICE_REPO: int4 is fetched, repaired and loaded
    as the server starts, before any request; the selector offers the repo's two profiles; a
    request for the loaded int4 runs while fp16 is still downloading."""
    hub = HubServer(published, DEFAULT_REPO).start()
    hub.delays["llm_decoder.onnx.data"] = 8.0  # the root (fp16) LLM downloads slowly
    env = hub_env(hub.endpoint, tmp_path / "hf", repo=None)
    log = tmp_path / "app.log"
    try:
        with running_app([], log, **env) as url:
            wait_for(lambda: "loaded int4" in log.read_text(), what="the int4 preload")
            assert "int4/llm_decoder.onnx.data" in hub.file_requests()
            client = Client(url, verbose=False)
            info = client.view_api(print_info=False, return_format="dict")["named_endpoints"][
                "/synthesize"
            ]
            precision = next(p for p in info["parameters"] if p["parameter_name"] == "precision")
            assert precision["python_type"]["type"] == "Literal['int4', 'fp16']"
            assert precision["parameter_default"] == "int4"

            fetched = len(hub.file_requests())
            path, line, _ = client.predict(
                "Hello.", "Auto", "", "int4", **FIXED, api_name="/synthesize"
            )
            assert sf.read(path)[1] == 24000 and "int4" in line
            assert len(hub.file_requests()) == fetched  # the request used the preloaded model

            slow = {}
            fp16 = threading.Thread(
                target=lambda: slow.update(
                    result=Client(url, verbose=False).predict(
                        "Hello.", "Auto", "", "fp16", **FIXED, api_name="/synthesize"
                    )
                )
            )
            fp16.start()
            wait_for(
                lambda: "llm_decoder.onnx.data" in hub.file_requests(), what="the fp16 download"
            )
            path, line, _ = client.predict(
                "Again.", "Auto", "", "int4", **FIXED, api_name="/synthesize"
            )
            assert "int4" in line and fp16.is_alive()  # served while fp16 was still downloading
            fp16.join(timeout=120)
            assert "fp16" in slow["result"][1]
            assert "audio_tokenizer/fp16/ is unusable" in log.read_text()
            with pytest.raises(Exception, match="fp32"):
                client.predict("Hi.", "Auto", "", "fp32", **FIXED, api_name="/synthesize")
        # Stopped with SIGTERM, as a Space is: the server's temporary examples folder goes with it.
        examples = re.search(
            r"Will cache examples in '(/[^']+?)/\w+' directory", log.read_text()
        ).group(1)
        assert examples.startswith(tempfile.gettempdir()) and not Path(examples).exists()
    finally:
        hub.stop()
