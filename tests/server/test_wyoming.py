"""The Wyoming door (Home Assistant) and the voice library's HTTP door, on a real server on
127.0.0.1, called with the ``wyoming`` package's ``AsyncTcpClient``, ``httpx`` and ``openai``."""

from __future__ import annotations

import asyncio
import socket
import time

import httpx
import numpy as np
import openai
import pytest
import soundfile as sf
from wyoming.client import AsyncTcpClient
from wyoming.event import Event
from wyoming.info import Describe, Info
from wyoming.tts import SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeVoice

from omnivoice_build.equivalence import write_reference
from omnivoice_rt.audio.formats import pcm16
from omnivoice_rt.request import DOOR_PRESET, Request
from omnivoice_rt.voice_prompt import VoicePrompt
from omnivoice_rt.voices import DESIGNED_VOICES
from tests.conftest import free_port, in_arrival_order, running_app, save_narrator

KEY = "sk-test-wyoming"
LONG = " ".join(
    f"This is sentence number {n} of a longer text, said slowly and clearly." for n in range(12)
)


@pytest.fixture(scope="module")
def voices_dir(cpu_artifacts, tmp_path_factory):
    return save_narrator(tmp_path_factory.mktemp("library"), cpu_artifacts)


@pytest.fixture(scope="module")
def server(cpu_artifacts, tiny_whisper, voices_dir, tmp_path_factory):
    """The app with its Wyoming door, a writable voice library and an API key; yields (url, port, log)."""
    log = tmp_path_factory.mktemp("wyoming") / "server.log"
    port = free_port()
    args = [
        *("--artifacts", str(cpu_artifacts), "--asr-model", str(tiny_whisper)),
        *("--voices", str(voices_dir), "--voices-writable"),
        *("--wyoming", f"tcp://127.0.0.1:{port}", "--mcp"),
        *("--wyoming-zeroconf", f"omnivoice-test-{port}"),
    ]
    with running_app(args, log, HF_HUB_OFFLINE="1", OMNIVOICE_API_KEY=KEY) as url:
        yield url, port, log


@pytest.fixture(scope="module")
def keyless(cpu_artifacts, tiny_whisper, voices_dir, tmp_path_factory):
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


@pytest.fixture(scope="module")
def runtime(int4_voice):
    """The library's int4 model, which the server's answers must equal (conftest's, shared)."""
    return int4_voice


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


