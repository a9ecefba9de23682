"""The Wyoming door (Home Assistant), on a real server on 127.0.0.1, called with the ``wyoming``
package's ``AsyncTcpClient``, ``httpx`` and ``openai``. The voice library's doors:
tests/server/test_voices.py."""

from __future__ import annotations

import asyncio
import socket
import time

import httpx
import numpy as np
import openai
import pytest
from wyoming.client import AsyncTcpClient
from wyoming.event import Event
from wyoming.ping import Ping
from wyoming.tts import SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeVoice

from omnivoice_rt.audio.formats import pcm16
from omnivoice_rt.request import DOOR_PRESET, Request
from omnivoice_rt.voice_prompt import VoicePrompt
from omnivoice_rt.voices import DESIGNED_VOICES
from tests.conftest import in_arrival_order
from tests.server.conftest import (
    LIBRARY_KEY,
    answer,
    describe,
    expected,
    expected_dialogue,
    speak,
)

LONG = " ".join(
    f"This is sentence number {n} of a longer text, said slowly and clearly." for n in range(12)
)


@pytest.fixture
def server(wyoming_server):
    """The app with its Wyoming door, a writable voice library and an API key (conftest's)."""
    return wyoming_server


@pytest.fixture
def runtime(int4_voice):
    """The library's int4 model, which the server's answers must equal (conftest's, shared)."""
    return int4_voice


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


def test_a_script_speaks_each_name_in_the_librarys_voice_of_that_name(server, runtime):
    """``"script": true`` in a synthesize's data (or [voice:NAME] tags): the library's dialogue
    for the same seed and settings; an unknown speaker is a bad-request naming its line."""
    _, port, _ = server
    text = "alloy: Good morning.\necho: Morning!"
    types, audio = speak(port, text, 7, script=True, num_step=4)
    assert types[-1] == "audio-stop", types
    made = expected_dialogue(runtime, text, 7, num_step=4, normalize_text=True)
    np.testing.assert_array_equal(audio, pcm16(made.waveform))
    _, tagged = speak(port, "[voice:alloy] Good morning. [voice:echo] Morning!", 7, num_step=4)
    np.testing.assert_array_equal(tagged, audio)
    types, _ = speak(port, "alloy: Hi.\nZed: Hello.", 7, script=True)
    assert types == ["error"]
    _, paused = speak(port, text, 7, script=True, num_step=4, turn_pause=1.5)
    made = expected_dialogue(runtime, text, 7, num_step=4, normalize_text=True, turn_pause=1.5)
    np.testing.assert_array_equal(paused, pcm16(made.waveform))
    _, plain = speak(port, "Good morning.", 7, num_step=4, turn_pause=1.5)  # no script: unused
    assert len(plain) > 0


async def stream_events(
    port: int, start: dict, chunks: list[str], past_errors: bool = False
) -> list[Event]:
    """A stream's events: its start's data, its chunks, its stop; every answer to the end (its
    first error, or with ``past_errors`` its ``synthesize-stopped``)."""
    async with AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(Event("synthesize-start", start))
        for chunk in chunks:
            await client.write_event(SynthesizeChunk(chunk).event())
        await client.write_event(SynthesizeStop().event())
        events = []
        while (event := await asyncio.wait_for(client.read_event(), 120)) is not None:
            events.append(event)
            if event.type == "synthesize-stopped" or (event.type == "error" and not past_errors):
                return events


def audios(events: list[Event]) -> list[np.ndarray]:
    """Each audio-start ... audio-stop's samples."""
    said = []
    for event in events:
        if event.type == "audio-start":
            said.append(b"")
        elif event.type == "audio-chunk":
            said[-1] += event.payload
    return [np.frombuffer(audio, np.int16) for audio in said]


def test_a_streamed_script_keeps_each_speakers_voice_across_the_stream(server, runtime):
    """A stream with ``"script": true`` (or [voice:NAME] tags) speaks each sentence as it is
    complete in its speaker's voice, names and tags cut anywhere between chunks; a turn's first
    sentence after the stream's first has the turn's pause before it; a speaker's later
    sentence takes its first one's voice, as a one-voice stream's do."""
    _, port, _ = server
    chunks = ["alloy: Good mor", "ning.\nec", "ho: Morning! [voi", "ce:alloy] Bye now."]
    events = asyncio.run(stream_events(port, {"script": True, "seed": 7}, chunks))
    assert [e.type for e in events].count("audio-start") == 3, [e.type for e in events]
    assert events[-1].type == "synthesize-stopped"
    first, second, third = audios(events)
    alloy, echo = (dict(instruct=DESIGNED_VOICES[n]) for n in ("alloy", "echo"))
    np.testing.assert_array_equal(first, expected(runtime, "Good morning.", 7, **alloy))
    pause = round(0.4 * 24000)  # dialogue.TURN_PAUSE_S
    assert not second[:pause].any()
    np.testing.assert_array_equal(second[pause:], expected(runtime, "Morning!", 7, **echo))
    alone = asyncio.run(  # alloy's stream alone: its second sentence in its first one's voice
        stream_events(port, {"voice": {"name": "alloy"}, "seed": 7}, ["Good morning. Bye now."])
    )
    np.testing.assert_array_equal(third[pause:], audios(alone)[1])
    assert not third[:pause].any()
    slow = asyncio.run(  # a turn_pause of its own
        stream_events(port, {"script": True, "seed": 7, "turn_pause": 1.0}, chunks)
    )
    np.testing.assert_array_equal(audios(slow)[1][24000:], second[pause:])
    assert not audios(slow)[1][:24000].any()
    plain = asyncio.run(stream_events(port, {"seed": 7}, ["Note: the gate closes."]))
    assert len(audios(plain)) == 1 and plain[-1].type == "synthesize-stopped"  # no script


