"""Running the server as operators do (issue 37): ``/metrics`` read by ``prometheus_client``'s own
parser after requests on two doors, behind the API key where one is set; ``--idle-unload`` frees
the models and the next request loads them again; SIGTERM refuses new requests with a 503 and a
retry hint, lets the one under way finish, and exits 0."""

from __future__ import annotations

import io
import signal
import threading
import time

import httpx
import pytest
import soundfile as sf
from gradio_client import Client

from tests.conftest import FIXED, app_process, running_app
from tests.server.conftest import KEY

MARKER = "Zanzibar quokka"  # a request's text: never in a scrape


def scrape(url: str, **headers) -> dict:
    """``/metrics`` parsed by prometheus_client's parser: {(sample name, labels): value}."""
    from prometheus_client.parser import text_string_to_metric_families

    answer = httpx.get(f"{url}/metrics", headers=headers, timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    assert MARKER not in answer.text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    }


def value(samples: dict, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def speech(url: str, text: str, **body) -> httpx.Response:
    return httpx.post(
        f"{url}/v1/audio/speech",
        json={"model": "tts-1", "input": text, "voice": "auto", "response_format": "wav", **body},
        timeout=120,
    )


def test_metrics_count_the_requests_of_two_doors(app_server):
    """After a page request (gradio_client) and two OpenAI ones (one refused): each door's
    outcomes, the error by its code, the histograms' counts, the seconds of audio made (the
    sum of the answers' lengths), the loaded model and its load time, the process' memory."""
    before = scrape(app_server)
    client = Client(app_server, verbose=False)
    path, _, _ = client.predict(MARKER, "English", "", "int4", **FIXED, api_name="/synthesize")
    page_seconds = sf.info(path).duration
    answer = speech(app_server, f"{MARKER}.", seed=1, speed=1.0)
    assert answer.status_code == 200
    openai_seconds = sf.info(io.BytesIO(answer.content)).duration
    assert speech(app_server, MARKER, speed=99).status_code == 400
    after = scrape(app_server)

    def grew(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    assert grew("omnivoice_requests_total", door="page", outcome="ok") == 1
    assert grew("omnivoice_requests_total", door="openai", outcome="ok") == 1
    assert grew("omnivoice_requests_total", door="openai", outcome="bad_request") == 1
    assert grew("omnivoice_errors_total", code="bad_request") == 1
    for histogram in (
        "omnivoice_synthesis_seconds",
        "omnivoice_time_to_first_audio_seconds",
        "omnivoice_real_time_factor",
        "omnivoice_line_wait_seconds",
    ):
        assert grew(f"{histogram}_count") == 2, histogram
        assert grew(f"{histogram}_sum") >= 0
    # the audio made: the page's 2.2 s and the OpenAI answer's, its wav header aside
    assert grew("omnivoice_audio_seconds_total") == pytest.approx(
        page_seconds + openai_seconds, abs=1e-3
    )
    assert value(after, "omnivoice_model_loaded", precision="int4") == 1
    assert value(after, "omnivoice_model_loaded", precision="fp16") in (0, 1)
    assert value(after, "omnivoice_model_load_seconds", precision="int4") > 0
    assert value(after, "process_resident_memory_bytes") > 50e6
    assert value(after, "omnivoice_line_waiting") == 0


def test_metrics_want_the_api_key_where_one_is_set(secured_server):
    url, _, _ = secured_server
    refused = httpx.get(f"{url}/metrics", timeout=30)
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "invalid_api_key"
    assert (
        "omnivoice_requests_total"
        in httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {KEY}"}, timeout=30).text
    )


def wait_for(check, what: str, seconds: float = 60):
    deadline = time.monotonic() + seconds
    while not (found := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not come within {seconds:g} s")
        time.sleep(0.2)
    return found


def health(url: str) -> dict:
    return httpx.get(f"{url}/health", timeout=30).json()


def test_idle_unload_frees_the_models_and_the_next_request_loads_them_again(
    cpu_artifacts, tiny_whisper, tmp_path
):
    """--idle-unload 3: the models and the recogniser go after 3 s without a request (/health
    says so, the process' resident memory falls), and the next request loads them again: its
    answer says how long that took and is the audio it was before."""
    args = ["--artifacts", str(cpu_artifacts), "--asr-model", str(tiny_whisper)]
    args += ["--idle-unload", "3"]
    with running_app(args, tmp_path / "server.log", HF_HUB_OFFLINE="1") as url:
        first = speech(url, "Loaded and then freed.", seed=4)  # loaded (or loading) as it starts
        assert first.status_code == 200
        resident = app_process(url).memory_info().rss  # within the 3 s: still loaded
        state = wait_for(lambda: (h := health(url))["unloaded"] and h, "the idle unload")
        assert state["loaded"] == [] and state["idle_unload"] == 3.0 and state["idle_s"] >= 3
        freed = app_process(url).memory_info().rss
        again = speech(url, "Loaded and then freed.", seed=4)
        assert again.status_code == 200
        assert float(again.headers["X-Model-Load-Seconds"]) > 0
        assert again.content == first.content
        assert health(url)["loaded"] == ["int4"]
        samples = scrape(url)
        assert value(samples, "omnivoice_model_unloads_total") >= 1
    log = (tmp_path / "server.log").read_text()
    assert "freed int4 and the recogniser" in log
    print(f"resident memory: {resident / 1e6:.0f} MB loaded, {freed / 1e6:.0f} MB freed")
    assert freed < resident


def test_sigterm_refuses_new_requests_and_lets_the_running_one_finish(
    cpu_artifacts, tiny_whisper, tmp_path
):
    """A long text streamed over server-sent events is under way when SIGTERM comes: a new request
    gets 503 with Retry-After (the OpenAI door's and /health alike), the running one gets all its
    audio and its done event, and the server exits 0."""
    args = ["--artifacts", str(cpu_artifacts), "--asr-model", "none", "--stop-timeout", "60"]
    long_text = " ".join(f"This is sentence number {n} of a long text." for n in range(60))
    with running_app(args, tmp_path / "server.log", HF_HUB_OFFLINE="1") as url:
        wait_for(lambda: health(url)["loaded"] == ["int4"], "the preload")
        process = app_process(url)
        events: list[str] = []
        started = threading.Event()

        def listen() -> None:
            body = {"model": "tts-1", "input": long_text, "voice": "auto", "seed": 2}
            body.update(stream_format="sse", response_format="pcm", num_step=16)
            with httpx.stream("POST", f"{url}/v1/audio/speech", json=body, timeout=300) as answer:
                for line in answer.iter_lines():
                    if line.startswith("data: "):
                        events.append(line)
                        started.set()

        listener = threading.Thread(target=listen)
        listener.start()
        assert started.wait(120)
        process.send_signal(signal.SIGTERM)
        refused = wait_for(
            lambda: (r := speech(url, "Too late.")).status_code == 503 and r, "the 503"
        )
        assert refused.headers["Retry-After"] and listener.is_alive()
        assert refused.json()["error"]["code"] == "server_stopping"
        assert httpx.get(f"{url}/health", timeout=30).status_code == 503
        listener.join(timeout=240)
        assert '"speech.audio.done"' in events[-1], events[-1][:200]
        assert sum('"speech.audio.delta"' in e for e in events) > 3  # piece after piece
        assert process.wait(timeout=60) == 0
    assert "every request under way has finished" in (tmp_path / "server.log").read_text()