async def answer(client: AsyncTcpClient, until: str = "audio-stop") -> tuple[list[str], bytes]:
    """The event types up to ``until`` (or an error) and the audio they carried."""
    types, audio = [], b""
    while True:
        event = await asyncio.wait_for(client.read_event(), 120)
        assert event is not None, "the server closed the connection"
        types.append(event.type)
        if event.type == "audio-chunk":
            assert (event.data["rate"], event.data["width"], event.data["channels"]) == (
                24000,
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
            return await answer(client)

    types, audio = asyncio.run(run())
    return types, np.frombuffer(audio, np.int16)


async def describe(client: AsyncTcpClient) -> Info:
    await client.write_event(Describe().event())
    return Info.from_event(await asyncio.wait_for(client.read_event(), 30))


def test_describe_lists_one_streaming_program_and_its_voices(server):
    _, port, _ = server

    async def run():
        async with AsyncTcpClient("127.0.0.1", port) as client:
            return await describe(client)

    (program,) = asyncio.run(run()).tts
    assert program.name == "omnivoice-onnx" and program.supports_synthesize_streaming
    assert program.attribution.url == "https://github.com/k2-fsa/OmniVoice" and program.version
    voices = {voice.name: voice for voice in program.voices}
    assert {"auto", "narrator", *DESIGNED_VOICES} <= set(voices)
    languages = voices["auto"].languages
    # two-letter tags, Arabic under its tag (OmniVoice knows it as 'arb'), Cantonese with none
    assert {"en", "zh", "de", "ar", "yue"} <= set(languages) and "arb" not in languages
    assert all(len(tag) == 2 for tag in languages if tag != "yue")


def test_the_door_is_advertised_over_zeroconf_as_home_assistant_looks_for_it(server):
    """Home Assistant browses ``_wyoming._tcp.local.``; zeroconf's own client finds the door there."""
    from zeroconf import Zeroconf

    _, port, _ = server
    browser = Zeroconf()
    try:  # the advertisement goes out once the server runs: a loaded machine may take a while
        for _ in range(4):
            info = browser.get_service_info(
                "_wyoming._tcp.local.",
                f"omnivoice-test-{port}._wyoming._tcp.local.",
                timeout=10_000,
            )
            if info is not None:
                break
    finally:
        browser.close()
    assert info is not None and info.port == port
    assert socket.inet_ntoa(info.addresses[0]) == "127.0.0.1"


def test_synthesize_short_and_long_text_equals_the_runtime(server, runtime):
    _, port, _ = server
    types, audio = speak(port, "Hello from Home Assistant.", 5, {"name": "alloy"})
    assert types[0] == "audio-start" and types[-1] == "audio-stop"
    np.testing.assert_array_equal(
        audio, expected(runtime, "Hello from Home Assistant.", 5, instruct=DESIGNED_VOICES["alloy"])
    )
    # a long text, sentence by sentence as they are made; a tag as Home Assistant sends it
    types, audio = speak(port, LONG, 6, {"language": "en-US"})
    assert types.count("audio-chunk") > 10 and types.count("audio-start") == 1
    np.testing.assert_array_equal(audio, expected(runtime, LONG, 6, language="en"))


def test_streamed_text_is_spoken_sentence_by_sentence_before_the_stop(server, runtime, voices_dir):
    _, port, _ = server

    async def run():
        async with AsyncTcpClient("127.0.0.1", port) as client:
            start = SynthesizeStart(voice=SynthesizeVoice(name="narrator")).event()
            start.data["seed"] = 9
            await client.write_event(start)
            await client.write_event(SynthesizeChunk("The first sentence ").event())
            await client.write_event(SynthesizeChunk("is complete. The sec").event())
            # audio for the first sentence comes before the stream ends
            first_types, first = await answer(client)
            await client.write_event(SynthesizeChunk("ond one ends here. And a last").event())
            await client.write_event(Event("synthesize", {"text": "ignored inside a stream"}))
            await client.write_event(SynthesizeStop().event())
            rest_types, _ = await answer(client, until="synthesize-stopped")
            return first_types, first, rest_types

    first_types, first, rest_types = asyncio.run(run())
    assert first_types[0] == "audio-start" and first_types[-1] == "audio-stop"
    assert rest_types.count("audio-start") == 2 and rest_types[-1] == "synthesize-stopped"
    assert "error" not in rest_types
    narrator = VoicePrompt.load(voices_dir / "narrator.npz")
    np.testing.assert_array_equal(
        np.frombuffer(first, np.int16),
        expected(runtime, "The first sentence is complete.", 9, prompt=narrator),
    )


def test_an_events_data_takes_the_requests_options_by_name(server, runtime):
    """Beyond the protocol, any option of the request (request.DOOR_FIELDS) in a synthesize's
    data: the runtime's audio for those options."""
    _, port, _ = server
    options = {"num_step": 4, "duration": 1.0, "speed": 0.9, "postprocess_output": False}
    types, audio = speak(port, "Good evening.", 7, **options)
    assert types[-1] == "audio-stop", types
    np.testing.assert_array_equal(audio, expected(runtime, "Good evening.", 7, **options))
    assert len(audio) == 24000 + 2 * 2400  # one second, as asked, and the padding


@pytest.mark.parametrize(
    ("event", "code", "words"),
    [
        (
            Event("synthesize", {"text": "Hi.", "voice": {"name": "bob"}}),
            "unknown-voice",
            "choose one of auto",
        ),
        (Event("synthesize", {"text": 5}), "bad-event", "'text', a string"),
        (Event("synthesize", {"text": "   "}), "bad-request", "text is empty"),
        (Event("synthesize", {"text": "x" * 10_001}), "bad-request", "the limit is 10000"),
        (Event("synthesize", {"text": "Hi.", "voice": "alloy"}), "bad-event", "must be an object"),
        (
            Event("synthesize", {"text": "Hi.", "seed": -1}),
            "bad-event",
            "seed must be a whole number >= 0",
        ),
        (
            Event("synthesize", {"text": "Hi.", "voice": {"language": "Klingon"}}),
            "bad-request",
            "Unknown language",
        ),
        (
            Event("synthesize", {"text": "Hi.", "num_step": 0}),
            "bad-event",
            "num_step must be a whole number from 1 to",
        ),
        (Event("synthesize", {"text": "Hi.", "preset": "quick"}), "bad-request", "unknown preset"),
        (Event("synthesize-chunk", {"text": "Hi."}), "no-stream", "without a synthesize-start"),
        (Event("synthesize-stop"), "no-stream", "without a synthesize-start"),
        (Event("transcribe"), "unknown-event", "does not take 'transcribe'"),
    ],
)
def test_bad_events_get_an_error_and_the_connection_goes_on(server, event, code, words):
    _, port, _ = server

    async def run():
        async with AsyncTcpClient("127.0.0.1", port) as client:
            await client.write_event(event)
            error = await asyncio.wait_for(client.read_event(), 30)
            info = await describe(client)  # the same connection, still served
            return error, info

    error, info = asyncio.run(run())
    assert error.type == "error" and error.data["code"] == code, error
    assert words in error.data["text"] and "\n" not in error.data["text"]
    assert info.tts[0].name == "omnivoice-onnx"


def test_a_stream_over_the_limit_is_dropped(server):
    _, port, _ = server

    async def run():
        async with AsyncTcpClient("127.0.0.1", port) as client:
            await client.write_event(SynthesizeStart().event())
            await client.write_event(SynthesizeChunk("word " * 2100).event())
            error = await asyncio.wait_for(client.read_event(), 30)
            await client.write_event(SynthesizeStop().event())
            return error, await asyncio.wait_for(client.read_event(), 30)

    error, after = asyncio.run(run())
    assert error.data["code"] == "text-too-long" and after.data["code"] == "no-stream"


@pytest.mark.parametrize(
    "frame",
    [
        b"not json\n",
        b'{"type": "describe", "data_length": -4}\n',
        b'{"type": "x", "payload_length": 99999999}\n',
        b"[1, 2]\n",
    ],
)
def test_bytes_that_are_not_an_event_close_the_connection_with_an_error(server, frame):
    _, port, _ = server
    with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
        raw.sendall(frame)
        received = b""
        while chunk := raw.recv(65536):
            received += chunk
    assert b'"bad-frame"' in received and b"Not a Wyoming event" in received

    async def run():
        async with AsyncTcpClient("127.0.0.1", port) as client:
            return await describe(client)

    assert asyncio.run(run()).tts  # the server is alive


def test_two_wyoming_clients_and_an_openai_client_are_served_in_arrival_order(server, runtime):
    url, port, _ = server
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0)

    def through_wyoming(n):
        types, audio = speak(port, LONG, n)
        assert "error" not in types
        return audio

    def through_openai(n):
        data = client.audio.speech.create(
            model="omnivoice",
            voice="auto",
            input=LONG,
            response_format="pcm",
            extra_body={"seed": n},
        ).content
        return np.frombuffer(data, np.int16)

    finished, results = in_arrival_order(url, [through_wyoming, through_openai, through_wyoming])
    assert finished == [0, 1, 2]
    np.testing.assert_array_equal(results[0], expected(runtime, LONG, 0))
    np.testing.assert_array_equal(results[2], expected(runtime, LONG, 2))


