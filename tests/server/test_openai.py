"""The OpenAI-compatible endpoint and the MCP tools of the app, as a real server on 127.0.0.1,
called with the official ``openai`` client, the ``mcp`` client and ``gradio_client``."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import re
import subprocess
import time
import urllib.request

import httpx
import numpy as np
import openai
import pytest
import soundfile as sf
from gradio_client import Client

from omnivoice_rt import captions
from omnivoice_rt.limits import CONCURRENCY
from omnivoice_rt.model import PRESETS, Speech
from omnivoice_rt.server.openai_api import OPENAI_VOICES
from tests.conftest import in_arrival_order, running_app, save_narrator

KEY = "sk-test-omnivoice"
SAYING = "Hello from the OpenAI door."
LONG = " ".join(
    f"This is sentence number {n} of a longer text, said slowly and clearly." for n in range(8)
)
BALANCED = dict(PRESETS["balanced"])  # the endpoint's preset for model "omnivoice"


@pytest.fixture(scope="module")
def saved_voices(cpu_artifacts, tmp_path_factory):
    """A folder with one saved voice prompt, ``narrator``."""
    folder = save_narrator(tmp_path_factory.mktemp("voices"), cpu_artifacts)
    (folder / "not a voice.npz").write_bytes(b"ignored: not a voice name")
    return folder


@pytest.fixture(scope="module")
def server(cpu_artifacts, tiny_whisper, saved_voices, tmp_path_factory):
    log = tmp_path_factory.mktemp("openai") / "server.log"
    args = [
        "--artifacts",
        str(cpu_artifacts),
        "--asr-model",
        str(tiny_whisper),
        "--voices",
        str(saved_voices),
        "--mcp",
        # one generation at a time: these tests assert the line's order of arrival (turns among
        # generations under way: test_turns.py, test_turns_served.py)
        *("--concurrency", "1"),
    ]
    with running_app(args, log, HF_HUB_OFFLINE="1", OMNIVOICE_API_KEY=KEY) as url:
        yield url


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=f"{server}/v1", api_key=KEY, max_retries=0)


@pytest.fixture(scope="module")
def runtime(int4_voice):
    """The library's int4 model, which the server's answers must equal (conftest's, shared)."""
    return int4_voice


def decode(data: bytes, fmt: str) -> np.ndarray:
    """16-bit samples of an encoded response (ffmpeg for mp3, as players decode it)."""
    if fmt == "pcm":
        return np.frombuffer(data, np.int16)
    if fmt == "mp3":
        raw = subprocess.run(
            ["ffmpeg", "-v", "error", "-i", "-", "-f", "s16le", "-ac", "1", "-ar", "24000", "-"],
            input=data,
            capture_output=True,
            check=True,
        ).stdout
        return np.frombuffer(raw, np.int16)
    audio, rate = sf.read(io.BytesIO(data), dtype="int16")
    assert rate == 24000
    return audio


def pcm(speech: Speech) -> np.ndarray:
    return np.round(np.clip(speech.waveform, -1, 1) * 32767).astype(np.int16)


def test_every_format_is_playable_and_wav_is_the_runtime_result(client, runtime):
    expected = pcm(runtime.generate(SAYING, instruct=OPENAI_VOICES["alloy"], seed=1, **BALANCED))
    for fmt in ("wav", "pcm", "flac", "mp3", "opus"):
        response = client.audio.speech.create(
            model="omnivoice",
            voice="alloy",
            input=SAYING,
            response_format=fmt,
            extra_body={"seed": 1},
        )
        audio = decode(response.content, fmt)
        if fmt in ("wav", "pcm", "flac"):  # lossless: the runtime's samples exactly
            np.testing.assert_array_equal(audio, expected)
        else:  # lossy: the same length give or take the encoder's padding, and sound where the speech is
            assert abs(len(audio) - len(expected)) < 0.1 * 24000, (fmt, len(audio), len(expected))
            assert np.abs(audio).max() > 0.25 * np.abs(expected).max()
        assert response.response.headers["x-seed"] == "1"


def test_every_door_option_is_a_body_field_by_its_name(client, runtime):
    """Any option of the request (request.DOOR_FIELDS) rides in the body by its name, as the
    library takes it: the same audio as generate with those options; a bad one names its field."""
    options = {"num_step": 4, "guidance_scale": 0.0, "duration": 1.0, "t_shift": 0.3}
    options |= {"postprocess_output": False, "seed": 6}
    expected = pcm(runtime.generate(SAYING, instruct=OPENAI_VOICES["alloy"], **BALANCED | options))
    response = client.audio.speech.create(
        model="omnivoice", voice="alloy", input=SAYING, response_format="pcm", extra_body=options
    )
    np.testing.assert_array_equal(decode(response.content, "pcm"), expected)
    assert len(expected) == 24000 + 2 * 2400  # one second, as asked, and the fades' padding
    for field, value in (("num_step", 0), ("t_shift", "x"), ("class_temperature", -1)):
        with pytest.raises(openai.BadRequestError) as caught:
            client.audio.speech.create(
                model="omnivoice", voice="alloy", input="Hi.", extra_body={field: value}
            )
        assert caught.value.body["param"] == field, caught.value.body


def test_pauses_and_ssml_in_the_input_are_the_librarys(client, runtime):
    """A pause tag in OpenAI's input is the library's silence; SSML it cannot read is a 400
    naming the input and the element."""
    text = "Hello there. [pause:1s] Goodbye."
    voice = {"instruct": OPENAI_VOICES["alloy"], "seed": 3, "normalize_text": True}
    expected = pcm(runtime.generate(text, **voice, **BALANCED))
    response = client.audio.speech.create(
        model="omnivoice", voice="alloy", input=text, response_format="pcm", extra_body={"seed": 3}
    )
    np.testing.assert_array_equal(decode(response.content, "pcm"), expected)
    with pytest.raises(openai.BadRequestError) as caught:
        client.audio.speech.create(
            model="omnivoice", voice="alloy", input="<speak>Hi <audio src='x'/> you</speak>"
        )
    assert caught.value.body["param"] == "input", caught.value.body
    assert "<audio> is not supported" in caught.value.body["message"]
    with pytest.raises(openai.BadRequestError) as caught:  # <voice>: a script's speaker
        client.audio.speech.create(
            model="omnivoice", voice="alloy", input="<speak>Hi <voice name='x'>you</voice></speak>"
        )
    assert "no voice for speaker 'x'" in caught.value.body["message"]


def test_captions_come_as_json_with_the_audio(client, runtime, server):
    """ "captions": true: one JSON object, the whole audio file in base64 and the library's
    captions; over server-sent events the done event carries them."""
    text = "Hello there. [pause:1s] Goodbye."
    voice = {"instruct": OPENAI_VOICES["alloy"], "seed": 3, "normalize_text": True}
    expected = runtime.generate(text, **voice, **BALANCED)
    response = client.audio.speech.create(
        model="omnivoice",
        voice="alloy",
        input=text,
        response_format="wav",
        extra_body={"seed": 3, "captions": True},
    )
    assert response.response.headers["content-type"].startswith("application/json")
    answer = json.loads(response.content)
    assert (answer["audio_format"], answer["sample_rate"]) == ("wav", 24000)
    audio, rate = sf.read(io.BytesIO(base64.b64decode(answer["audio"])), dtype="int16")
    np.testing.assert_array_equal(audio, pcm(expected))
    assert answer["captions"] == captions.as_json(expected.captions)
    assert [c["text"] for c in answer["captions"]] == ["Hello there.", "Goodbye."]
    body = {"model": "omnivoice", "voice": "alloy", "input": text, "seed": 3, "captions": True}
    post = {"url": f"{server}/v1/audio/speech", "headers": {"Authorization": f"Bearer {KEY}"}}
    events = httpx.post(**post, json={**body, "stream_format": "sse"}, timeout=120)
    done = json.loads(events.text.strip().split("\n\n")[-1].removeprefix("data: "))
    assert done["type"] == "speech.audio.done" and done["captions"] == answer["captions"]
    refused = httpx.post(**post, json={**body, "captions": "yes"}, timeout=60)
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "captions"


def test_words_come_with_the_captions_as_the_library_aligns_them(client, runtime, server):
    """ "words": true: the captions answer gains each word's place, the library's alignment of
    the same result (``Speech.align_words``); over server-sent events the done event carries
    them; a word not found has null times."""
    text = "Hello there. [pause:1s] Goodbye, my friend."
    voice = {"instruct": OPENAI_VOICES["alloy"], "seed": 3, "normalize_text": True}
    expected = runtime.generate(text, **voice, **BALANCED)
    wanted = [w.as_dict() for w in expected.align_words()]
    assert [w["word"] for w in wanted] == ["Hello", "there.", "Goodbye,", "my", "friend."]
    answer = json.loads(
        client.audio.speech.create(
            model="omnivoice",
            voice="alloy",
            input=text,
            response_format="wav",
            extra_body={"seed": 3, "words": True},  # captions with them
        ).content
    )
    assert answer["captions"] == captions.as_json(expected.captions)
    assert [w["word"] for w in answer["words"]] == [w["word"] for w in wanted]
    # the same alignment, up to eSpeak's few milliseconds from one synthesis to the next (a word
    # at an unclear boundary of this random-weight speech may move more)
    both = [(g, w) for g, w in zip(answer["words"], wanted, strict=True) if g["start"] is not None]
    assert len(both) >= len(wanted) - 1 and all(w["start"] is not None for _, w in both)
    assert np.median([abs(g["start"] - w["start"]) for g, w in both]) < 0.05
    assert all(0 <= g["start"] <= g["end"] <= expected.seconds for g, _ in both)
    body = {"model": "omnivoice", "voice": "alloy", "input": text, "seed": 3, "words": True}
    post = {"url": f"{server}/v1/audio/speech", "headers": {"Authorization": f"Bearer {KEY}"}}
    events = httpx.post(**post, json={**body, "stream_format": "sse"}, timeout=120)
    done = json.loads(events.text.strip().split("\n\n")[-1].removeprefix("data: "))
    assert [w["word"] for w in done["words"]] == [w["word"] for w in wanted]
    refused = httpx.post(**post, json={**body, "words": 1}, timeout=60)
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "words"


def test_the_same_request_through_gradio_client_gives_the_same_audio(client, server):
    """The voice names are voice-design instructs; the OpenAI door and the Gradio API share defaults."""
    data = client.audio.speech.create(
        model="omnivoice",
        voice="onyx",
        input=SAYING,
        response_format="wav",
        extra_body={"seed": 5, "language": "English"},
    ).content
    path, _, _ = Client(server, verbose=False).predict(
        SAYING,
        "English",
        OPENAI_VOICES["onyx"],
        "int4",
        seed=5,
        randomize_seed=False,
        api_name="/synthesize",
    )
    np.testing.assert_array_equal(decode(data, "wav"), sf.read(path, dtype="int16")[0])


def test_a_long_text_streams_piece_by_piece(client, runtime):
    # numbers read as words ("sentence number 3"), the door's default
    stream = runtime.stream(LONG, seed=2, sentences=True, normalize_text=True, **BALANCED)
    expected = pcm(Speech.join(list(stream)))
    pieces = []
    with client.audio.speech.with_streaming_response.create(
        model="omnivoice",
        voice="auto",
        input=LONG,
        response_format="wav",
        extra_body={"seed": 2, "sentences": True},
    ) as response:
        for chunk in response.iter_bytes():
            pieces.append(chunk)
    data = b"".join(pieces)
    # sizes left open: streamed
    assert data[4:8] == b"\xff\xff\xff\xff" and data[40:44] == b"\xff\xff\xff\xff"
    np.testing.assert_array_equal(np.frombuffer(data[44:], np.int16), expected)

    # Server-sent events: one delta per piece, then done.
    events = []
    with client.audio.speech.with_streaming_response.create(
        model="omnivoice",
        voice="auto",
        input=LONG,
        response_format="pcm",
        stream_format="sse",
        extra_body={"seed": 2, "sentences": True},
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[6:]))
    deltas = [e for e in events if e["type"] == "speech.audio.delta"]
    assert len(deltas) > 1 and events[-1]["type"] == "speech.audio.done"
    audio = b"".join(base64.b64decode(e["audio"]) for e in deltas)
    np.testing.assert_array_equal(np.frombuffer(audio, np.int16), expected)


