"""The server as an attacker meets it: started as the Space starts it (``python app.py``, the same
``main`` and mount), with ``OMNIVOICE_API_KEY`` set and MCP on, on 127.0.0.1.

Every door that takes a file (the page, gradio_client, the raw HTTP API, MCP) is asked for a
planted secret file and for ``/proc/self/environ`` (which holds the API key): neither may be
copied into Gradio's upload folder, nor served by ``/gradio_api/file=``, and no answer may name
the upload folder, and the log has no traceback. (Clients that go away: test_clients_that_leave.py;
bad input: test_bad_input.py, on the same server.)
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import httpx
import numpy as np
import pytest
import soundfile as sf
from gradio_client import Client, handle_file

from omnivoice_build.equivalence import write_reference
from tests.conftest import FIXED, ROOT, TRANSCRIPT, running_app
from tests.server.conftest import KEY, api_call, mcp_calls, text_of

MARK = b"PLANTED-SECRET-7f3a"
ONE_PIECE = (
    "This is a long sentence, said slowly and clearly, with many words in it to make the work last."
)
LONG = " ".join(
    f"This is sentence number {n} of a longer text, said slowly and clearly." for n in range(8)
)


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> Path:
    """A real wav outside every upload folder, with a secret after its samples."""
    folder = tmp_path_factory.mktemp("private")
    path = Path(write_reference(str(folder / "secret.wav")))
    path.write_bytes(path.read_bytes() + MARK)
    return path


@pytest.fixture(scope="module")
def server(secured_server):
    return secured_server


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> str:
    return write_reference(str(tmp_path_factory.mktemp("reference") / "reference.wav"))


def file_data(path) -> dict:
    return {"path": str(path), "meta": {"_type": "gradio.FileData"}}


def leaked(uploads: Path) -> list[str]:
    """Files of the upload folder that hold the planted secret or the API key."""
    return [
        str(p)
        for p in uploads.rglob("*")
        if p.is_file() and (MARK in p.read_bytes() or KEY.encode() in p.read_bytes())
    ]


def page_call(url: str, elem_id: str, data: list) -> dict:
    """What the page's button ``elem_id`` gets back, called as the browser calls it (queue/join)."""
    config = httpx.get(f"{url}/config").json()
    button = next(
        c["id"] for c in config["components"] if c.get("props", {}).get("elem_id") == elem_id
    )
    index = next(
        i for i, d in enumerate(config["dependencies"]) if any(t[0] == button for t in d["targets"])
    )
    session = f"attacker-{index}-{time.monotonic_ns()}"
    body = {
        "data": data,
        "fn_index": index,
        "trigger_id": button,
        "session_hash": session,
        "event_data": None,
    }
    assert httpx.post(f"{url}/gradio_api/queue/join", json=body).status_code == 200
    with httpx.stream(
        "GET", f"{url}/gradio_api/queue/data", params={"session_hash": session}, timeout=120
    ) as events:
        for line in events.iter_lines():
            message = json.loads(line[5:]) if line.startswith("data:") else {}
            if message.get("msg") == "process_completed":
                return message
    raise AssertionError("the page's call never completed")


# ----------------------------------------------------------------------------- files


def test_mcp_calls_the_page_here_whatever_the_first_request_says(server):
    """Mounted, Gradio's MCP would build its client of the page's API from the first request's
    headers; this server tells it its own address. (First in the module: the client is made once.)"""
    url, _, _ = server
    lying = {"X-Gradio-Server": "http://127.0.0.1:1/", "X-Forwarded-Host": "127.0.0.1:1"}
    call = ("synthesize", {"text": "Hi.", "seed": 1, "randomize_seed": False, "num_step": 4})
    (first,) = mcp_calls(url, [call], headers=lying)
    (second,) = mcp_calls(url, [call])
    assert not first.isError and not second.isError, (text_of(first), text_of(second))