def test_a_client_leaving_mid_answer_frees_the_line(server):
    url, port, log = server

    async def leave():
        client = AsyncTcpClient("127.0.0.1", port)
        await client.connect()
        await client.write_event(Event("synthesize", {"text": LONG * 3, "seed": 1}))
        while (await asyncio.wait_for(client.read_event(), 120)).type != "audio-chunk":
            pass
        await client.disconnect()  # gone after its first audio

    asyncio.run(leave())
    # it stops at the next step, or at the next piece if it was sending one; then the line is free
    deadline = time.time() + 60
    while "a Wyoming client went away" not in log.read_text():
        assert time.time() < deadline, "the synthesis of a client that left never stopped"
        time.sleep(0.1)
    assert httpx.get(f"{url}/health").json()["serving"] == 0
    types, _ = speak(port, "Next, please.", 2)
    assert types[-1] == "audio-stop"


def test_voices_added_over_http_are_described_and_used_by_name(server, runtime, voices_dir):
    url, port, _ = server
    headers = {"Authorization": f"Bearer {KEY}"}
    design = httpx.post(
        f"{url}/v1/audio/voices",
        json={"name": "storyteller", "instruct": "male, low pitch", "language": "en"},
        headers=headers,
    )
    assert design.status_code == 201 and design.json()["kind"] == "design", design.text
    recording = write_reference(str(voices_dir.parent / "mine.wav"), seconds=2.0)
    with open(recording, "rb") as audio:
        clone = httpx.post(
            f"{url}/v1/audio/voices",
            data={"name": "mine", "transcript": "This is how I sound."},
            files={"audio": ("mine.wav", audio, "audio/wav")},
            headers=headers,
            timeout=120,
        )
    assert clone.status_code == 201, clone.text
    assert (clone.json()["kind"], clone.json()["duration"]) == (
        "clone",
        pytest.approx(2.0, abs=0.3),
    )

    async def run():
        async with AsyncTcpClient("127.0.0.1", port) as client:
            return await describe(client)

    voices = {voice.name: voice for voice in asyncio.run(run()).tts[0].voices}
    assert voices["storyteller"].languages == ["en"] and "mine" in voices
    _, audio = speak(port, "A story begins.", 3, {"name": "storyteller"})
    np.testing.assert_array_equal(
        audio, expected(runtime, "A story begins.", 3, instruct="male, low pitch", language="en")
    )
    _, audio = speak(port, "In my own voice.", 4, {"name": "mine"})
    np.testing.assert_array_equal(
        audio, expected(runtime, "In my own voice.", 4, voice_prompt=str(voices_dir / "mine.npz"))
    )
    # the OpenAI door offers them too, and a removed voice is gone from every door
    listed = httpx.get(f"{url}/v1/audio/voices", headers=headers).json()["data"]
    assert {"storyteller", "mine"} <= {voice["id"] for voice in listed}
    assert httpx.delete(f"{url}/v1/audio/voices/mine", headers=headers).status_code == 200
    types, _ = speak(port, "Gone?", 1, {"name": "mine"})
    assert types == ["error"]


