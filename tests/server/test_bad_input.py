"""Bad input on every door gets one clear line naming the fix: the page's API through
gradio_client and raw HTTP (texts, languages, instructs, bounds, references, kinds), the OpenAI
door's bodies (OpenAI's error shape, the field as ``param``); odd but valid text is spoken.
(Hostile files: test_hostile.py; the limits on size and time: test_hardening.py.)"""

from __future__ import annotations

import httpx
import numpy as np
import pytest
import soundfile as sf
from gradio_client import Client, handle_file

from omnivoice_build.equivalence import write_reference
from tests.conftest import FIXED
from tests.server.conftest import KEY, api_call

AUTH = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture(scope="module")
def server(secured_server):
    """(url, upload folder, log) of the server with an API key and MCP."""
    return secured_server


@pytest.fixture(scope="module")
def client(app_server):
    return Client(app_server, verbose=False)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> str:
    return write_reference(str(tmp_path_factory.mktemp("reference") / "reference.wav"))


def settings(**changes) -> dict:
    return {**FIXED, **changes}


@pytest.mark.parametrize(
    "body,param,words",
    [
        (b"[" * 10_000 + b"]" * 10_000, None, "nested too deeply"),
        (b'{"input": "Hello \\ud800 world"}', "input", "U+D800"),
        (b'{"input": "Hello.", "speed": 1e-310}', "speed", "from 0.1 to 10"),
        (b'{"input": "Hello.", "speed": 1e-300}', "speed", "got 1e-300"),
        (b'{"input": "Hello.", "speed": 1' + b"0" * 400 + b"}", "speed", "from 0.1 to 10"),
        (b'{"input": "Hello.", "language": "en\\udc00"}', "language", "U+DC00"),
        (b'{"input": "Hello.", "instructions": "\\ud83d"}', "instructions", "U+D83D"),
    ],
)
def test_bad_bodies_are_400s_with_short_messages(server, body, param, words):
    url, _, _ = server
    response = httpx.post(
        f"{url}/v1/audio/speech",
        content=body,
        headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
    )
    error = response.json()["error"]
    assert (
        response.status_code == 400
        and error["type"] == "invalid_request_error"
        and error["param"] == param
    )
    assert words in error["message"] and len(error["message"]) < 300, error


def test_wrong_types_through_gradio_client_are_messages(server, reference):
    url, _, log = server
    client = Client(url, verbose=False)
    with pytest.raises(Exception, match="language.* must be a string"):
        client.predict("Hi.", 5, "", "int4", **FIXED, api_name="/synthesize")
    with pytest.raises(Exception, match="language.* must be a string"):
        client.predict(handle_file(reference), 5, api_name="/transcribe")
    answer = api_call(
        url,
        "synthesize",
        [
            "Hi \ud800 there.",
            "Auto",
            "",
            "int4",
            *FIXED.values(),
            "balanced",
            True,
            None,
            None,
            None,
            None,
        ],  # fmt: skip
    )
    assert "event: error" in answer and "U+D800" in answer, answer
    assert "Traceback" not in log.read_text()


@pytest.mark.parametrize(
    "text,language,instruct,overrides,message",
    [
        ("", "Auto", "", {}, "text is empty"),
        ("x" * 20_000, "Auto", "", {}, "limit is 10000"),
        ("\x00\x01\x02\x7f", "Auto", "", {}, "text is empty"),
        ("Hi.", "xx-nope", "", {}, "Unknown language"),
        ("Hi.", "Auto", "male, female", {}, "Conflicting"),
        ("Hi.", "Auto", "robot", {}, "Unsupported instruct"),
        (
            "Hi.",
            "Auto",
            "",
            {"guidance_scale": -5.0},
            "less than minimum",
        ),  # Gradio checks the slider's range
        ("Hi.", "Auto", "", {"guidance": -5.0}, "guidance_scale must be a finite number >= 0"),
        ("Hi.", "Auto", "", {"num_step": 10_000}, "greater than maximum"),
        ("Hi.", "Auto", "", {"num_step": 0}, "less than minimum"),
        ("Hi.", "Auto", "", {"speed": 0.0}, "less than minimum"),
        ("Hi.", "Auto", "", {"duration": 3600.0}, "greater than maximum"),
    ],
)
def test_bad_input_through_the_api(client, text, language, instruct, overrides, message):
    with pytest.raises(Exception, match=message):
        client.predict(
            text, language, instruct, "int4", **settings(**overrides), api_name="/synthesize"
        )