def test_a_saved_voice_prompt_is_a_voice(client, runtime, saved_voices):
    listed = {v["id"]: v["kind"] for v in client.get("/audio/voices", cast_to=object)["data"]}
    assert (
        listed["narrator"] == "clone"
        and listed["alloy"] == "design"
        and "not a voice" not in listed
    )
    data = client.audio.speech.create(
        model="omnivoice-int4",
        voice="narrator",
        input=SAYING,
        response_format="wav",
        extra_body={"seed": 4},
    ).content
    expected = runtime.generate(
        SAYING, voice_prompt=str(saved_voices / "narrator.npz"), seed=4, **BALANCED
    )
    np.testing.assert_array_equal(decode(data, "wav"), pcm(expected))


def test_numbers_are_read_as_words_unless_turned_off(client, server, runtime):
    """On by default, as OpenAI's voices read numbers; the header says whether the text changed;
    gradio_client's endpoint and result line agree."""
    text = "I paid $12.50 on Jan. 5, 2024."
    voice = {"instruct": OPENAI_VOICES["alloy"], "seed": 3, **BALANCED}
    words = pcm(runtime.generate(text, normalize_text=True, **voice))
    digits = pcm(runtime.generate(text, **voice))
    assert words.shape != digits.shape or (words != digits).any()
    for extra, expected, header in (
        ({"seed": 3}, words, "true"),
        ({"seed": 3, "normalize_text": False}, digits, "false"),
    ):
        response = client.audio.speech.create(
            model="omnivoice", voice="alloy", input=text, response_format="wav", extra_body=extra
        )
        np.testing.assert_array_equal(decode(response.content, "wav"), expected)
        assert response.response.headers["x-text-normalized"] == header
    answer = client.audio.speech.create(
        model="omnivoice", voice="alloy", input="Hello there.", response_format="pcm"
    )
    assert answer.response.headers["x-text-normalized"] == "false"  # nothing to change
    gradio = Client(server, verbose=False)
    for normalize_text, expected, said in ((True, words, True), (False, digits, False)):
        path, info, _ = gradio.predict(
            text,
            "Auto",
            OPENAI_VOICES["alloy"],
            "int4",
            seed=3,
            randomize_seed=False,
            normalize_text=normalize_text,
            api_name="/synthesize",
        )
        np.testing.assert_array_equal(sf.read(path, dtype="int16")[0], expected)
        assert ("numbers and dates read as words" in info) is said, info


