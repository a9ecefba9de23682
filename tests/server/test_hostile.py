"""Hostile input, all of it here: files and documents no honest user makes (audio and voice-prompt
bombs, truncated headers, random bytes, SSML with entities, external files or floods of elements),
each refused with a clear message, in bounded time and memory (a file's measured in a fresh
subprocess: its peak resident memory above what it had after importing), read from the parser
itself and then through the public doors, and the server alive afterwards. Elsewhere, by what they
judge: bad but honest input, one clear line on every door (test_bad_input.py); a stranger's
probe of connections, limits and the log (test_hardening.py); planted files and the API key
(test_security.py); clients that leave (test_clients_that_leave.py).

Bounds (omnivoice_rt/limits.py): a reference file is measured from its header and refused undecoded
over 120 s; a voice prompt's members are checked from their .npy headers (at most 30 s of codes,
2,000 characters of transcript) before anything is decompressed; a request's conditional row is
checked against the LLM's position table (4,096 on the tiny fixture) before the model runs.
"""

from __future__ import annotations

import concurrent.futures
import json
import struct
import subprocess
import sys
import time
import tracemalloc
import zipfile
from pathlib import Path

import httpx
import numpy as np
import pytest
import soundfile as sf
from gradio_client import Client, handle_file
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from omnivoice_build.equivalence import write_reference
from omnivoice_rt.model import OmniVoiceONNX
from omnivoice_rt.text.markup import MarkupError, parse
from omnivoice_rt.voice_prompt import VoicePrompt
from tests.conftest import FIXED, ROOT, running_app

PEAK = """
import json, resource, sys
import httpx
import numpy as np
from omnivoice_rt.audio.ops import load_audio
from omnivoice_rt.voice_prompt import VoicePrompt
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    result = {kind}(sys.argv[1])
    outcome = "ok " + str(getattr(result, "shape", None))
except ValueError as exc:
    outcome = "error: " + str(exc)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print(json.dumps({{"outcome": outcome, "peak_mb": peak / 1024}}))
"""


def measured(kind: str, path: Path) -> dict:
    """``kind(path)`` in a fresh interpreter: its outcome and the peak memory it added."""
    code = PEAK.format(kind=kind)
    result = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def flac_bomb(tmp_path_factory) -> Path:
    """One hour of 8-channel silence: a small FLAC that decodes to gigabytes."""
    path = tmp_path_factory.mktemp("bombs") / "hour.flac"
    with sf.SoundFile(
        path, "w", samplerate=16000, channels=8, format="FLAC", subtype="PCM_16"
    ) as f:
        block = np.zeros((16000 * 60, 8), np.int16)
        for _ in range(60):
            f.write(block)
    return path


def test_flac_bomb_is_refused_from_its_header(flac_bomb):
    assert flac_bomb.stat().st_size < 2_000_000
    out = measured("load_audio", flac_bomb)
    assert (
        out["outcome"].startswith("error: the reference is 3600 s long")
        and "not read" in out["outcome"]
    )
    assert out["peak_mb"] < 50, out


def test_wav_header_claiming_more_than_it_holds(tmp_path):
    path = tmp_path / "liar.wav"
    sf.write(
        path, (0.1 * np.sin(np.arange(24000 * 5) / 7)).astype(np.float32), 24000, subtype="PCM_16"
    )
    data = bytearray(path.read_bytes())
    at = data.index(b"data")
    data[at + 4 : at + 8] = struct.pack("<I", 24000 * 2 * 3600)  # claims an hour
    path.write_bytes(bytes(data))
    out = measured("load_audio", path)
    # what it holds, 5 s, read in blocks
    assert out["outcome"] == "ok (1, 120000)" and out["peak_mb"] < 50, out