def test_the_events_speakers_give_names_their_voices_whole_or_streamed(server, runtime):
    """``"speakers"`` in a synthesize's or a stream's start's data gives a script's names their
    voices (a library voice or a design), as the OpenAI body's does: "María" speaks as echo,
    "Alloy" (any case) as alloy, exactly as their own named turns; a bad table is a bad-event."""
    _, port, _ = server
    text = "alloy: Good morning.\necho: Morning!"
    _, named = speak(port, text, 7, script=True, num_step=4)
    given = {"speakers": {"María": "echo"}, "script": True, "num_step": 4}
    _, mapped = speak(port, "Alloy: Good morning.\nMaría: Morning!", 7, **given)
    np.testing.assert_array_equal(mapped, named)
    chunks = ["Alloy: Good morning.\nMar", "ía: Morning!"]
    streamed = asyncio.run(stream_events(port, {**given, "seed": 7}, chunks))
    plain = asyncio.run(stream_events(port, {"script": True, "seed": 7, "num_step": 4},
                                      ["alloy: Good morning.\necho: Morning!"]))  # fmt: skip
    assert [len(a) for a in audios(streamed)] == [len(a) for a in audios(plain)] != []
    for first, second in zip(audios(streamed), audios(plain), strict=True):
        np.testing.assert_array_equal(first, second)
    types, _ = speak(port, text, 7, script=True, speakers=["María=echo"])
    assert types == ["error"]


async def failed_stream_then(port: int, document: str, text: str) -> list[Event]:
    """A stream whose document cannot be spoken, then a synthesize on the same connection: the
    answers up to that synthesize's audio-stop (or an error after the first)."""
    async with AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(Event("synthesize-start", {}))
        await client.write_event(SynthesizeChunk(document).event())
        await client.write_event(SynthesizeStop().event())
        events = [await asyncio.wait_for(client.read_event(), 60)]
        await client.write_event(Event("synthesize", {"text": text, "seed": 1}))
        while (event := await asyncio.wait_for(client.read_event(), 120)) is not None:
            events.append(event)
            if event.type in ("error", "audio-stop"):
                return events


def test_a_stream_of_many_small_chunks_sent_at_once_is_spoken_whole(server):
    """An LLM's answer streamed a word a chunk, every chunk sent at once (300 of them, while
    the first sentence is being made): every sentence is spoken, none dropped."""
    _, port, _ = server
    words = " ".join(f"Sentence {n} has five words." for n in range(60)).split(" ")
    chunks = [word + " " for word in words]
    events = asyncio.run(stream_events(port, {"seed": 1, "num_step": 4}, chunks))
    assert events[-1].type == "synthesize-stopped", [e.type for e in events][-3:]
    assert len(audios(events)) == 60


def test_a_sentence_that_cannot_be_spoken_loses_none_after_it(server):
    """Chunks sent at once while the first sentence is made (so the rest join): the sentence
    with nothing to speak ("?!") is an error event and the sentences after it are spoken; a
    stream that passes the length limit speaks what came before it, then is refused."""
    _, port, _ = server
    chunks = ["Good morning. ", "?! ", "Bye now. ", "See you."]
    events = asyncio.run(stream_events(port, {"seed": 1, "num_step": 4}, chunks, True))
    types = [e.type for e in events if e.type in ("audio-start", "error", "synthesize-stopped")]
    assert types == ["audio-start", "error", "audio-start", "audio-start", "synthesize-stopped"]
    assert "no letters or digits" in next(e for e in events if e.type == "error").data["text"]
    said = [f"Sentence {n} is here. " for n in range(20)]
    events = asyncio.run(stream_events(port, {"seed": 1, "num_step": 4}, [*said, "x" * 9_900]))
    assert len(audios(events)) == 20 and events[-1].type == "error"
    assert events[-1].data["code"] == "text-too-long"


