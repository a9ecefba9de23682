"""Turns under real synthesis: the server's ``Service`` over the tiny int4 model, requests from
several threads at once as the doors make them. A short request behind a long one finishes
first, and every request's audio is byte-identical to the same request served alone, whatever
runs beside it (the scheduler: tests/server/test_turns.py)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from omnivoice_build.equivalence import write_reference
from omnivoice_rt.request import DOOR_PRESET, Request
from omnivoice_rt.server.serving import Config, Service

LONG = " ".join(f"This is sentence number {n} of a long text, said slowly." for n in range(10))


def request(text: str, seed: int, **options) -> Request:
    return Request.from_options({"text": text, "seed": seed, **options}, DOOR_PRESET)


def audio(service: Service, made: Request, whole: bool, **how) -> np.ndarray:
    """The request's audio as the door gets it: the whole result, or the pieces joined."""
    pieces = service.speak("int4", made, whole=whole, sentences=not whole, **how)
    return np.concatenate([piece.waveform for piece in pieces])


@pytest.fixture(scope="module", params=["step", "request"])
def service(request, cpu_artifacts):
    return Service(Config(str(cpu_artifacts), "int4", concurrency=8, turns=request.param))


def test_a_short_request_behind_a_long_one_finishes_first(cpu_artifacts):
    service = Service(Config(str(cpu_artifacts), "int4", concurrency=2, turns="step"))
    long, short = request(LONG, 1, preset="best"), request("Hi there.", 2)
    alone = {"long": audio(service, long, True), "short": audio(service, short, True)}
    finished, made, running = [], {}, threading.Event()

    def told(fraction, desc=""):
        if fraction > 0.1:  # the long one is well under way
            running.set()

    def run(name, which, **how):
        made[name] = audio(service, which, True, **how)
        finished.append(name)

    first = threading.Thread(target=run, args=("long", long), kwargs={"progress": told})
    first.start()
    assert running.wait(60)
    run("short", short)
    first.join(120)
    assert finished == ["short", "long"]
    for name, waveform in made.items():
        np.testing.assert_array_equal(waveform, alone[name], err_msg=name)
    # /metrics: the long one waited for the CPU after its first turn; every request had a first
    counts = {
        sample.name: sample.value
        for family in text_string_to_metric_families(service.metrics.scrape().decode())
        for sample in family.samples
        if sample.name.endswith("_count")
    }
    assert counts["omnivoice_turn_wait_seconds_count"] >= 1
    assert counts["omnivoice_first_turn_wait_seconds_count"] == 4
    assert counts["omnivoice_synthesis_seconds_count"] == 4


def test_a_streamed_long_text_starts_with_a_short_piece_and_a_whole_one_is_upstreams(
    cpu_artifacts,
):
    """``--first-piece``: a streamed long text's first piece is about a sentence and the next
    grow (its first audio sooner while others share the CPU); 0 gives upstream's ~15 s pieces,
    which a whole answer always has."""
    made = request(f"{LONG} {LONG}", 5)
    quick = Service(Config(str(cpu_artifacts), "int4"))  # the default: 4 s
    plain = Service(Config(str(cpu_artifacts), "int4", first_piece=0))
    streamed, upstream = list(quick.speak("int4", made)), list(plain.speak("int4", made))
    (whole,) = quick.speak("int4", made, whole=True)
    assert [t for piece in upstream for t in piece.texts] == whole.texts
    assert len(streamed) > len(upstream) > 1
    assert streamed[0].seconds < 0.5 * upstream[0].seconds
    joined = " ".join(t for piece in streamed for t in piece.texts)
    assert joined.split() == made.text.split()