def npz_bomb(path: Path, frames: int) -> Path:
    """A voice prompt whose codes are ``frames`` frames of zeros, compressed: 64 bytes a frame unpacked."""
    header = {"descr": "<i8", "fortran_order": False, "shape": (8, frames)}
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("codes.npy", "w", force_zip64=True) as member:
            np.lib.format.write_array_header_1_0(member, header)
            zeros = bytes(1 << 24)
            for _ in range(8 * frames * 8 // len(zeros)):
                member.write(zeros)
        for name, value in (
            ("format_version", np.int64(1)),
            ("text", np.str_("Hi.")),
            ("rms", np.float64(0.1)),
        ):
            with archive.open(f"{name}.npy", "w") as member:
                np.lib.format.write_array(member, np.asarray(value))
    return path


def test_npz_bomb_is_refused_without_expanding_it(tmp_path):
    # 256 MB of codes in a file of a few hundred kB
    bomb = npz_bomb(tmp_path / "bomb.npz", 4_000_000)
    assert bomb.stat().st_size < 1_000_000
    out = measured("VoicePrompt.load", bomb)
    assert (
        "codes is int64 of shape (8, 4000000)" in out["outcome"]
        and "at most 30 s" in out["outcome"]
    )
    assert out["peak_mb"] < 20, out


def test_over_long_voice_prompts_are_refused(tmp_path):
    rng = np.random.default_rng(0)
    # 200 s
    VoicePrompt(rng.integers(0, 1024, (8, 5000)), "Hello.", 0.1).save(tmp_path / "long.npz")
    VoicePrompt(rng.integers(0, 1024, (8, 100)), "x" * 40_000, 0.1).save(tmp_path / "chatty.npz")
    with pytest.raises(ValueError, match=r"shape \(8, 5000\).*at most 30 s"):
        VoicePrompt.load(tmp_path / "long.npz")
    with pytest.raises(ValueError, match="transcript is 40000 characters; the limit is 2000"):
        VoicePrompt.load(tmp_path / "chatty.npz")
    VoicePrompt(rng.integers(0, 1024, (8, 750)), "Hello.", 0.1).save(tmp_path / "thirty.npz")
    # the bound itself is allowed
    assert VoicePrompt.load(tmp_path / "thirty.npz").codes.shape == (8, 750)


@pytest.fixture(scope="module")
def fp32_voice(fp32_artifacts):
    return OmniVoiceONNX.load(fp32_artifacts, "fp32")


def test_a_row_over_the_position_table_is_refused_before_the_model_runs(fp32_voice):
    assert fp32_voice.max_row == 4096 and "position table" in fp32_voice.max_row_reason
    text = " ".join(["word"] * 1900)  # no punctuation: it cannot be split into chunks
    calls = []
    session = fp32_voice.graphs["llm_decoder"]
    original = session.run
    session.run = lambda *args: calls.append(1) or original(*args)
    try:
        with pytest.raises(
            ValueError,
            match=r"row of \d+ positions .* at most 4096, set by the LLM's position table",
        ):
            fp32_voice.generate(text, num_step=2)
    finally:
        session.run = original
    assert calls == []  # refused before any model call
    assert fp32_voice.generate("word " * 20, num_step=2, seed=0).seconds > 0


# SSML no honest user writes: nine entities of ten each (a billion "lol"s), elements 40 deep
LAUGHS = "".join(f'<!ENTITY l{i} "{f"&l{i - 1};" * 10}">' for i in range(1, 10))
BILLION_LAUGHS = f'<!DOCTYPE speak [<!ENTITY l0 "lol">{LAUGHS}]><speak>&l9;</speak>'
DEEP = "<speak>" + "<prosody rate='1'>" * 40 + "Hi" + "</prosody>" * 40 + "</speak>"


def secret_file(folder: Path) -> Path:
    """A file no answer may quote: its text has the word "secret"."""
    secret = folder / "server-secret.txt"
    secret.write_text("the server's secret")
    return secret


def external_entity(path: Path) -> str:
    """SSML whose entity names a file of the server."""
    return f'<!DOCTYPE speak [<!ENTITY x SYSTEM "file://{path}">]><speak>&x;</speak>'


def test_hostile_ssml_is_refused_in_bounded_time_and_memory(tmp_path):
    """A "billion laughs" document, an external entity (its file is never read), a parameter
    entity, deep nesting and a flood of elements: each one line, at once."""
    hostile = [
        f'<?xml version="1.0"?>{BILLION_LAUGHS}',
        external_entity(secret_file(tmp_path)),
        '<!DOCTYPE speak [<!ENTITY % p SYSTEM "http://127.0.0.1:9/x.dtd"> %p;]><speak>Hi</speak>',
        '<!DOCTYPE speak SYSTEM "http://127.0.0.1:9/x.dtd"><speak>Hi</speak>',
    ]
    for document in hostile:
        tracemalloc.start()
        started = time.perf_counter()
        with pytest.raises(MarkupError) as caught:
            parse(document)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert time.perf_counter() - started < 1.0 and peak < 1 << 20, document
        assert "may not declare a DOCTYPE or entities" in str(caught.value)
        assert "secret" not in str(caught.value)
    with pytest.raises(MarkupError, match="too large .at most 2000 elements, 32 deep"):
        parse(DEEP)
    flood = "<speak>" + "<s>a</s>" * 2100 + "</speak>"
    with pytest.raises(MarkupError, match="too large"):
        parse(flood)


LONG_TEXT = "This is one more sentence of a long text that holds the line a while. " * 40


def hostile_scripts(folder: Path) -> list[tuple[str, str]]:
    """Scripts made to hurt a parser, each with the words of its refusal: SSML voices behind a
    DOCTYPE (a billion laughs, an external entity naming a server file), voices nested past the
    limit, more speakers than a script takes, a flood of empty turns, a line of spaces that
    makes a "Name:" pattern backtrack, a flood of tags, and an SSML tag padded with character
    references; all within a door's 10,000 characters, three ending with a speaker no library
    has."""
    voice = '<voice name="alloy">{}</voice>'
    return [
        (BILLION_LAUGHS.replace("&l9;", voice.format("&l9;")), "may not declare a DOCTYPE"),
        (
            external_entity(secret_file(folder)).replace("&x;", voice.format("&x;")),
            "may not declare a DOCTYPE",
        ),
        ("<speak>" + '<voice name="a">' * 40 + "Hi" + "</voice>" * 40 + "</speak>", "too large"),
        (
            "<speak>"
            + "".join(voice.replace("alloy", f"S{n}").format("a.") for n in range(17))
            + "</speak>",
            "is speaker 17",
        ),
        (  # a long attribute around many voices, which each turn would repeat
            f"<speak><prosody rate='{chr(34) * 1_500}'>"
            + voice.format("a") * 280
            + "</prosody></speak>",
            "repeat the elements around their <voice> too often",
        ),
        ("alloy:\n" * 1_400, "line 1: 'alloy' has no text"),
        (" " * 9_980 + "x\nZed: hi", "line 2: no voice for speaker 'Zed'"),
        ("[voice:alloy]" * 700 + "[voice:Zed] hi", "line 1: [voice:alloy] has no text"),
        (  # a tag padded with a character reference at a time: read once, however many
            "<speak>[voice&#58;" + "&#32;" * 1_990 + "Zed] hi</speak>",
            "inside SSML",
        ),
    ]


def test_hostile_scripts_are_refused_in_bounded_time_and_memory(tmp_path):
    """Each hostile script (``hostile_scripts``) is one line naming what to write, at once,
    in little memory, with nothing of the server's file in it."""
    from omnivoice_rt import dialogue
    from omnivoice_rt.text.script import ScriptError
    from omnivoice_rt.voices import VoiceLibrary

    speakers = dialogue.library_speakers(VoiceLibrary())
    for text, words in hostile_scripts(tmp_path):
        tracemalloc.start()
        started = time.perf_counter()
        with pytest.raises(ScriptError) as caught:
            dialogue.prepare(text, {}, speakers, named_lines=True, limit=10_000)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert time.perf_counter() - started < 1.0 and peak < 4 << 20, (text[:60], peak)
        assert words in str(caught.value) and "secret" not in str(caught.value), caught.value


def test_a_long_text_read_otherwise_is_matched_to_its_pieces_in_bounded_time():
    """A text at the length limit whose reading differs at every other word ("a 1" read "a
    one", 2,500 times) or everywhere, cut into hundreds of pieces: each piece is found as
    written (or none is) at once; a general diff of the two texts took 535 s on the first."""
    from omnivoice_rt.text.written import written_pieces

    every_other = " ".join("a 1." if k % 7 == 0 else "a 1" for k in range(2_500))
    everywhere = " ".join(f"{k}." for k in range(2_500))
    for written, spoken, matched in (
        (every_other, every_other.replace("1", "one"), True),
        (everywhere, " ".join("word." for _ in range(2_500)), False),  # never meet again
    ):
        pieces = [piece.strip() + "." for piece in spoken.split(".") if piece.strip()]
        started = time.perf_counter()
        found = written_pieces(written, spoken, pieces)
        assert time.perf_counter() - started < 1.0
        assert (found is not None) == matched
        if matched:
            assert " ".join(found).split() == written.split()


def test_a_stream_sent_a_character_at_a_time_is_read_in_bounded_time():
    """A Wyoming stream's text at the length limit, one character a chunk, read as the door
    reads it (``TurnReader``, then ``ArrivingSentences``): abbreviations, marks never
    followed by a space, a held tag, a long blank after a named line: each at once (before,
    rereading what was held at every chunk: over 60 s for the first two)."""
    from omnivoice_rt.limits import MAX_TEXT_CHARS
    from omnivoice_rt.text.chunks import ArrivingSentences
    from omnivoice_rt.text.script import ScriptError, TurnReader

    size = MAX_TEXT_CHARS - 20
    for text in ("Dr. " * (size // 4), "a.b" * (size // 3), "!" * size, "[voice:" + " " * size,
                 "Ann:\n" + " " * size, "word " * (size // 5)):  # fmt: skip
        started, refused = time.perf_counter(), False
        reader, arriving = TurnReader(named_lines=True), ArrivingSentences()
        try:
            for char in [*text, None]:
                for part in reader.feed(char or "", end=char is None):
                    arriving.feed(part.text)
        except ScriptError:  # the named line with no text, at the stream's end
            refused = True
        assert time.perf_counter() - started < 1.0, text[:20]
        assert refused == text.startswith("Ann:")


# ----------------------------------------------------------------------------- through the server


@pytest.fixture(scope="module")
def server(cpu_artifacts, tmp_path_factory):
    log = tmp_path_factory.mktemp("hostile") / "server.log"
    with running_app(["--artifacts", str(cpu_artifacts)], log, HF_HUB_OFFLINE="1") as url:
        yield url, log


def server_rss(url: str) -> int:
    import psutil

    port = url.rsplit(":", 1)[1]
    process = next(
        p
        for p in psutil.process_iter(["cmdline"])
        if p.info["cmdline"] and port in p.info["cmdline"]
    )
    return process.memory_info().rss


CLEAR = "could not read the reference audio|not a usable voice prompt|the reference|reference audio"


@settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(blob=st.binary(min_size=0, max_size=4096), as_prompt=st.booleans())
def test_random_bytes_as_audio_and_as_prompts(server, tmp_path_factory, blob, as_prompt):
    url, _ = server
    path = tmp_path_factory.mktemp("junk") / ("junk.npz" if as_prompt else "junk.wav")
    path.write_bytes(blob)
    client = Client(url, verbose=False)
    audio, prompt = (None, handle_file(str(path))) if as_prompt else (handle_file(str(path)), None)
    with pytest.raises(Exception, match=CLEAR):
        client.predict("Hi.", audio, "Hi.", prompt, "Auto", "int4", **FIXED, api_name="/clone")


def test_bombs_and_truncated_files_through_the_api_leave_the_server_well(
    server, flac_bomb, tmp_path
):
    url, log = server
    client = Client(url, verbose=False)
    client.predict("Warm up.", "Auto", "", "int4", **FIXED, api_name="/synthesize")
    before = server_rss(url)
    good = Path(write_reference(str(tmp_path / "good.wav")))
    (tmp_path / "truncated.wav").write_bytes(good.read_bytes()[:3000])
    VoicePrompt(np.zeros((8, 100), np.int64), "Hi.", 0.1).save(tmp_path / "good.npz")
    (tmp_path / "truncated.npz").write_bytes((tmp_path / "good.npz").read_bytes()[:500])
    npz_bomb(tmp_path / "bomb.npz", 4_000_000)
    cases = [
        (flac_bomb, None, "3600 s long"),
        (tmp_path / "truncated.wav", None, CLEAR),
        (None, tmp_path / "bomb.npz", "at most 30 s"),
        (None, tmp_path / "truncated.npz", "not a usable voice prompt"),
    ]
    for audio, prompt, message in cases:
        with pytest.raises(Exception, match=message):
            client.predict(
                "Hi.",
                audio and handle_file(str(audio)),
                "Hi.",
                prompt and handle_file(str(prompt)),
                "Auto",
                "int4",
                **FIXED,
                api_name="/clone",
            )
    path, _, _ = client.predict("Still here.", "Auto", "", "int4", **FIXED, api_name="/synthesize")
    assert sf.read(path)[1] == 24000
    growth = (server_rss(url) - before) / 2**20
    assert growth < 100, growth
    assert "Traceback" not in log.read_text()


def test_onnx_runtime_failures_become_messages(fp32_artifacts, tmp_path):
    """A graph that fails at run time for some shapes (here: heads that only take 50 frames, as a
    corrupt or mismatched graph would fail): the CLI and the API say so in one line and name the
    graph, the log has ONNX Runtime's detail, and the server keeps serving."""
    import shutil

    import onnx
    from onnx import helper, numpy_helper

    folder = tmp_path / "brittle"
    shutil.copytree(fp32_artifacts, folder)
    path = folder / "fp32" / "audio_heads_decoder.onnx"
    model = onnx.load(str(path))
    output = model.graph.output[0]
    model.graph.initializer.append(
        numpy_helper.from_array(np.array([0, 8, 50, 1025], np.int64), "only_50")
    )
    model.graph.node.append(
        helper.make_node("Reshape", [output.name + "_free", "only_50"], [output.name])
    )
    for node in model.graph.node[:-1]:
        node.output[:] = [
            output.name + "_free" if name == output.name else name for name in node.output
        ]
    onnx.save(model, str(path))
    command = [
        sys.executable,
        "-m",
        "omnivoice_rt",
        "synthesize",
        "--model-dir",
        str(folder),
        "--precision",
        "fp32",
        "--text",
        "Hello there.",
        "--num-step",
        "2",
        "--output",
        str(tmp_path / "x.wav"),
    ]
    result = subprocess.run(
        [*command, "--duration", "3"], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith(
        "error: the model's audio_heads_decoder graph failed on this request"
    ), error
    assert (
        subprocess.run(
            [*command, "--duration", "2"], capture_output=True, cwd=ROOT, timeout=300
        ).returncode
        == 0
    )
    with running_app(["--artifacts", str(folder)], tmp_path / "app.log", HF_HUB_OFFLINE="1") as url:
        client = Client(url, verbose=False)
        with pytest.raises(Exception, match="audio_heads_decoder graph failed on this request"):
            client.predict(
                "Hello there.",
                "Auto",
                "",
                "fp32",
                **{**FIXED, "duration": 3.0},
                api_name="/synthesize",
            )
        path, _, _ = client.predict(
            "Hello there.", "Auto", "", "fp32", **FIXED, api_name="/synthesize"
        )
        assert sf.read(path)[1] == 24000
    # ONNX Runtime's own words, for the operator
    assert "Reshape" in (tmp_path / "app.log").read_text()


def test_a_tokenizer_that_does_not_match_the_model_is_refused(cpu_artifacts, tmp_path):
    """Token ids past the embedding table: the int4 table (GatherBlockQuantized) would read garbage
    without a word, so ids are checked before the encoder runs."""
    import shutil

    folder = tmp_path / "mismatched"
    shutil.copytree(cpu_artifacts, folder)
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    tokenizer["model"]["vocab"]["."] = 5000  # the tiny model's table has 2048 rows
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    voice = OmniVoiceONNX.load(folder, "int4")
    with pytest.raises(
        ValueError, match="token id 5000 .* 2048 rows: tokenizer.json does not belong"
    ):
        voice.generate("Hello there.", num_step=2)
    assert voice.generate("Hello there", num_step=2, seed=0).seconds > 0


def test_hostile_ssml_through_the_door_reads_no_server_file_and_stops_nothing(server, tmp_path):
    """SSML is parsed before the line, in the door's thread: a billion laughs, an external entity
    naming a file on the server, and the longest flood of elements the text limit allows are each
    a 400 naming the input, at once, with nothing of the file in it; /health answers meanwhile."""
    url, _ = server
    hostile = [
        BILLION_LAUGHS,
        external_entity(secret_file(tmp_path)),
        "<speak>" + "<s>a</s>" * 1248 + "</speak>",  # 9,999 characters: 1,248 segments
        DEEP,
    ]
    post = {"url": f"{url}/v1/audio/speech"}
    body = {"model": "omnivoice", "voice": "alloy"}

    def send(text):
        started = time.perf_counter()
        answer = httpx.post(**post, json={**body, "input": text}, timeout=60)
        return answer, time.perf_counter() - started

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(send, hostile * 2))
        health = httpx.get(f"{url}/health", timeout=10)
    assert health.status_code == 200
    for (answer, took), text in zip(answers, hostile * 2, strict=True):
        error = answer.json()["error"]
        assert answer.status_code == 400 and error["param"] == "input", (text[:40], error)
        assert "secret" not in error["message"] and took < 10, (error, took)
    messages = [answer.json()["error"]["message"] for answer, _ in answers]
    assert "may not declare a DOCTYPE or entities" in messages[0] and messages[1] == messages[0]
    assert "1248 segments between its pauses and tags; the limit is 200" in messages[2]
    assert "too large (at most 2000 elements, 32 deep)" in messages[3]


def test_hostile_scripts_through_the_door_are_refused_before_the_line(server, tmp_path):
    """A script is read and every speaker found before its request takes a turn in the line:
    each hostile script (``hostile_scripts``) sent as ``"script": true`` while another client's
    long text is being made is a 400 naming the input, answered before that text is done."""
    url, _ = server
    body = {"model": "omnivoice", "voice": "alloy", "script": True}
    post = f"{url}/v1/audio/speech"
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        long = pool.submit(
            httpx.post, post, json={**body, "input": LONG_TEXT, "num_step": 16}, timeout=600
        )
        time.sleep(1.0)  # the long text holds the line
        for text, words in hostile_scripts(tmp_path):
            answer = httpx.post(post, json={**body, "input": text}, timeout=60)
            error = answer.json()["error"]
            assert answer.status_code == 400 and error["param"] == "input", (text[:40], error)
            assert words in error["message"] and "secret" not in error["message"], error
            assert not long.done(), "the long text ended first: the test proves nothing"
        assert long.result().status_code == 200