def test_a_results_voice_is_kept_by_its_id_and_spoken_by_name(server, runtime, voices_dir):
    """Keep a voice: a speech response's X-Voice-Result, posted to the library under a name, is
    that result's voice (the runtime's ``Speech.voice_prompt`` of the same request), and a later
    call by that name, on another door, speaks in it."""
    url, port, _ = server
    headers = {"Authorization": f"Bearer {KEY}"}
    text = "A voice worth keeping."
    response = httpx.post(
        f"{url}/v1/audio/speech",
        json={"model": "omnivoice", "input": text, "voice": "auto", "seed": 11},
        headers=headers,
        timeout=120,
    )
    assert response.status_code == 200, response.text
    result = response.headers["x-voice-result"]
    kept = httpx.post(
        f"{url}/v1/audio/voices", json={"name": "kept", "result": result}, headers=headers
    )
    assert kept.status_code == 201 and kept.json()["kind"] == "clone", kept.text
    request = Request.from_options({"text": text, "seed": 11, "normalize_text": True}, DOOR_PRESET)
    made = next(runtime.stream(request)).voice_prompt()
    saved = VoicePrompt.load(voices_dir / "kept.npz")
    np.testing.assert_array_equal(saved.codes, made.codes)
    assert saved.text == made.text and saved.rms == pytest.approx(made.rms)
    _, audio = speak(port, "Said again in it.", 5, {"name": "kept"})
    np.testing.assert_array_equal(
        audio, expected(runtime, "Said again in it.", 5, voice_prompt=str(voices_dir / "kept.npz"))
    )
    again = httpx.post(
        f"{url}/v1/audio/voices", json={"name": "kept2", "result": "not-a-result"}, headers=headers
    )
    assert again.status_code == 404 and again.json()["error"]["param"] == "result"
    assert "is held here" in again.json()["error"]["message"]
    both = httpx.post(
        f"{url}/v1/audio/voices",
        json={"name": "kept2", "result": result, "instruct": "male"},
        headers=headers,
    )
    assert both.status_code == 400 and "exactly one of" in both.json()["error"]["message"]
    assert not (voices_dir / "kept2.json").exists()
    assert httpx.delete(f"{url}/v1/audio/voices/kept", headers=headers).status_code == 200