def test_six_requests_of_every_kind_together_each_equal_to_alone(service, tmp_path):
    """Auto voice, a design, a clone from a recording, a saved voice; one word to ten sentences;
    best, balanced and turbo; streamed and whole: started together with fixed seeds, each
    result equal to its request alone."""
    recording = write_reference(str(tmp_path / "me.wav"), seconds=2.0)
    saved = tmp_path / "saved.npz"
    service.models.get("int4").create_voice_prompt(recording, "How I sound.").save(saved)
    kinds = {
        "word, auto, balanced, streamed": (request("Hello.", 3), False),
        "ten sentences, design, best, whole": (
            request(LONG, 4, instruct="female, low pitch", preset="best"),
            True,
        ),
        "clone, turbo, streamed": (
            request(
                "A cloned voice, two sentences. Here is the second.",
                5,
                ref_audio=recording,
                ref_text="How I sound.",
                preset="turbo",
            ),
            False,
        ),
        "saved voice, balanced, whole": (
            request("Spoken in a saved voice.", 6, voice_prompt=str(saved)),
            True,
        ),
        "three sentences, auto, best, streamed": (
            request("One sentence. Another one here. And a third.", 7, preset="best"),
            False,
        ),
        "design, turbo, whole": (
            request("Short and quick.", 8, instruct="male", preset="turbo"),
            True,
        ),
    }
    alone = {name: audio(service, made, whole) for name, (made, whole) in kinds.items()}
    together, errors, start = {}, [], threading.Barrier(len(kinds))

    def run(name, made, whole):
        start.wait()
        try:
            together[name] = audio(service, made, whole)
        except Exception as exc:  # noqa: BLE001 - reported below, with its request
            errors.append((name, exc))

    threads = [threading.Thread(target=run, args=(n, *kind)) for n, kind in kinds.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert not errors, errors
    for name in kinds:
        np.testing.assert_array_equal(together[name], alone[name], err_msg=name)
    assert service.turns.parked == 0 and service.line.serving == 0


def test_a_request_that_fails_midway_fails_alone(tmp_path, cpu_artifacts):
    """One poisoned request among four (a reference that is no audio, found in its turn, as it
    is encoded): it fails with its own clear error, the CPU goes on, and the other three finish
    with the audio they have alone."""
    service = Service(Config(str(cpu_artifacts), "int4", concurrency=4, turns="step"))
    junk = tmp_path / "junk.wav"
    junk.write_bytes(b"RIFF" + b"\0" * 400)
    kinds = {
        "first": request("The first of four requests. It has two sentences.", 11),
        "poisoned": request("Spoken in no voice at all.", 12, ref_audio=str(junk), ref_text="Hi."),
        "third": request("A third request, in a design.", 13, instruct="female"),
        "fourth": request("And the fourth one.", 14, preset="turbo"),
    }
    healthy = [name for name in kinds if name != "poisoned"]
    alone = {name: audio(service, kinds[name], False) for name in healthy}
    together, errors, start = {}, {}, threading.Barrier(len(kinds))

    def run(name):
        start.wait()
        try:
            together[name] = audio(service, kinds[name], False)
        except Exception as exc:  # noqa: BLE001 - the poisoned one's, checked below
            errors[name] = exc

    threads = [threading.Thread(target=run, args=(name,)) for name in kinds]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert list(errors) == ["poisoned"] and isinstance(errors["poisoned"], ValueError)
    assert "reference audio" in str(errors["poisoned"]), errors["poisoned"]
    for name in healthy:
        np.testing.assert_array_equal(together[name], alone[name], err_msg=name)
    assert service.turns.parked == 0 and service.line.serving == 0


def test_a_client_that_leaves_while_parked_frees_its_place(cpu_artifacts):
    """A long request parked behind a newcomer (which holds the CPU) whose client goes away
    leaves at once, with Cancelled, while the newcomer still computes; its place goes back."""
    from omnivoice_rt.errors import Cancelled

    service = Service(Config(str(cpu_artifacts), "int4", concurrency=2, turns="step"))
    gone, outcome, running = threading.Event(), {}, threading.Event()

    def long_told(fraction, desc=""):
        running.set()

    def leaving():
        try:
            made = request(LONG, 21, preset="best")
            audio(service, made, True, progress=long_told, should_stop=gone.is_set)
        except Cancelled as exc:
            outcome["left"] = str(exc)

    thread = threading.Thread(target=leaving)
    thread.start()
    assert running.wait(60)

    def newcomer_told(fraction, desc=""):
        if not gone.is_set():  # the newcomer holds the CPU: the long one is parked
            gone.set()
            thread.join(30)
            outcome["left_while_parked"] = not thread.is_alive()

    audio(service, request("Hello there.", 22), True, progress=newcomer_told)
    assert outcome["left_while_parked"], outcome
    assert "abandoned while it waited for its turn" in outcome["left"]
    assert service.line.serving == 0 and service.turns.parked == 0


def test_every_door_through_the_turns_gives_the_audio_it_gives_alone(app_server):
    """The server as it starts (``--turns step``, ``--concurrency 4``): the OpenAI door streamed
    by sentence and whole, and the page's API, all at once, each answer byte-identical to the
    same request through the same door alone."""
    import httpx
    import soundfile as sf
    from gradio_client import Client

    from tests.conftest import FIXED

    def openai(text: str, seed: int, sentences: bool) -> bytes:
        body = {"model": "omnivoice", "voice": "auto", "input": text, "seed": seed}
        body |= {"response_format": "pcm", "sentences": sentences}
        answer = httpx.post(f"{app_server}/v1/audio/speech", json=body, timeout=300)
        assert answer.status_code == 200, answer.text
        return answer.content

    def page(text: str, seed: int) -> bytes:
        settings = {**FIXED, "seed": seed}
        path, _, _ = Client(app_server, verbose=False).predict(
            text, "English", "", "int4", **settings, api_name="/synthesize"
        )
        return sf.read(path, dtype="int16")[0].tobytes()

    calls = {
        "openai, ten sentences by sentence": (openai, LONG, 31, True),
        "openai, two sentences whole": (openai, "Two sentences here. And the second.", 32, False),
        "page, a word": (page, "Hello.", 33),
        "page, a sentence": (page, "A sentence through the page.", 34),
    }
    alone = {name: door(*args) for name, (door, *args) in calls.items()}
    together, start = {}, threading.Barrier(len(calls))

    def run(name, door, *args):
        start.wait()
        together[name] = door(*args)

    threads = [threading.Thread(target=run, args=(n, *call)) for n, call in calls.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    for name in calls:
        assert together[name] == alone[name], name


def test_a_reference_is_encoded_in_turns(int4_voice, tiny_whisper, tmp_path):
    """Encoding a reference pauses between the codec encoder's graphs, and after transcribing
    one sent without its transcript: a boundary at each, the codes those made without."""
    from omnivoice_rt.audio.asr import Transcriber

    recording = write_reference(str(tmp_path / "me.wav"), seconds=2.0)
    calls = []
    told = int4_voice.create_voice_prompt(
        recording, "How I sound.", boundary=lambda: calls.append(1)
    )
    alone = int4_voice.create_voice_prompt(recording, "How I sound.")
    assert len(calls) == 2
    np.testing.assert_array_equal(told.codes, alone.codes)
    kept, int4_voice.asr = int4_voice.asr, Transcriber.load(str(tiny_whisper))
    try:  # the shared model is left as it was found
        calls.clear()
        int4_voice.create_voice_prompt(recording, boundary=lambda: calls.append(1))
    finally:
        int4_voice.asr = kept
    assert len(calls) == 3  # after the transcription too