def test_odd_but_valid_text_is_spoken(client):
    for text in ("Hello\tworld\x07 — 你好 мир 123!", "ɐ ǝ ɥ ɯ 😀 ok"):
        path, info, _ = client.predict(text, "Auto", "", "int4", **FIXED, api_name="/synthesize")
        assert sf.read(path)[1] == 24000 and "s of audio" in info


def test_bad_references_through_the_api(client, tmp_path):
    rate = 24000
    cases = {
        "silent.wav": (np.zeros(rate * 2, np.float32), rate, "silent"),
        "tiny.wav": (0.3 * np.sin(np.arange(2400) / 5).astype(np.float32), rate, "at least 0.5 s"),
        "clipped-8k.wav": (
            np.clip(3 * np.sin(np.arange(8000 * 3) / 3), -1, 1).astype(np.float32),
            8000,
            None,
        ),
        "stereo-48k.wav": (
            0.2 * np.stack([np.sin(np.arange(48000 * 3) / 7)] * 2, 1).astype(np.float32),
            48000,
            None,
        ),
    }

    def clone(name: str):
        return client.predict(
            "Hi.",
            handle_file(str(tmp_path / name)),
            "Hi.",
            None,
            "Auto",
            "int4",
            **FIXED,
            api_name="/clone",
        )

    for name, (samples, sample_rate, message) in cases.items():
        sf.write(tmp_path / name, samples, sample_rate)
        if message:
            with pytest.raises(Exception, match=message):
                clone(name)
        else:
            assert sf.read(clone(name)[0])[1] == 24000
    good = tmp_path / "stereo-48k.wav"
    (tmp_path / "truncated.wav").write_bytes(good.read_bytes()[:2000])
    with pytest.raises(Exception, match="reference"):
        client.predict(
            "Hi.",
            handle_file(str(tmp_path / "truncated.wav")),
            "Hi.",
            None,
            "Auto",
            "int4",
            **FIXED,
            api_name="/clone",
        )


@pytest.mark.parametrize(
    "field,value,words",
    [
        ("sentences", "no", "'sentences' must be true or false"),
        ("language", {}, "language must be a string (a language name or code"),
        ("model", {}, "'model' must be a string"),
        ("voice", [], "'voice' must be a voice name"),
        ("response_format", 0, "'response_format' must be a string"),
    ],
)
def test_fields_are_of_their_kind_not_read_as_their_truth(server, field, value, words):
    url, _, _ = server
    body = {"input": "Hello.", "response_format": "wav", field: value}
    answer = httpx.post(f"{url}/v1/audio/speech", json=body, headers=AUTH, timeout=300)
    error = answer.json()["error"]
    assert answer.status_code == 400 and words in error["message"] and error["param"] == field


def test_the_page_api_takes_flags_and_languages_of_their_kind(server):
    url, _, log = server
    # randomize "no"; the older names, sample_rate and words left empty
    settings = [8, 2.0, 1.0, 0, 3, "no", True, True, "balanced", True, None, None, None, None]
    assert "event: error" in api_call(url, "synthesize", ["Hi.", "Auto", "", "int4", *settings])
    settings[5] = False
    assert "event: error" in api_call(url, "synthesize", ["Hi.", {}, "", "int4", *settings])
    text = log.read_text()
    assert "randomize_seed must be true or false" in text
    assert "language must be a string, a name or a code" in text
