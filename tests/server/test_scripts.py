"""Dialogue scripts on the OpenAI door (issue 53, item 2): ``"script": true`` for "Name:" lines,
``[voice:NAME]`` tags always; each name a voice of the server's library; the answer equals the
library's ``generate(script, speakers=...)`` for the same seed and preset, streamed turn by turn
or whole, its captions naming each turn's speaker; a script that cannot be spoken is a 400
naming its line. The grammar and the library: tests/runtime/test_dialogue.py."""

from __future__ import annotations

import base64

import httpx
import numpy as np
import pytest
import soundfile as sf

from omnivoice_rt import dialogue
from omnivoice_rt.audio.formats import pcm16
from omnivoice_rt.text.script import ScriptError
from tests.server.conftest import expected_dialogue, mcp_calls, text_of

SCRIPT = "alloy: Good morning.\necho: Morning! [pause:300ms] Coffee?\nalloy: Yes, please."


def speech(url: str, **fields) -> httpx.Response:
    body = {"model": "omnivoice", "voice": "auto", "seed": 3, "num_step": 4, **fields}
    return httpx.post(f"{url}/v1/audio/speech", json=body, timeout=300)


@pytest.fixture(scope="module")
def expected(int4_voice):
    """The library's dialogue for the same script, seed and the door's settings."""
    return expected_dialogue(int4_voice, SCRIPT, 3, num_step=4, normalize_text=True)


def test_a_script_is_the_librarys_dialogue_streamed_or_whole(app_server, expected):
    streamed = speech(app_server, input=SCRIPT, script=True, response_format="pcm")
    assert streamed.status_code == 200, streamed.text
    np.testing.assert_array_equal(
        np.frombuffer(streamed.content, np.int16), pcm16(expected.waveform)
    )
    whole = speech(
        app_server, input=SCRIPT, script=True, response_format="pcm", captions=True
    ).json()
    np.testing.assert_array_equal(
        np.frombuffer(base64.b64decode(whole["audio"]), np.int16), pcm16(expected.waveform)
    )
    speakers = [caption["speaker"] for caption in whole["captions"]]
    assert speakers == ["alloy", "echo", "echo", "alloy"]  # echo's pause splits its turn
    assert [c["start_sample"] for c in whole["captions"]] == [
        c.start_sample for c in expected.captions
    ]


def test_voice_tags_make_a_script_and_name_lines_need_asking(app_server, int4_voice):
    tagged = speech(app_server, input="[voice:echo] Hi. [voice:alloy] Hello.", captions=True)
    assert tagged.status_code == 200, tagged.text
    assert [c["speaker"] for c in tagged.json()["captions"]] == ["echo", "alloy"]
    ssml = '<speak><voice name="echo">Hi.</voice> <voice name="alloy">Hello.</voice></speak>'
    same = speech(app_server, input=ssml, captions=True)  # SSML's <voice>: no flag either
    assert same.status_code == 200, same.text
    assert same.json()["audio"] == tagged.json()["audio"]
    assert same.json()["captions"] == tagged.json()["captions"]
    # the body's voice speaks what no name claims: as its own named turn would, unnamed
    default = speech(app_server, input="Hi. [voice:alloy] Hello.", voice="echo", captions=True)
    assert default.status_code == 200, default.text
    assert default.json()["audio"] == tagged.json()["audio"]
    assert [c.get("speaker") for c in default.json()["captions"]] == [None, "alloy"]
    plain = speech(app_server, input="Note: the gate closes.", captions=True).json()
    assert [c.get("speaker") for c in plain["captions"]] == [None]
    assert plain["captions"][0]["written"] == "Note: the gate closes."


def test_the_body_speakers_give_names_outside_the_library_a_voice(app_server):
    """``speakers`` (beyond OpenAI's) gives a script's names their voices, as the page's table
    does: "María" (no library voice can be named so) speaks as the library's echo, exactly as
    a turn of echo's; "Alloy:" is the library's alloy (a name in any case); and the body's
    refusals name ``speakers`` (a path as a voice reads no file: it is no voice)."""
    said = speech(
        app_server, input="María: Hi.\nAlloy: Hello.", script=True, captions=True,
        speakers={"María": "echo"},
    )  # fmt: skip
    assert said.status_code == 200, said.text
    named = speech(app_server, input="echo: Hi.\nalloy: Hello.", script=True, captions=True)
    assert said.json()["audio"] == named.json()["audio"]
    assert [c["speaker"] for c in said.json()["captions"]] == ["María", "Alloy"]
    for fields, words in [
        ({"speakers": {"María": "echo"}, "script": False, "input": "Hi."}, "script's voices"),
        ({"speakers": ["María=echo"]}, "must map each speaker's name"),
        ({"speakers": {f"S{n}": "echo" for n in range(17)}}, "at most 16"),
        ({"speakers": {"María": "lute, shrill"}}, "neither a voice of the library"),
        ({"speakers": {"María": "/etc/passwd"}}, "neither a voice of the library"),  # no file
        ({"speakers": {"../x": "echo"}}, "is no speaker's name"),
    ]:
        answer = speech(app_server, **{"input": "María: Hi.", "script": True, **fields})
        assert answer.status_code == 400, answer.text
        error = answer.json()["error"]
        assert error["param"] == "speakers" and words in error["message"], error


