"""The voice library (``omnivoice_rt/voices.py``) on a real folder: what it lists, what it refuses, and
what it leaves on disk when writes fail or race; then its doors on a real server on 127.0.0.1
(HTTP's ``/v1/audio/voices``, the page's API and MCP, Wyoming's voices), called with ``httpx``,
``gradio_client``, the ``mcp`` client and the ``wyoming`` package's ``AsyncTcpClient``."""

from __future__ import annotations

import asyncio
import os
import threading
import time

import httpx
import numpy as np
import pytest
import soundfile as sf
from wyoming.client import AsyncTcpClient

from omnivoice_build.equivalence import write_reference
from omnivoice_rt import voices as voices_module
from omnivoice_rt.audio.formats import pcm16
from omnivoice_rt.request import DOOR_PRESET, Request
from omnivoice_rt.voice_prompt import VoicePrompt
from omnivoice_rt.voices import BUILTIN, VoiceLibrary
from tests.server.conftest import LIBRARY_KEY, describe, expected, speak


def prompt(frames: int = 50) -> VoicePrompt:
    codes = np.random.default_rng(frames).integers(0, 1024, (8, frames))
    return VoicePrompt(codes=codes, text="What I said.", rms=0.05)


def files(folder) -> list[str]:
    return sorted(path.name for path in folder.iterdir())


def test_lists_builtin_and_saved_voices_with_details(tmp_path):
    prompt(75).save(tmp_path / "legacy.npz")  # a voice saved before the library: no details
    (tmp_path / "not a voice.npz").write_bytes(b"x")  # not a voice name: never read
    (tmp_path / "broken.npz").write_bytes(b"not a zip")  # a voice name, not a voice
    (tmp_path / "stranger.json").write_text('{"kind": "other"}')
    library = VoiceLibrary(tmp_path, writable=True)
    library.add_design("storyteller", "male, low pitch", language="en-GB")
    library.add_prompt("me", prompt(100), language="German")
    saved = {entry.name: entry for entry in library.saved()}
    assert sorted(saved) == ["legacy", "me", "storyteller"]
    assert (saved["me"].kind, saved["me"].language, saved["me"].duration) == ("clone", "de", 4.0)
    assert saved["legacy"].duration == 3.0 and saved["legacy"].created.endswith("Z")
    assert (saved["storyteller"].instruct, saved["storyteller"].language) == (
        "male, low pitch",
        "en",
    )
    assert library.names()[: len(BUILTIN)] == [entry.name for entry in BUILTIN]
    assert library.options("storyteller") == {"language": "en", "instruct": "male, low pitch"}
    assert library.options("me")["voice_prompt"].endswith("me.npz")
    assert library.options("alloy")["instruct"] == voices_module.DESIGNED_VOICES["alloy"]
    with pytest.raises(ValueError, match="Unknown voice 'broken'; choose one of auto, alloy"):
        library.options("broken")


@pytest.mark.parametrize(
    "name",
    ["../x", "a/b", ".hidden", "", "x" * 65, "spaced name", "ca\u0301fe", "auto", "alloy", 7],
)
def test_hostile_and_taken_names_are_refused_and_nothing_is_written(tmp_path, name):
    library = VoiceLibrary(tmp_path, writable=True)
    with pytest.raises(ValueError, match="voice name|built-in voice"):
        library.add_design(name, "female")
    assert files(tmp_path) == []


def test_bad_designs_and_languages_are_refused(tmp_path):
    library = VoiceLibrary(tmp_path, writable=True)
    with pytest.raises(ValueError, match="Valid English items"):
        library.add_design("x", "speak cheerfully")
    with pytest.raises(ValueError, match="needs 'instruct'"):
        library.add_design("x", "  ")
    with pytest.raises(ValueError, match="Unknown language 'Klingon'"):
        library.add_prompt("x", prompt(), language="Klingon")
    assert files(tmp_path) == []


def test_a_name_in_use_is_refused_and_delete_frees_it(tmp_path):
    library = VoiceLibrary(tmp_path, writable=True)
    library.add_design("voice", "female")
    with pytest.raises(FileExistsError, match="exists already"):
        library.add_prompt("voice", prompt())
    assert files(tmp_path) == ["voice.json"]
    library.delete("voice")
    with pytest.raises(FileNotFoundError, match="no saved voice 'voice'"):
        library.delete("voice")
    library.add_prompt("voice", prompt())
    assert files(tmp_path) == ["voice.json", "voice.npz"]
    assert library.get("voice").kind == "clone"