def test_no_door_copies_or_serves_a_file_it_was_not_given(server, planted):
    url, uploads, _ = server
    settings = [8, 2.0, 1.0, 2.0, 3, False, True, False, "balanced"]
    answers = []
    for target in (planted, Path("/proc/self/environ")):
        given = file_data(target)
        for name, data in (
            ("clone", ["Hi.", given, "Hi.", None, "Auto", "int4", *settings]),
            ("clone", ["Hi.", None, "", given, "Auto", "int4", *settings]),
            ("save_voice_prompt", [given, "Hi.", "int4"]),
            ("transcribe", [given, "Auto"]),
            ("dub", [given, "English"]),  # its File takes any type: the guard still refuses
        ):
            answer = api_call(url, name, data)
            assert "event: error" in answer, answer
            answers.append(answer)
        # the page's buttons, as the browser calls them
        for elem_id, data in (
            ("clone-generate", ["Hi.", given, "Hi.", None, "Auto", "int4", *settings, False]),
            ("ref-audio", [given, "Auto"]),
        ):
            answer = page_call(url, elem_id, data)
            assert not answer["success"], answer
            answers.append(json.dumps(answer))
        # MCP: a path, and this server's file URL for it.
        own = f"{url}/gradio_api/file={quote(str(target))}"
        results = mcp_calls(
            url,
            [
                ("clone", {"text": "Hi.", "ref_audio": str(target), "ref_text": "Hi."}),
                ("clone", {"text": "Hi.", "voice_prompt": own}),
                ("transcribe", {"ref_audio": str(target)}),
                ("save_voice_prompt", {"ref_audio": own, "ref_text": "Hi."}),
                ("transcribe", {"ref_audio": given}),  # a FileData object, not a string
                ("dub", {"subtitles_file": str(target)}),
                ("dub", {"subtitles_file": own}),
            ],
        )
        assert all(result.isError for result in results)
        answers += [text_of(result) for result in results]
        assert httpx.get(own).status_code == 403
    # A path relative to the server's folder: refused without saying where that folder is.
    answers.append(api_call(url, "transcribe", [file_data("tests/conftest.py"), "Auto"]))
    assert leaked(uploads) == []
    # No answer points at a copy, or says where the server runs.
    assert not [a for a in answers if str(uploads) in a or str(ROOT) in a], answers
    # nor quotes what the file holds (a subtitle parser's error would quote its first line)
    assert not [a for a in answers if MARK.decode() in a or KEY in a], answers
    for path in ("/etc/passwd", str(planted), f"{uploads}/../{planted.parent.name}/{planted.name}"):
        assert httpx.get(f"{url}/gradio_api/file={path}").status_code == 403
    for proxied in ("https://example.com/a.wav", "http%3A//127.0.0.1:1/x"):  # nobody's proxy
        refused = httpx.get(f"{url}/gradio_api/file={proxied}")  # before Gradio tries to fetch it
        assert (refused.status_code, refused.text) == (403, "File not allowed."), refused.text


def test_a_file_that_is_not_audio_is_refused_without_naming_its_copy(server, tmp_path):
    url, uploads, _ = server
    junk = tmp_path / "notes.wav"
    junk.write_bytes(b"just some text, not audio " * 40)
    client = Client(url, verbose=False)
    for call in (
        lambda: client.predict(handle_file(str(junk)), "Auto", api_name="/transcribe"),
        lambda: client.predict(
            "Hi.", handle_file(str(junk)), "Hi.", None, "Auto", "int4", **FIXED, api_name="/clone"
        ),
    ):
        with pytest.raises(Exception, match="could not read the reference audio") as caught:
            call()
        assert str(uploads) not in str(caught.value) and "notes.wav" not in str(caught.value)


def test_uploads_stay_in_the_upload_folder_and_the_api_schema_is_not_served(server):
    url, uploads, _ = server
    response = httpx.post(
        f"{url}/gradio_api/upload", files={"files": ("../../../../escaped.txt", b"hello")}
    )
    (path,) = response.json()
    assert (
        Path(path).resolve().is_relative_to(uploads.resolve())
        and Path(path).read_bytes() == b"hello"
    )
    assert not list(uploads.parent.parent.glob("escaped.txt"))
    # with a key set as without, nothing to read there
    for route in ("/openapi.json", "/docs", "/redoc"):
        assert httpx.get(f"{url}{route}").status_code == 404


def test_mcp_tools_take_uploads_leave_optional_files_out_and_pass_results_on(server, reference):
    url, _, _ = server
    uploaded = httpx.post(
        f"{url}/gradio_api/upload", files={"files": open(reference, "rb")}
    ).json()[0]
    clone = {
        "text": "Hello from MCP.",
        "ref_text": TRANSCRIPT,
        "seed": 5,
        "randomize_seed": False,
        "num_step": 4,
        "duration": 1.0,
        "precision": "int4",
    }
    results = mcp_calls(
        url,
        [
            ("clone", {**clone, "ref_audio": uploaded}),  # voice_prompt left out
            ("clone", {**clone, "ref_audio": uploaded, "voice_prompt": ""}),  # or empty
            ("transcribe", {"ref_audio": uploaded}),
            ("save_voice_prompt", {"ref_audio": uploaded, "ref_text": TRANSCRIPT}),
        ],
    )
    assert not [text_of(r) for r in results if r.isError]
    assert TRANSCRIPT in text_of(results[2])
    prompt_url = text_of(results[3]).strip()
    assert prompt_url.startswith(f"{url}/gradio_api/file=") and prompt_url.endswith(".npz")
    # the server's own URL
    (again,) = mcp_calls(url, [("clone", {**clone, "voice_prompt": prompt_url})])
    assert not again.isError, text_of(again)

    def audio(result) -> np.ndarray:
        text = text_of(result)
        link = text[text.index(f"{url}/gradio_api/file=") :].split("'")[0]
        return sf.read(io.BytesIO(httpx.get(link).content), dtype="int16")[0]

    direct, _, _ = Client(url, verbose=False).predict(
        "Hello from MCP.",
        handle_file(reference),
        TRANSCRIPT,
        None,
        "Auto",
        "int4",
        num_step=4,
        duration=1.0,
        seed=5,
        randomize_seed=False,
        api_name="/clone",
    )
    expected = sf.read(direct, dtype="int16")[0]
    for result in (results[0], results[1], again):
        np.testing.assert_array_equal(audio(result), expected)