@pytest.mark.parametrize(
    ("form", "status", "words"),
    [
        ({"data": {"name": "../../etc/passwd", "instruct": "female"}}, 400, "no spaces or slashes"),
        ({"data": {"name": "alloy", "instruct": "female"}}, 400, "built-in voice"),
        ({"data": {"name": "narrator", "instruct": "female"}}, 409, "exists already"),
        ({"data": {"name": "x", "instruct": "speak warmly"}}, 400, "Valid English items"),
        ({"data": {"name": "x"}}, 400, "exactly one of"),
        ({"data": {"name": "x", "colour": "red"}}, 400, "Unknown or repeated field"),
        (
            {"data": {"name": "x"}, "files": {"audio": ("x.wav", b"not audio at all" * 100)}},
            400,
            "could not read the reference audio",
        ),
        (
            {"data": {"name": "x"}, "files": {"prompt": ("x.npz", b"PK not a prompt")}},
            400,
            "not a usable voice prompt",
        ),
        (
            {"data": {"name": "x"}, "files": {"audio": ("x.wav", b"\0" * (21 << 20))}},
            413,
            "over 20 MB",
        ),
        ({"data": {"name": "x", "transcript": "x"}, "files": "too long"}, 400, "125 s long"),
        (
            {"content": b"name=x", "headers": {"content-type": "text/plain"}},
            415,
            "multipart/form-data",
        ),
    ],
)
def test_bad_voice_uploads_are_refused_and_nothing_is_written(
    server, voices_dir, form, status, words
):
    url, _, _ = server
    if form.get("files") == "too long":
        long = write_reference(
            str(voices_dir.parent / "long.wav"), seconds=125, rate=8000, channels=1
        )
        form["files"] = {"audio": ("long.wav", open(long, "rb").read())}
    before = sorted(path.name for path in voices_dir.iterdir())
    headers = {"Authorization": f"Bearer {KEY}", **form.pop("headers", {})}
    response = httpx.post(f"{url}/v1/audio/voices", headers=headers, timeout=120, **form)
    assert response.status_code == status, response.text
    assert words in response.json()["error"]["message"]
    assert sorted(path.name for path in voices_dir.iterdir()) == before


def test_voice_writes_need_the_key_and_a_writable_library(server, app_server):
    url, _, _ = server
    assert (
        httpx.post(f"{url}/v1/audio/voices", json={"name": "x", "instruct": "male"}).status_code
        == 401
    )
    assert httpx.delete(f"{url}/v1/audio/voices/narrator").status_code == 401
    # a server without --voices-writable lists but does not write
    refused = httpx.post(f"{app_server}/v1/audio/voices", json={"name": "x", "instruct": "male"})
    assert refused.status_code == 403 and "--voices-writable" in refused.json()["error"]["message"]
    assert httpx.get(f"{app_server}/v1/audio/voices").json()["data"][0]["id"] == "auto"


def test_the_page_api_and_mcp_save_list_and_clone_library_voices(
    keyless, server, runtime, voices_dir
):
    """gradio_client saves a reference into the library (on a server without a key; with one, only
    the key's door writes) and clones it by name, with a style over it; MCP offers the same tools;
    Wyoming describes the voice next."""
    from gradio_client import Client, handle_file
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    reference = write_reference(str(voices_dir.parent / "page.wav"), seconds=2.5)
    with pytest.raises(Exception, match="with its API key only"):
        Client(server[0], verbose=False).predict(
            "keyed-voice",
            handle_file(reference),
            "Hi.",
            "English",
            "int4",
            api_name="/save_to_library",
        )
    url, port, _ = keyless
    client = Client(url, verbose=False)
    line = client.predict(
        "page-voice",
        handle_file(reference),
        "Said on the page.",
        "English",
        "int4",
        api_name="/save_to_library",
    )
    assert line.startswith("Saved 'page-voice' in the library")
    listed = {voice["name"]: voice for voice in client.predict(api_name="/list_voices")}
    assert listed["page-voice"]["kind"] == "clone" and listed["page-voice"]["language"] == "en"
    path, _, _ = client.predict(
        "In the saved voice.",
        None,
        "",
        None,
        "Auto",
        "int4",
        seed=3,
        randomize_seed=False,
        instruct="whisper",
        voice="page-voice",
        api_name="/clone",
    )

    made = runtime.generate(
        Request.from_options(
            {
                "text": "In the saved voice.",
                "seed": 3,
                "normalize_text": True,
                "instruct": "whisper",
                "language": "en",
                "voice_prompt": str(voices_dir / "page-voice.npz"),
            },
            DOOR_PRESET,
        )
    )
    np.testing.assert_array_equal(sf.read(path, dtype="int16")[0], pcm16(made.waveform))
    with pytest.raises(Exception, match="exists already"):
        client.predict(
            "page-voice", handle_file(reference), "", "English", "int4", api_name="/save_to_library"
        )
    with pytest.raises(Exception, match="Unknown voice 'nobody'"):
        client.predict("Hi.", None, "", None, "Auto", "int4", voice="nobody", api_name="/clone")

    async def tools():
        async with streamablehttp_client(f"{url}/gradio_api/mcp/") as (read, write, _):
            async with ClientSession(read, write) as mcp:
                await mcp.initialize()
                return {tool.name for tool in (await mcp.list_tools()).tools}

    assert {"list_voices", "save_to_library", "clone"} <= asyncio.run(tools())

    async def described():
        async with AsyncTcpClient("127.0.0.1", port) as wyoming:
            return await describe(wyoming)

    assert "page-voice" in {voice.name for voice in asyncio.run(described()).tts[0].voices}