def test_models_list_precisions_and_openai_names(client):
    models = {m.id for m in client.models.list()}
    assert {"omnivoice", "omnivoice-int4", "omnivoice-fp16", "tts-1", "tts-1-hd"} <= models
    assert "omnivoice-cuda" not in models  # the tiny artifacts have no cuda profile


@pytest.mark.parametrize(
    ("fields", "error", "param", "words"),
    [
        ({"input": ""}, openai.BadRequestError, "input", "required"),
        ({"input": "x" * 10_001}, openai.BadRequestError, "input", "limit is 10000"),
        ({"voice": "bob"}, openai.BadRequestError, "voice", "Unknown voice 'bob'"),
        (
            {"response_format": "wma"},
            openai.BadRequestError,
            "response_format",
            "this server writes wav",
        ),
        ({"model": "gpt-5"}, openai.NotFoundError, "model", "does not exist"),
        (
            {"instructions": "Speak cheerfully"},
            openai.BadRequestError,
            "instructions",
            "Valid English items",
        ),
        ({"speed": 50}, openai.BadRequestError, "speed", "must be a number from 0.1 to 10"),
        ({"speed": 0}, openai.BadRequestError, "speed", "must be a number from 0.1 to 10"),
        (
            {"extra_body": {"language": "Klingon"}},
            openai.BadRequestError,
            "language",
            "Unknown language 'Klingon'",
        ),
        (
            {"extra_body": {"preset": "quick"}},
            openai.BadRequestError,
            "preset",
            "unknown preset 'quick'; use one of best, balanced, fast, turbo",
        ),
        (
            {"extra_body": {"seed": -1}},
            openai.BadRequestError,
            "seed",
            "seed must be a whole number >= 0, got -1",
        ),
        (
            {"extra_body": {"normalize_text": "yes"}},
            openai.BadRequestError,
            "normalize_text",
            "must be true",
        ),
        (
            {"input": "5" * 9000},
            openai.BadRequestError,
            "input",
            "over 10000 characters long with its numbers read as words",
        ),
    ],
)
def test_errors_in_openai_shape(client, fields, error, param, words):
    request = {
        "model": "omnivoice",
        "voice": "alloy",
        "input": "Hi.",
        "response_format": "wav",
        **fields,
    }
    with pytest.raises(error) as caught:
        client.audio.speech.create(**request)
    body = caught.value.body
    assert body["type"] in ("invalid_request_error",) and body["param"] == param, body
    assert words in body["message"], body["message"]