def test_lone_surrogates_are_refused_by_the_library_and_the_cli(cpu_artifacts):
    from omnivoice_rt.model import OmniVoiceONNX

    voice = OmniVoiceONNX.load(cpu_artifacts, "int4")
    for kwargs in (
        {"text": "Hi \ud800."},
        {"text": "Hi.", "instruct": "female\udfff"},
        {"text": "Hi.", "language": "\ud800"},
    ):
        with pytest.raises(ValueError, match="surrogate"):
            voice.generate(**kwargs)
    # A command line's undecodable bytes arrive as lone surrogates (surrogateescape).
    command = [
        sys.executable.encode(),
        b"-m",
        b"omnivoice_rt",
        b"synthesize",
        b"--model-dir",
        str(cpu_artifacts).encode(),
        b"--precision",
        b"int4",
        b"--text",
        b"Hello \xff world",
        b"--output",
        b"/dev/null",
    ]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 2 and "surrogate" in done.stderr and "Traceback" not in done.stderr, (
        done.stderr
    )


# ----------------------------------------------------------------------------- after a stop


def test_a_normal_stop_leaves_no_upload_folder(cpu_artifacts, tmp_path):
    temp = tmp_path / "tmp"
    temp.mkdir()
    with running_app(
        ["--artifacts", str(cpu_artifacts), "--asr-model", "none"],
        tmp_path / "app.log",
        HF_HUB_OFFLINE="1",
        TMPDIR=str(temp),
    ) as url:
        (folder,) = temp.glob("omnivoice-uploads-*")
        big = tmp_path / "big.wav"
        big.write_bytes(b"RIFF" + bytes(21 << 20))  # over the 20 MB limit: refused
        assert (
            httpx.post(f"{url}/gradio_api/upload", files={"files": open(big, "rb")}).status_code
            == 413
        )
        assert (
            httpx.post(f"{url}/gradio_api/upload", files={"files": ("a.wav", b"x")}).status_code
            == 200
        )
    assert not folder.exists(), sorted(folder.rglob("*"))


def test_a_named_upload_folder_is_pruned_of_what_refused_uploads_leave(tmp_path, monkeypatch):
    """Only what Gradio names: its temporary uploads and hash folders; another program's empty
    files and folders in a shared folder stay."""
    from omnivoice_rt.server.gradio_guard import prune_uploads

    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path))
    hashed = "0123456789abcdef" * 4
    (tmp_path / hashed).mkdir()
    (tmp_path / hashed / "empty.wav").write_bytes(b"")
    (tmp_path / "tmpk2j3h4").write_bytes(b"")
    (tmp_path / ("fedcba9876543210" * 4)).mkdir()
    (tmp_path / ("fedcba9876543210" * 4) / "result.wav").write_bytes(b"RIFF")
    (tmp_path / "someone-else").mkdir()
    (tmp_path / "someone-else.lock").write_bytes(b"")
    prune_uploads()
    left = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*"))
    kept = "fedcba9876543210" * 4
    assert left == [kept, f"{kept}/result.wav", "someone-else", "someone-else.lock"], left


def test_the_server_will_not_start_if_gradio_would_copy_any_file():
    import gradio as gr

    from omnivoice_rt.server.gradio_guard import check_file_guard

    with gr.Blocks() as demo:
        gr.Textbox()
    with pytest.raises(RuntimeError, match="hand out any file"):
        check_file_guard(demo)  # not marked launched: Gradio checks nothing
    demo.has_launched = True
    check_file_guard(demo)


def test_mcp_dubs_a_subtitle_file_sent_as_a_data_uri_or_an_upload(server, tmp_path):
    """``dub`` over MCP: a data: URI (saved under a name of Gradio's, no .srt) is read by its
    first line, as an uploaded .vtt is by its name; each result is a track and its captions."""
    import base64

    url, _, _ = server
    srt = "1\n00:00:00,500 --> 00:00:02,000\nGood evening.\n"
    vtt = tmp_path / "film.vtt"
    vtt.write_text("WEBVTT\n\n00:00.500 --> 00:02.000\nGood evening.\n", encoding="utf-8")
    uploaded = httpx.post(f"{url}/gradio_api/upload", files={"files": open(vtt, "rb")}).json()[0]
    data = "data:application/x-subrip;base64," + base64.b64encode(srt.encode()).decode()
    fast = {"language": "English", "num_step": 4, "seed": 1, "randomize_seed": False}
    results = mcp_calls(
        url,
        [
            ("dub", {"subtitles_file": data, **fast}),
            ("dub", {"subtitles_file": uploaded, **fast}),
            ("dub", {"subtitles_file": "data:text/plain;base64,bm90IGN1ZXM=", **fast}),
        ],
    )
    for result in results[:2]:
        assert not result.isError, text_of(result)
        assert "1 cues in 2.00 s of track" in text_of(result) and ".srt" in text_of(result)
    assert results[2].isError and "cue 1 (line 1)" in text_of(results[2])