@pytest.mark.parametrize(
    "fields, words",
    [
        ({"input": "alloy: Hi.\nZed: Hello."}, "line 2: no voice for speaker 'Zed'"),
        ({"input": "alloy: Hi.\necho:\n\nalloy: Bye."}, "line 2: 'echo' has no text"),
        ({"input": "Hi [voice:../x] there"}, r"line 1: [voice:../x] names no speaker"),
        ({"input": "alloy: Hi.\n<b>echo</b>: Yo."}, "line 2: '<b>echo</b>' is no speaker's"),
        ({"input": '<speak><voice name="Zed">Hi.</voice></speak>'}, "no voice for speaker 'Zed'"),
        ({"input": '<speak><voice name="a/b">Hi.</voice></speak>'}, "takes a speaker's name"),
        ({"input": "alloy: Hi.", "turn_pause": 60}, "turn_pause must be 0 to 5"),
        ({"input": "alloy: Hi.", "turn_pause": "long"}, "turn_pause must be 0 to 5"),
        ({"input": "alloy: Hi.", "turn_pause": 10**400}, "turn_pause must be 0 to 5"),
        ({"input": "alloy: Hi.", "duration": 2}, "leave duration out"),
        ({"input": "alloy: Hi.\necho: Yo.", "speed": 99}, "speed must be"),
        ({"input": "alloy: " + "Hi. " * 2_600}, "the limit is 10,000 here"),  # a text's
    ],
)
def test_a_script_that_cannot_be_spoken_is_a_400_naming_its_line(app_server, fields, words):
    answer = speech(app_server, script=True, **fields)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert words in error["message"], error
    assert error["param"] in ("input", "turn_pause", "duration", "speed"), error


def test_the_pages_api_and_mcp_speak_a_script(app_server, expected):
    """``/script`` (the page's Script tab) through gradio_client: the same dialogue; a speaker's
    voice given in ``speaker_voices`` replaces the library's of that name; MCP's tool likewise."""
    from gradio_client import Client

    client = Client(app_server, verbose=False)
    fixed = dict(language="Auto", precision="int4", seed=3, randomize_seed=False, num_step=4)
    path, info, _, lines = client.predict(SCRIPT, "", **fixed, api_name="/script")
    np.testing.assert_array_equal(sf.read(path, dtype="int16")[0], pcm16(expected.waveform))
    assert "3 turns of 2 speakers" in info and "echo: Morning" in lines, (info, lines)
    other, _, _, _ = client.predict(SCRIPT, "echo=female, high pitch", **fixed, api_name="/script")
    assert not np.array_equal(sf.read(other, dtype="int16")[0], pcm16(expected.waveform))
    # a path in the speakers' table names no file of the server: it is no voice and no name
    with pytest.raises(Exception, match="'/etc/passwd' is neither a voice of the library"):
        client.predict(SCRIPT, "echo=/etc/passwd", **fixed, api_name="/script")
    with pytest.raises(Exception, match="is no speaker's name"):
        client.predict(SCRIPT, "../../etc/passwd=female", **fixed, api_name="/script")
    with pytest.raises(Exception, match="line 2: no voice for speaker 'Zed'"):
        client.predict("alloy: Hi.\nZed: Yo.", "", **fixed, api_name="/script")
    with pytest.raises(Exception, match=r"speakers, line 1 \('echo'\): write NAME=VOICE"):
        client.predict(SCRIPT, "echo", **fixed, api_name="/script")
    too_many = "\n".join(f"S{n}=echo" for n in range(17))
    with pytest.raises(Exception, match="speakers: at most 16, one NAME=VOICE a line"):
        client.predict(SCRIPT, too_many, **fixed, api_name="/script")


def test_the_speakers_table_gains_each_new_name_once():
    """The page fills the speakers' table with the names the script uses, a row each, keeping
    the visitor's rows as they are; /script is given the table as NAME=VOICE lines (the same
    reading as the command line's --speaker), an empty row an empty line, so that an error's
    line is its row, and a cell's pasted line break a space."""
    from omnivoice_rt.server.page.script import named_rows, table_lines

    text = "Ann: Hi.\nBob: Yo.\nMaría: Hola."
    rows = named_rows(text, [["Bob", "female"], ["", None]])
    assert rows == [["Bob", "female"], ["", ""], ["Ann", ""], ["María", ""]]
    assert named_rows(text, rows) == rows  # typing on adds nothing twice
    assert named_rows("Ann: Hi.\nBob:", rows) == rows  # a script half written
    assert table_lines(rows) == "Bob=female\n\nAnn=\nMaría="
    assert named_rows("", [["A=B", "echo"], [0, "x"]]) == [["A=B", "echo"], ["0", "x"]]
    pasted = [[" Ann ", "female,\nlow pitch"], ["", ""], [None, "female"], [""]]
    assert table_lines(pasted) == "Ann=female, low pitch\n\n=female"
    with pytest.raises(ScriptError, match=r"speakers, line 3 \('=female'\): write NAME=VOICE"):
        dialogue.given_voices(table_lines(pasted).splitlines(), "speakers, line")


def test_mcp_has_a_script_tool(keyless_server):
    url, _, _ = keyless_server
    (result,) = mcp_calls(url, [("script", {"text": SCRIPT, "seed": 3, "num_step": 4})])
    assert not result.isError and "3 turns of 2 speakers" in text_of(result), text_of(result)