def test_the_key_is_required_when_set_and_bad_bodies_are_refused(server):
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"{server}/v1", api_key="wrong", max_retries=0).models.list()
    assert httpx.get(f"{server}/v1/models").status_code == 401
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    response = httpx.post(f"{server}/v1/audio/speech", content=b"{not json", headers=headers)
    assert response.status_code == 400 and "not valid JSON" in response.json()["error"]["message"]
    response = httpx.post(
        f"{server}/v1/audio/speech", content=b"[" + b"1," * 600_000 + b"1]", headers=headers
    )
    assert response.status_code == 413
    assert urllib.request.urlopen(server).status == 200  # the page needs no key


def test_mcp_lists_the_tools_and_synthesizes(server):
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    async def session():
        async with streamablehttp_client(f"{server}/gradio_api/mcp/") as (read, write, _):
            async with ClientSession(read, write) as mcp:
                await mcp.initialize()
                tools = {tool.name: tool for tool in (await mcp.list_tools()).tools}
                result = await mcp.call_tool(
                    "synthesize",
                    {
                        "text": SAYING,
                        "language": "English",
                        "instruct": "female",
                        "precision": "int4",
                        "seed": 7,
                        "randomize_seed": False,
                    },
                )
                at_16k = await mcp.call_tool(
                    "synthesize",
                    {"text": SAYING, "precision": "int4", "seed": 7, "sample_rate": 16000},
                )
                worded = await mcp.call_tool(
                    "synthesize", {"text": SAYING, "precision": "int4", "seed": 7, "words": True}
                )
                return tools, result, at_16k, worded

    tools, result, at_16k, worded = asyncio.run(session())
    assert {"synthesize", "clone", "save_voice_prompt", "transcribe"} <= set(tools)
    described = tools["synthesize"]
    assert "10,000 characters" in described.inputSchema["properties"]["text"]["description"]
    assert "wav" in described.description
    normalize = described.inputSchema["properties"]["normalize_text"]
    assert normalize["default"] is True and "as words" in normalize["description"], normalize
    rate = described.inputSchema["properties"]["sample_rate"]
    assert rate["default"] == 24000 and rate["type"] == "integer", rate
    words = described.inputSchema["properties"]["words"]
    assert words.get("default", False) is False and words["type"] == "boolean", words
    assert "words" not in described.inputSchema.get("required", [])
    told = " ".join(c.text for c in worded.content)
    assert not worded.isError, told
    vtt = httpx.get(re.search(r"http[^'\s]*\.vtt", told).group(0)).text
    assert vtt.startswith("WEBVTT") and re.search(r"<00:00:\d\d\.\d{3}>Hello", vtt), vtt
    told = " ".join(c.text for c in at_16k.content)
    assert not at_16k.isError, told
    wav = httpx.get(told[told.index("http") :].split("'")[0]).content
    assert sf.info(io.BytesIO(wav)).samplerate == 16000
    text = " ".join(c.text for c in result.content)
    assert not result.isError and "seed 7" in text, text
    url = text[text.index("http") :].split("'")[0]
    via_mcp = sf.read(io.BytesIO(httpx.get(url).content), dtype="int16")[0]
    path, _, _ = Client(server, verbose=False).predict(
        SAYING, "English", "female", "int4", seed=7, randomize_seed=False, api_name="/synthesize"
    )
    np.testing.assert_array_equal(via_mcp, sf.read(path, dtype="int16")[0])
    # and its captions: an SRT file's URL, whose one cue is the text
    srt = pytest.importorskip("srt")
    captions = re.search(r"http[^'\s]*\.srt", text)
    assert captions, text
    (cue,) = srt.parse(httpx.get(captions.group(0)).text)
    assert cue.content == SAYING and 0 <= cue.start.total_seconds() < cue.end.total_seconds()