def test_a_stream_sent_a_character_at_a_time_holds_no_other_client(server):
    """A stream of 9,000 characters of "Dr. " (no sentence ever ends), a character an event, as
    fast as they go: the connection stays open (chunks that come faster than they are read join
    the one queued before them), a second client's describe sent after them all is answered
    within 20 s while the stream is still open (each chunk is read once; rereading what was held
    took the event loop over a minute), and once the stream's client leaves without a stop, a
    synthesize is served."""
    _, port, _ = server

    async def run() -> float:
        async with AsyncTcpClient("127.0.0.1", port) as hostile:
            await hostile.write_event(Event("synthesize-start", {"seed": 1}))
            for char in "Dr. " * 2250:
                await hostile.write_event(SynthesizeChunk(char).event())
            async with AsyncTcpClient("127.0.0.1", port) as other:
                started = time.monotonic()
                assert (await describe(other)).tts  # (describe waits at most 30 s)
                took = time.monotonic() - started
            await hostile.write_event(Ping(text="still here").event())
            event = await asyncio.wait_for(hostile.read_event(), 60)
            assert event is not None and event.type == "pong", event
            return took

    assert asyncio.run(run()) < 20
    types, audio = speak(port, "Good evening.", 1, num_step=4)
    assert types[-1] == "audio-stop" and len(audio) > 0


def test_a_streamed_ssml_document_is_spoken_whole_at_its_end(server):
    """A stream that starts with "<": an SSML document, read whole at the stream's stop, as a
    synthesize event's text is (its <voice> elements a script, its breaks honoured)."""
    _, port, _ = server
    document = (
        '<speak><voice name="alloy">Good morning.</voice><break time="500ms"/>'
        '<voice name="echo">Morning!</voice></speak>'
    )
    chunks = ["  ", document[:3], document[3:20], document[20:55], document[55:]]
    events = asyncio.run(stream_events(port, {"seed": 7, "num_step": 4}, chunks))
    assert events[-1].type == "synthesize-stopped", events[-1]
    (streamed,) = audios(events)
    types, whole = speak(port, document, 7, num_step=4)
    assert types[-1] == "audio-stop", types
    np.testing.assert_array_equal(streamed, whole)
    bad = asyncio.run(stream_events(port, {}, ["<speak><voice name='Zed'>", "Hi.</voice></speak>"]))
    assert bad[-1].type == "error" and "Zed" in bad[-1].data["text"], bad[-1]
    # on the same connection, the next synthesize is answered: the failed stream has ended
    answered = asyncio.run(failed_stream_then(port, "<speak>Hi <oops</speak>", "Hello after."))
    assert [e.type for e in answered][0] == "error" and answered[-1].type == "audio-stop"
    # a text that only starts with "<" is no document: spoken a sentence at a time
    plain = asyncio.run(stream_events(port, {"seed": 7}, ["<", "3 you. See you soon."]))
    assert len(audios(plain)) == 2 and plain[-1].type == "synthesize-stopped"


@pytest.mark.parametrize(
    "start, chunks, code, words",
    [
        ({"script": True}, ["alloy: Hi.\nZe", "d: Hello."], "unknown-voice", "line 2: no voice "),
        ({}, ["Hi. [voice:../", "x] Hello."], "bad-request", "[voice:../x] names no speaker"),
        ({"turn_pause": 9}, ["alloy: Hi."], "bad-event", "turn_pause must be 0 to 5"),
    ],
)
def test_a_streamed_script_with_an_unknown_speaker_is_dropped(server, start, chunks, code, words):
    _, port, _ = server
    events = asyncio.run(stream_events(port, start, chunks))
    assert events[-1].type == "error" and events[-1].data["code"] == code, events[-1]
    assert words in events[-1].data["text"], events[-1].data


def test_an_events_sample_rate_is_the_audios(server, runtime):
    """``sample_rate`` in the data: the audio at that rate (its audio-start and chunks say so),
    the runtime's for the same options, as long in seconds."""
    _, port, _ = server
    options = {"num_step": 4, "duration": 1.0, "sample_rate": 16000}
    types, audio = speak(port, "Good evening.", 7, **options)
    assert types[-1] == "audio-stop", types
    np.testing.assert_array_equal(audio, expected(runtime, "Good evening.", 7, **options))
    assert len(audio) == (24000 + 2 * 2400) * 2 // 3


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
        (
            Event("synthesize", {"text": "Hi.", "sample_rate": 4000}),
            "bad-event",
            "sample_rate must be a whole number from 8000 to 48000",
        ),
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
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=LIBRARY_KEY, max_retries=0)

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
        options = {"seed": 0, "normalize_text": False}  # (plain words: reading them is slower)
        request = build_request(text, {"voice_prompt": first, "frame_rate": 25.0}, options)
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