def test_concurrent_writers_of_one_name_one_wins(tmp_path):
    """Eight threads, each with its own library over one folder (as separate processes would
    be), add the same name at once: exactly one succeeds, the others are told it is taken."""
    outcomes, start = [], threading.Barrier(8)

    def add(n: int) -> None:
        library = VoiceLibrary(tmp_path, writable=True)
        start.wait()
        try:
            if n % 2:
                library.add_prompt("same", prompt(10 + n))
            else:
                library.add_design("same", "female" if n % 4 else "male")
            outcomes.append("added")
        except FileExistsError:
            outcomes.append("taken")

    threads = [threading.Thread(target=add, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["added"] + ["taken"] * 7
    assert VoiceLibrary(tmp_path).get("same") is not None
    assert not [name for name in files(tmp_path) if name.startswith(".incoming-")]


def test_a_failed_write_leaves_nothing_and_the_library_is_bounded(tmp_path, monkeypatch):
    library = VoiceLibrary(tmp_path, writable=True)

    def failing_save(self, path):
        (tmp_path / "partial").write_bytes(b"")  # noqa: F841 - a marker that the save ran
        raise OSError("disk full")

    monkeypatch.setattr(VoicePrompt, "save", failing_save)
    with pytest.raises(OSError, match="disk full"):
        library.add_prompt("v", prompt())
    assert files(tmp_path) == ["partial"]  # no voice file, no temporary one
    monkeypatch.undo()
    monkeypatch.setattr(voices_module, "MAX_VOICES", 2)
    library.add_design("a", "female")
    library.add_design("b", "male")
    with pytest.raises(ValueError, match="full \\(2 voices\\); delete one first"):
        library.add_design("c", "male")
    (tmp_path / ".incoming-abc.npz").write_bytes(b"left by a writer that died")
    (tmp_path / "orphan.json").write_text('{"kind": "clone"}')  # a clone whose prompt never came
    assert [entry.name for entry in library.saved()] == ["a", "b"]
    # as young as another process's writes under way (a second server on the folder): kept
    VoiceLibrary(tmp_path, writable=True)
    assert files(tmp_path) == [".incoming-abc.npz", "a.json", "b.json", "orphan.json", "partial"]
    old = time.time() - voices_module.STALE_WRITE_S - 1
    for name in (".incoming-abc.npz", "orphan.json"):
        os.utime(tmp_path / name, (old, old))
    VoiceLibrary(tmp_path, writable=True)  # cleans what writers that died left
    assert files(tmp_path) == ["a.json", "b.json", "partial"]


def test_read_only_library_refuses_writes(tmp_path):
    library = VoiceLibrary(tmp_path)
    with pytest.raises(PermissionError, match="--voices-writable"):
        library.add_design("x", "female")
    with pytest.raises(PermissionError, match="read-only"):
        library.delete("x")
    assert VoiceLibrary().saved() == [] and not VoiceLibrary(None, writable=True).writable
    with pytest.raises(FileNotFoundError, match="no such folder"):
        VoiceLibrary(tmp_path / "missing")


# ----------------------------------------------------------------------------- its doors over HTTP


def test_voices_added_over_http_are_described_and_used_by_name(
    wyoming_server, int4_voice, voices_dir
):
    url, port, _ = wyoming_server
    headers = {"Authorization": f"Bearer {LIBRARY_KEY}"}
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
        audio, expected(int4_voice, "A story begins.", 3, instruct="male, low pitch", language="en")
    )
    _, audio = speak(port, "In my own voice.", 4, {"name": "mine"})
    np.testing.assert_array_equal(
        audio,
        expected(int4_voice, "In my own voice.", 4, voice_prompt=str(voices_dir / "mine.npz")),
    )
    # the OpenAI door offers them too, and a removed voice is gone from every door
    listed = httpx.get(f"{url}/v1/audio/voices", headers=headers).json()["data"]
    assert {"storyteller", "mine"} <= {voice["id"] for voice in listed}
    assert httpx.delete(f"{url}/v1/audio/voices/mine", headers=headers).status_code == 200
    types, _ = speak(port, "Gone?", 1, {"name": "mine"})
    assert types == ["error"]


def test_a_results_voice_is_kept_by_its_id_and_spoken_by_name(
    wyoming_server, int4_voice, voices_dir
):
    """Keep a voice: a speech response's X-Voice-Result, posted to the library under a name, is
    that result's voice (the runtime's ``Speech.voice_prompt`` of the same request), and a later
    call by that name, on another door, speaks in it."""
    url, port, _ = wyoming_server
    headers = {"Authorization": f"Bearer {LIBRARY_KEY}"}
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
    made = next(int4_voice.stream(request)).voice_prompt()
    saved = VoicePrompt.load(voices_dir / "kept.npz")
    np.testing.assert_array_equal(saved.codes, made.codes)
    assert saved.text == made.text and saved.rms == pytest.approx(made.rms)
    _, audio = speak(port, "Said again in it.", 5, {"name": "kept"})
    np.testing.assert_array_equal(
        audio,
        expected(int4_voice, "Said again in it.", 5, voice_prompt=str(voices_dir / "kept.npz")),
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
    wyoming_server, voices_dir, form, status, words
):
    url, _, _ = wyoming_server
    if form.get("files") == "too long":
        long = write_reference(
            str(voices_dir.parent / "long.wav"), seconds=125, rate=8000, channels=1
        )
        form["files"] = {"audio": ("long.wav", open(long, "rb").read())}
    before = sorted(path.name for path in voices_dir.iterdir())
    headers = {"Authorization": f"Bearer {LIBRARY_KEY}", **form.pop("headers", {})}
    response = httpx.post(f"{url}/v1/audio/voices", headers=headers, timeout=120, **form)
    assert response.status_code == status, response.text
    assert words in response.json()["error"]["message"]
    assert sorted(path.name for path in voices_dir.iterdir()) == before


def test_voice_writes_need_the_key_and_a_writable_library(wyoming_server, app_server):
    url, _, _ = wyoming_server
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
    keyless_server, wyoming_server, int4_voice, voices_dir
):
    """gradio_client saves a reference into the library (on a server without a key; with one, only
    the key's door writes) and clones it by name, with a style over it; MCP offers the same tools;
    Wyoming describes the voice next."""
    from gradio_client import Client, handle_file
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    reference = write_reference(str(voices_dir.parent / "page.wav"), seconds=2.5)
    with pytest.raises(Exception, match="with its API key only"):
        Client(wyoming_server[0], verbose=False).predict(
            "keyed-voice",
            handle_file(reference),
            "Hi.",
            "English",
            "int4",
            api_name="/save_to_library",
        )
    url, port, _ = keyless_server
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

    made = int4_voice.generate(
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