def test_two_doors_share_one_line_in_order(client, server):
    """Four callers, through the OpenAI door and gradio_client in turn, arriving while the first
    is served: each gets its own audio, and they finish in the order they came."""
    gradio = Client(server, verbose=False)

    ahead = {}

    def through_openai(n):
        raw = client.audio.speech.with_raw_response.create(
            model="tts-1-hd",
            voice="auto",
            input=LONG,
            response_format="wav",
            extra_body={"seed": n, "language": "English"},
        )
        ahead[n] = int(raw.headers["x-queue-ahead"])
        return decode(raw.http_response.content, "wav")

    def through_gradio(n):
        path, _, _ = gradio.predict(
            LONG,
            "English",
            "",
            "int4",
            seed=n,
            randomize_seed=False,
            preset="best",
            num_step=32,
            api_name="/synthesize",
        )
        return sf.read(path, dtype="int16")[0]

    callers = [through_openai, through_gradio, through_openai, through_gradio]
    # each request's audio, made alone through its door
    alone = {n: callers[n](n) for n in range(len(callers))}
    # each arrives while the first is being served, after the one before took its place
    finished, results = in_arrival_order(server, callers)
    assert finished == [0, 1, 2, 3]
    # caller 2 found caller 0 served and caller 1 (gradio_client) waiting: one line
    assert ahead[2] == 2
    for n, audio in results.items():
        np.testing.assert_array_equal(audio, alone[n])


