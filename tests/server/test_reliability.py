"""Many callers, faults and unsafe requests against the real server on 127.0.0.1 (bad input:
test_bad_input.py).

The load test is bounded: 4 concurrent ``gradio_client`` callers, 3 requests each, over two
precisions on a server with two synthesis slots, tiny artifacts. Every request must come back
with its own audio (each caller asks for a different duration, seed and precision, and gets
exactly what a lone request with those settings gives); the server's memory is sampled before
and after.
"""

from __future__ import annotations

import shutil
import threading

import numpy as np
import pytest
import soundfile as sf
from gradio_client import Client, handle_file

from tests.conftest import FIXED, app_process, running_app

CALLERS, REQUESTS = 4, 3
PRECISION_OF = ("int4", "fp16")  # even callers use int4, odd ones fp16


@pytest.fixture(scope="module")
def client(app_server):
    return Client(app_server, verbose=False)


def settings(**changes) -> dict:
    return {**FIXED, **changes}


def test_concurrent_callers_each_get_their_own_audio(cpu_artifacts, tmp_path):
    """A server with two synthesis slots; callers alternate int4 and fp16, so two precisions are in
    flight at once. Every request must be served, with exactly what a lone request gives."""

    with running_app(
        ["--artifacts", str(cpu_artifacts), "--concurrency", "2"],
        tmp_path / "app.log",
        HF_HUB_OFFLINE="1",
    ) as url:
        server = app_process(url)

        def request(client: Client, caller: int) -> np.ndarray:
            path, info, _ = client.predict(
                f"Caller {caller}.",
                "Auto",
                "",
                PRECISION_OF[caller % 2],
                **settings(duration=1.0 + 0.4 * caller, seed=caller),
                api_name="/synthesize",
            )
            assert PRECISION_OF[caller % 2] in info
            return sf.read(path)[0]

        # each alone
        expected = {
            caller: request(Client(url, verbose=False), caller) for caller in range(CALLERS)
        }
        memory_before = server.memory_info().rss
        results, failures = {}, []

        def call(caller: int) -> None:
            client = Client(url, verbose=False)
            for number in range(REQUESTS):
                try:
                    results[(caller, number)] = request(client, caller)
                except Exception as exc:  # noqa: BLE001 - every failure is reported below
                    failures.append((caller, number, str(exc)))

        threads = [threading.Thread(target=call, args=(c,)) for c in range(CALLERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
        memory_after = server.memory_info().rss
    assert not failures and len(results) == CALLERS * REQUESTS, failures
    for (caller, _), audio in results.items():
        np.testing.assert_array_equal(audio, expected[caller])
    growth_mb = (memory_after - memory_before) / 2**20
    print(
        f"\nload: {CALLERS} callers x {REQUESTS} requests over int4 and fp16, two at a time, "
        f"server memory {memory_before / 2**20:.0f} -> {memory_after / 2**20:.0f} MB"
    )
    assert growth_mb < 100


def test_pickled_voice_prompt_is_refused(client, tmp_path):
    import pickle

    bad = tmp_path / "evil.npz"
    np.savez(
        bad,
        format_version=np.int64(1),
        codes=np.array([pickle.dumps(object())], dtype=object),
        text=np.str_("x"),
        rms=np.float64(0.1),
    )
    with pytest.raises(Exception, match="voice prompt|not a voice prompt|codes"):
        client.predict(
            "Hi.", None, "", handle_file(str(bad)), "Auto", "int4", **FIXED, api_name="/clone"
        )


def test_a_broken_artifact_is_reported_and_the_app_recovers(cpu_artifacts, tmp_path):
    """A precision whose file goes missing fails with a message; it loads once the file is back."""
    from omnivoice_rt.server.serving import Config, Service

    folder = tmp_path / "artifacts"
    shutil.copytree(cpu_artifacts, folder)
    service = Service(Config(str(folder), "int4"))
    service.models.get("int4")
    moved = folder / "llm_decoder.onnx.data"
    moved.rename(tmp_path / "aside.data")
    with pytest.raises(Exception, match="missing or corrupt"):
        service.models.get("fp16")
    (tmp_path / "aside.data").rename(moved)
    assert service.models.get("fp16").precision == "fp16"
    assert service.models.get("int4").generate("Still fine.", num_step=4, seed=0).seconds > 0


def test_uploads_are_size_limited(client, tmp_path):
    big = tmp_path / "big.wav"
    # 28.8 MB, over the 20 MB limit
    sf.write(big, np.zeros(24000 * 300, np.float32), 24000, subtype="FLOAT")
    with pytest.raises(Exception, match="(?i)size|large|413"):
        client.predict(
            "Hi.", handle_file(str(big)), "Hi.", None, "Auto", "int4", **FIXED, api_name="/clone"
        )
