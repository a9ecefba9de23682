"""The app when its artifact source fails: the Hub down at start, an unwritable cache."""

from __future__ import annotations

import pytest
import soundfile as sf
from gradio_client import Client

from tests.conftest import free_port, running_app
from tests.hub_server import HubServer
from tests.test_app import FIXED

REPO = "test-org/OmniVoice-Onnx"


def hub_env(endpoint: str, hf_home) -> dict:
    return {"HF_ENDPOINT": endpoint, "HF_HOME": str(hf_home), "OMNIVOICE_REPO": REPO, "HF_HUB_DISABLE_XET": "1",
            "HF_HUB_ETAG_TIMEOUT": "5", "HF_HUB_DOWNLOAD_TIMEOUT": "10"}  # fmt: skip


def test_hub_down_at_start_then_back(published, tmp_path):
    port = free_port()
    with running_app([], tmp_path / "app.log", **hub_env(f"http://127.0.0.1:{port}", tmp_path / "hf")) as url:
        client = Client(url, verbose=False)
        with pytest.raises(Exception, match="cannot reach"):
            client.predict("Hello.", "Auto", "", "int4", **FIXED, api_name="/synthesize")
        hub = HubServer(published, REPO, port=port).start()
        try:
            path, info = client.predict("Hello.", "Auto", "", "int4", **FIXED, api_name="/synthesize")
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
                Client(url, verbose=False).predict("Hello.", "Auto", "", "int4", **FIXED, api_name="/synthesize")
    finally:
        hub.stop()