def test_a_full_line_answers_busy(cpu_artifacts, tmp_path):
    """With no room to wait (--max-waiting 0), a second request while one is served gets 429."""
    with running_app(
        [
            *("--artifacts", str(cpu_artifacts), "--max-waiting", "0", "--asr-model", "none"),
            *("--concurrency", "1"),  # one under way, none waiting: the next is busy
        ],
        tmp_path / "busy.log",
        HF_HUB_OFFLINE="1",
    ) as url:
        busy = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
        with busy.audio.speech.with_streaming_response.create(
            model="tts-1-hd",
            voice="auto",
            input=LONG,
            response_format="pcm",
            extra_body={"sentences": True},
        ) as first:
            chunks = first.iter_bytes()
            next(chunks)  # the first piece is out: it holds the line until its last piece
            with pytest.raises(openai.RateLimitError) as caught:
                busy.audio.speech.create(model="omnivoice", voice="alloy", input="Me too.")
            assert (
                "busy" in caught.value.body["message"]
                and caught.value.response.headers["retry-after"]
            )
            rest = b"".join(chunks)
        assert len(rest) > 0
        assert busy.audio.speech.create(
            model="omnivoice", voice="alloy", input="Now me."
        ).content  # served again

        # A client that leaves half-way gives its turn back at once (its synthesis stops).
        with busy.audio.speech.with_streaming_response.create(
            model="tts-1-hd",
            voice="auto",
            input=LONG,
            response_format="pcm",
            extra_body={"sentences": True},
        ) as leaving:
            next(leaving.iter_bytes())
        deadline = time.time() + 15
        while True:
            try:
                assert busy.audio.speech.create(
                    model="omnivoice", voice="alloy", input="After you."
                ).content
                break
            except openai.RateLimitError:
                assert time.time() < deadline, "the turn of a client that left was never given back"
                time.sleep(0.2)


def test_without_a_key_the_endpoint_is_open(app_server):
    """A public Space sets no OMNIVOICE_API_KEY: anyone may call it, as they may use the page."""
    response = httpx.get(f"{app_server}/v1/audio/voices")
    assert response.status_code == 200 and response.json()["data"][0]["id"] == "auto"
    health = httpx.get(f"{app_server}/health").json()
    assert (
        health["status"] == "ok" and health["slots"] == CONCURRENCY and "int4" in health["offered"]
    )
    assert health["turns"] == "step" and health["parked"] == 0
    assert health["serving"] == 0 and health["waiting"] == 0, health
    # the kernel each loaded LLM multiplies with: fp32, as conftest's OMNIVOICE_MATMUL asks
    assert set(health["kernels"]) == set(health["loaded"])
    assert all(k == {"kernel": "fp32", "why": "asked for"} for k in health["kernels"].values())