def test_a_short_first_sentence_does_not_set_the_pace_of_the_rest(server, runtime):
    """The later sentences of a stream take the first one's voice (its codes as the reference) but
    each keeps the length it would have alone: upstream stretches a short text, and cloned, "Hi."
    would stretch the next sentence too. The door's audio equals the runtime's for exactly that."""
    _, port, _ = server
    second = "The kitchen lights are on, and the front door is locked for the night."

    async def run():
        async with AsyncTcpClient("127.0.0.1", port) as client:
            start = SynthesizeStart().event()
            start.data["seed"] = 4
            await client.write_event(start)
            await client.write_event(SynthesizeChunk(f"Hi. {second}").event())
            await client.write_event(SynthesizeStop().event())
            return await answer(client, until="synthesize-stopped")

    types, audio = asyncio.run(run())
    assert types.count("audio-start") == 2 and types[-1] == "synthesize-stopped"
    request = Request.from_options({"text": "Hi.", "seed": 4, "normalize_text": True}, DOOR_PRESET)
    first = next(runtime.stream(request, sentences=True))
    prompt = first.voice_prompt()  # the voice as the library keeps one (Speech.voice_prompt)
    alone = runtime.generate(second, seed=4, preset=DOOR_PRESET)
    paced = expected(
        runtime, second, 4, prompt=prompt, duration=alone.metadata["frames"] / runtime.frame_rate
    )
    samples = np.frombuffer(audio, np.int16)
    np.testing.assert_array_equal(samples[-len(paced) :], paced)
    cloned_at_its_pace = expected(runtime, second, 4, prompt=prompt)
    assert len(cloned_at_its_pace) > 1.2 * len(paced)  # what the fix is for


def test_a_later_sentence_is_planned_exactly_as_many_frames_as_it_would_have_alone():
    """The duration the door gives a stream's later sentence becomes, through the plan's
    int(duration * frame_rate), exactly the frames upstream's estimate gives that sentence alone
    (frames / frame_rate alone falls a frame short for some counts: 29 at 25 Hz gave 28)."""
    from omnivoice_rt.server.wyoming_door import build_request
    from omnivoice_rt.text.durations import estimate_frames

    first = VoicePrompt(codes=np.zeros((8, 10), dtype=np.int64), text="Hi.", rms=0.1)
    for words in range(1, 80):
        text = " ".join(["word"] * words) + "."
        request = build_request(text, {"voice_prompt": first, "frame_rate": 25.0}, {"seed": 0})
        assert int(request.duration * 25.0) == estimate_frames(text, None, None), text
    # a pause in a later sentence adds its silence, and the speech keeps its frames
    from omnivoice_rt.engine.plan import plan_parts
    from omnivoice_rt.request import GenerationSettings

    text = "word word word. [pause:2s] word word."
    request = build_request(text, {"voice_prompt": first, "frame_rate": 25.0}, {"seed": 0})
    plan = plan_parts(request.parts, "Hi.", 10, request.duration, None, GenerationSettings(), 25.0)
    frames = estimate_frames("word word word. word word.", None, None)
    assert sum(p.frames for p in plan.pieces) == pytest.approx(frames, abs=1)
    assert plan.silences == [None, 2.0, None]
