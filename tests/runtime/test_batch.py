"""Batch synthesis (``python -m omnivoice_rt batch``): one process, a local pool and a Ray cluster
on loopback give the same audio; a killed run resumes; bad lines are reported and skipped."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from omnivoice_build.equivalence import write_reference
from omnivoice_rt.model import OmniVoiceONNX
from omnivoice_rt.tools.batch import RESULTS, made_by, run_batch
from tests.conftest import RAY_AUTH, ROOT, free_port, ray_environment, ray_head, ray_stop

GOOD = [
    {"id": "plain", "text": "A plain sentence, made by the batch."},
    {
        "id": "designed",
        "text": "A designed voice says this.",
        "instruct": "female, low pitch",
        "seed": 11,
    },
    {
        "id": "prompted",
        "text": "The saved voice says this.",
        "voice_prompt": "voice.npz",
        "preset": "fast",
    },
    {
        "id": "cloned",
        "text": "The reference says this.",
        "ref_audio": "ref.wav",
        "ref_text": "This is the reference.",
        "speed": 1.2,
    },
    {
        "id": "fixed.length",
        "text": "Two seconds exactly.",
        "duration": 2.0,
        "num_step": 8,
        "language": "en",
    },
    {"id": "numbers", "text": "Chapter 3 starts on May 5.", "seed": 4},  # read as words
]
BAD = [
    '{"id": "empty", "text": "  "}',
    '{"id": "missing", "text": "Hi.", "voice_prompt": "nowhere.npz"}',
    '{"id": "typo", "text": "Hi.", "instructs": "male"}',
    '{"id": "../escape", "text": "Hi."}',
    "not json at all",
    '{"id": "plain", "text": "The same id twice."}',
    '{"id": "klingon", "text": "Hi.", "language": "Klingon"}',
    '{"id": "typed", "text": "Hi.", "speed": "fast"}',
    '{"id": "PLAIN", "text": "Another file named plain.wav on some file systems."}',
    '{"id": "yes", "text": "Hi 5.", "normalize_text": "yes"}',
]


@pytest.fixture(scope="module")
def items(cpu_artifacts, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("batch-input")
    write_reference(str(folder / "ref.wav"))
    voice = OmniVoiceONNX.load(cpu_artifacts, "int4")
    voice.create_voice_prompt(str(folder / "ref.wav"), "This is the reference.").save(
        folder / "voice.npz"
    )
    good = [json.dumps(item) for item in GOOD]
    (folder / "items.jsonl").write_text("\n".join(good[:3] + BAD[:4] + good[3:] + BAD[4:]) + "\n")
    return folder / "items.jsonl"


@pytest.fixture(scope="module")
def single(items, cpu_artifacts, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("batch-single")
    counts = run_batch(items, out, cpu_artifacts, "int4", workers=1, show_progress=False)
    assert counts == {"made": len(GOOD), "skipped": 0, "failed": len(BAD)}
    return out


def samples(folder: Path) -> dict[str, np.ndarray]:
    return {path.stem: sf.read(path, dtype="int16")[0] for path in sorted(folder.glob("*.wav"))}


def test_one_process_makes_each_item_as_generate_does(single, items, cpu_artifacts):
    made = samples(single)
    assert set(made) == {item["id"] for item in GOOD}
    voice = OmniVoiceONNX.load(cpu_artifacts, "int4")
    expected = voice.generate(
        "A designed voice says this.", instruct="female, low pitch", seed=11, num_step="balanced"
    )
    np.testing.assert_array_equal(
        made["designed"], np.round(np.clip(expected.waveform, -1, 1) * 32767).astype(np.int16)
    )
    assert len(made["fixed.length"]) == 2 * 24000 + 2 * 2400  # 2 s and its padding

    records = [json.loads(line) for line in (single / RESULTS).read_text().splitlines()]
    assert len(records) == len(GOOD) + len(BAD)  # one line per input line, in the input's order
    assert [r["line"] for r in records] == list(range(1, len(records) + 1))
    by_id = {r["id"]: r for r in records if r["status"] == "made"}
    assert set(by_id) == {item["id"] for item in GOOD}
    assert by_id["prompted"]["settings"]["preset"] == "fast" and by_id["plain"]["rtf"] > 0
    failed = [r for r in records if r["status"] == "failed"]
    assert len(failed) == len(BAD)
    messages = " | ".join(r["error"] for r in failed)
    for words in (
        "'text' is required",
        "nowhere.npz",
        "unknown option(s) instructs",
        "'id' must be",
        "Expecting value",
        "used by an earlier line",
        "Klingon",
        "speed must be a number",
        "'PLAIN' is used by an earlier line",
        "normalize_text must be true or false",
    ):
        assert words in messages, (words, messages)
    # numbers read as words by default, as every door does; the record says what was read
    assert by_id["numbers"]["normalized_text"] == "Chapter three starts on May five."
    assert by_id["plain"]["normalized_text"] is None
    expected = voice.generate(
        "Chapter 3 starts on May 5.", seed=4, num_step="balanced", normalize_text=True
    )
    np.testing.assert_array_equal(
        made["numbers"], np.round(np.clip(expected.waveform, -1, 1) * 32767).astype(np.int16)
    )


def test_beside_each_wav_its_captions(single, cpu_artifacts):
    """OUT/<id>.srt, read by the srt library, as the library places the item's pieces; the
    record carries them too."""
    srt = pytest.importorskip("srt", reason="the srt parser (dev extra)")
    voice = OmniVoiceONNX.load(cpu_artifacts, "int4")
    expected = voice.generate(
        "Chapter 3 starts on May 5.", seed=4, num_step="balanced", normalize_text=True
    )
    cues = list(srt.parse((single / "numbers.srt").read_text()))
    assert [c.content for c in cues] == ["Chapter 3 starts on May 5."]
    (caption,) = expected.captions
    assert round(cues[0].start.total_seconds() * 1000) == caption.start_sample * 1000 // 24000
    records = [json.loads(line) for line in (single / RESULTS).read_text().splitlines()]
    (numbers,) = [r for r in records if r["id"] == "numbers"]
    assert numbers["captions"][0]["end_sample"] == caption.end_sample
    assert {path.stem for path in single.glob("*.srt")} == set(samples(single))


def test_a_pool_of_two_gives_the_same_audio(single, items, cpu_artifacts, tmp_path):
    counts = run_batch(items, tmp_path, cpu_artifacts, "int4", workers=2, show_progress=False)
    assert counts == {"made": len(GOOD), "skipped": 0, "failed": len(BAD)}
    expected = samples(single)
    for name, audio in samples(tmp_path).items():
        np.testing.assert_array_equal(audio, expected[name])


def ray_batch(items: Path, artifacts: Path, out: Path, address: str, environment: dict, *extra):
    """``batch --ray ADDRESS`` of ``items`` into ``out``, as a user runs it."""
    command = [sys.executable, "-m", "omnivoice_rt", "batch", "--model-dir", str(artifacts)]
    command += [
        "--input",
        str(items),
        "--output-dir",
        str(out),
        "--workers",
        "2",
        "--ray",
        address,
        *extra,
    ]
    return subprocess.run(
        command, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=600
    )


def assert_the_same_audio(run, single: Path, out: Path) -> None:
    assert run.returncode == 1, run.stderr  # some lines failed
    assert f"made {len(GOOD)}, skipped 0, failed {len(BAD)}" in run.stdout, run.stdout + run.stderr
    expected = samples(single)
    made = samples(out)
    assert set(made) == set(expected)
    for name, audio in made.items():
        np.testing.assert_array_equal(audio, expected[name])


# A cluster the user starts, without a token, with one in ~/.ray (authentication turned on by
# `ray start` itself; the batch sends the token, the cluster being on this machine), and with
# RAY_AUTH_MODE=token and RAY_AUTH_TOKEN set for both.
@pytest.mark.parametrize("auth", RAY_AUTH)
def test_ray_on_a_users_cluster_gives_the_same_audio(auth, single, items, cpu_artifacts, tmp_path):
    pytest.importorskip("ray")
    environment = ray_environment(tmp_path / "home", auth)
    port = free_port()
    ray_head(port, environment, cpus=2)
    try:
        run = ray_batch(items, cpu_artifacts, tmp_path / "out", f"127.0.0.1:{port}", environment)
    finally:
        ray_stop(environment)
    assert_the_same_audio(run, single, tmp_path / "out")


# --ray local: a cluster of the batch's own, with Ray's default (token authentication, the token
# made in ~/.ray if missing) whether a token was there before or not.
@pytest.mark.parametrize("auth", ["none", "file"])
def test_ray_local_gives_the_same_audio(auth, single, items, cpu_artifacts, tmp_path):
    pytest.importorskip("ray")
    environment = ray_environment(tmp_path / "home", auth)
    try:
        run = ray_batch(items, cpu_artifacts, tmp_path / "out", "local", environment)
    finally:
        ray_stop(environment)
    assert_the_same_audio(run, single, tmp_path / "out")


def test_a_missing_or_wrong_ray_token_is_one_line(items, cpu_artifacts, tmp_path):
    """Against a cluster that asks for a token: each wrong setting is one line naming what to set,
    told at once (one call to the cluster), not after Ray's 20 s of retries; nothing is made."""
    pytest.importorskip("ray")
    environment = ray_environment(tmp_path / "home", "file")
    port = free_port()
    address = f"127.0.0.1:{port}"
    ray_head(port, environment)
    cases = {
        "wrong token": (
            {**environment, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "no"},
            "refused the token from RAY_AUTH_TOKEN",
        ),
        "no token": ({**environment, "HOME": str(tmp_path / "elsewhere")}, "asks for a token"),
        # --ray auto: the cluster this machine started last, found as Ray finds it
        "auto, no token": ({**environment, "HOME": str(tmp_path / "elsewhere")}, "auto (the"),
        "disabled": ({**environment, "RAY_AUTH_MODE": "disabled"}, "RAY_AUTH_MODE=disabled"),
        "unreadable": (
            {**environment, "RAY_AUTH_TOKEN_PATH": str(tmp_path / "none")},
            "cannot be read",
        ),
    }
    try:
        for case, (env, words) in cases.items():
            started = time.monotonic()
            where = "auto" if case.startswith("auto") else address
            run = ray_batch(items, cpu_artifacts, tmp_path / case, where, env, "-q")
            took = time.monotonic() - started
            assert run.returncode == 2 and "Traceback" not in run.stderr, (case, run.stderr)
            lines = run.stderr.strip().splitlines()
            assert len(lines) == 1, (case, run.stderr)
            assert words in lines[0] and "RAY_AUTH" in lines[0], (case, lines)
            assert not list((tmp_path / case).glob("*.wav")), case
            assert took < 15, (case, took)  # Ray alone retries for 20 s, then blames the address
    finally:
        ray_stop(environment)


def test_a_token_goes_only_to_a_cluster_on_this_machine():
    from omnivoice_rt.tools.ray_auth import on_this_machine

    assert on_this_machine("127.0.0.1:6379") and on_this_machine("localhost:6379")
    assert on_this_machine("[::1]:6379") or not socket_has_ipv6()
    assert not on_this_machine("203.0.113.7:6379")  # TEST-NET-3: never an address of a machine
    assert not on_this_machine("no-such-host.invalid:6379")


def socket_has_ipv6() -> bool:
    import socket

    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(("::1", 0))
        return True
    except OSError:
        return False


def test_a_killed_run_resumes_and_makes_each_item_once(single, items, cpu_artifacts, tmp_path):
    command = [
        sys.executable,
        "-m",
        "omnivoice_rt",
        "batch",
        "--model-dir",
        str(cpu_artifacts),
        "--input",
        str(items),
        "--output-dir",
        str(tmp_path),
    ]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while (
        len(list(tmp_path.glob("*.wav"))) < 2 and process.poll() is None and time.time() < deadline
    ):
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    first = {path.stem for path in tmp_path.glob("*.wav")}
    assert 2 <= len(first) < len(GOOD), "the run was to be killed half-way"
    # what is there is whole: written under another name, then renamed
    for path in tmp_path.glob("*.wav"):
        assert made_by(path) and sf.info(path).frames > 0

    made_first = {
        r["id"]: r
        for r in map(json.loads, (tmp_path / RESULTS).read_text().splitlines())
        if r.get("status") == "made"
    }
    # as a run killed mid-write leaves
    (tmp_path / ".plain.wav.999999.tmp").write_bytes(b"RIFF half a file")
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert (
        f"made {len(GOOD) - len(first)}, skipped {len(first)}, failed {len(BAD)}" in run.stdout
    ), run.stdout + run.stderr
    assert not list(tmp_path.glob(".*.tmp"))
    expected = samples(single)
    assert set(samples(tmp_path)) == set(expected)
    for name, audio in samples(tmp_path).items():
        np.testing.assert_array_equal(audio, expected[name])
    records = [json.loads(line) for line in (tmp_path / RESULTS).read_text().splitlines()]
    assert len(records) == len(GOOD) + len(BAD)
    skipped = {r["id"]: r for r in records if r["status"] == "skipped"}
    assert set(skipped) == first
    for name, record in skipped.items():  # what made it, as the first run recorded it
        if name in made_first:
            assert (record["seconds"], record["settings"]) == (
                made_first[name]["seconds"],
                made_first[name]["settings"],
            )


def test_a_rerun_redoes_only_what_changed(single, items, cpu_artifacts, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(single, out)
    again = run_batch(items, out, cpu_artifacts, "int4", show_progress=False)
    assert again == {"made": 0, "skipped": len(GOOD), "failed": len(BAD)}
    changed = tmp_path / "items.jsonl"
    for name in ("ref.wav", "voice.npz"):
        shutil.copy(items.parent / name, tmp_path / name)
    lines = items.read_text().replace("A plain sentence", "A changed sentence")
    changed.write_text(lines)
    # the cloned item's reference changed too
    write_reference(str(tmp_path / "ref.wav"), seconds=2.0)
    counts = run_batch(changed, out, cpu_artifacts, "int4", show_progress=False)
    assert counts == {"made": 2, "skipped": len(GOOD) - 2, "failed": len(BAD)}
    records = [json.loads(line) for line in (out / RESULTS).read_text().splitlines()]
    assert {r["id"] for r in records if r["status"] == "made"} == {"plain", "cloned"}


def test_one_run_per_output_folder(items, cpu_artifacts, tmp_path):
    from omnivoice_rt.tools.batch import exclusive

    with exclusive(tmp_path), pytest.raises(ValueError, match="another batch run is writing"):
        run_batch(items, tmp_path, cpu_artifacts, "int4", show_progress=False)


def test_ray_auto_without_a_cluster_says_how_to_start_one(items, cpu_artifacts, tmp_path):
    pytest.importorskip("ray", reason="Ray (the ray extra)")
    environment = ray_environment(tmp_path / "home")
    command = [
        sys.executable,
        "-m",
        "omnivoice_rt",
        "batch",
        "--model-dir",
        str(cpu_artifacts),
        "--input",
        str(items),
        "--output-dir",
        str(tmp_path / "out"),
        "--ray",
        "auto",
        "-q",
    ]
    done = subprocess.run(
        command, capture_output=True, text=True, cwd=ROOT, env=environment, timeout=300
    )
    if "no Ray cluster" not in done.stderr and done.returncode == 0:
        pytest.skip("a Ray cluster is running on this machine")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "ray start --head" in line and "--ray local" in line, line


def test_a_dub_item_makes_the_track_the_library_makes(cpu_artifacts, tmp_path):
    """An item with subtitles instead of text: its wav is ``dubbing.dub``'s track, its srt where
    each cue was placed, its record the dub's report; a cue that cannot fit fails the item with
    the report naming it, and a bad file or a text beside the subtitles fail as the file is read;
    a rerun skips the made dub."""
    srt = pytest.importorskip("srt", reason="the srt parser (dev extra)")
    from omnivoice_rt.dubbing import dub
    from omnivoice_rt.request import door_request
    from omnivoice_rt.text import subtitles

    (tmp_path / "film.srt").write_text(
        "1\n00:00:00,500 --> 00:00:02,000\nGood evening.\n\n"
        "2\n00:00:02,500 --> 00:00:04,500\nHere are 2 stories.\n",
        encoding="utf-8",
    )
    (tmp_path / "tight.srt").write_text("1\n00:00:00,000 --> 00:00:00,200\nFar too much to say.\n")
    (tmp_path / "bad.srt").write_text("1\nnot a time\nhi\n")
    lines = [
        {"id": "film", "subtitles": "film.srt", "num_step": 4, "seed": 3, "instruct": "female"},
        {"id": "tight", "subtitles": "tight.srt", "num_step": 4},
        {"id": "bad", "subtitles": "bad.srt"},
        {"id": "both", "subtitles": "film.srt", "text": "Hi."},
        {"id": "fast", "subtitles": "film.srt", "max_speed": 20},
    ]
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "out"
    counts = run_batch(tmp_path / "items.jsonl", out, cpu_artifacts, "int4", show_progress=False)
    assert counts == {"made": 1, "skipped": 0, "failed": 4}

    voice = OmniVoiceONNX.load(cpu_artifacts, "int4")
    cues = subtitles.read(tmp_path / "film.srt")
    expected = dub(
        voice, cues, {"num_step": 4, "seed": 3, "instruct": "female"}, None, 1.5, door_request
    )
    made, rate = sf.read(out / "film.wav", dtype="int16")
    np.testing.assert_array_equal(
        made, np.round(np.clip(expected.waveform, -1, 1) * 32767).astype(np.int16)
    )
    assert len(made) == 4.5 * rate
    placed = list(srt.parse((out / "film.srt").read_text()))
    assert [c.start.total_seconds() for c in placed] == [0.5, 2.5]
    assert [c.content for c in placed] == ["Good evening.", "Here are 2 stories."]
    records = {r["id"]: r for r in map(json.loads, (out / RESULTS).read_text().splitlines())}
    assert records["film"]["report"]["cues"] == expected.report["cues"]
    assert records["film"]["captions"][1]["text"] == "Here are two stories."  # read as words
    assert records["tight"]["status"] == "failed" and "cue 1 needs" in records["tight"]["error"]
    assert records["tight"]["report"]["too_long"][0]["number"] == 1
    assert not (out / "tight.wav").exists()
    assert "cue 1 (line 2)" in records["bad"]["error"]
    assert "leave out 'text'" in records["both"]["error"]
    assert "'max_speed' must be a number from 1 to 10" in records["fast"]["error"]
    again = run_batch(tmp_path / "items.jsonl", out, cpu_artifacts, "int4", show_progress=False)
    assert again == {"made": 0, "skipped": 1, "failed": 4}
    # written into the subtitles' own folder, "film"'s captions would replace film.srt: refused
    kept = (tmp_path / "film.srt").read_text(encoding="utf-8")
    (tmp_path / "here.jsonl").write_text(json.dumps(lines[0]) + "\n")
    here = run_batch(tmp_path / "here.jsonl", tmp_path, cpu_artifacts, "int4", show_progress=False)
    assert here == {"made": 0, "skipped": 0, "failed": 1}
    assert (tmp_path / "film.srt").read_text(encoding="utf-8") == kept
    record = json.loads((tmp_path / RESULTS).read_text())
    assert "would overwrite its subtitles" in record["error"]


def test_an_item_asking_for_words_gets_them_beside_its_wav(cpu_artifacts, tmp_path):
    """``"words": true``: OUT/<id>.words.json and the record's ``words``, each word of the text
    as written placed within its wav (a dub's within its track), as ``Speech.align_words`` places
    them; a rerun skips it; ``words`` that is not a boolean fails its line."""
    from omnivoice_rt.align import words_of

    (tmp_path / "film.srt").write_text(
        "1\n00:00:00,500 --> 00:00:02,000\nGood evening.\n", encoding="utf-8"
    )
    lines = [
        {"id": "said", "text": "Good morning, Ann. How are you?", "num_step": 4, "words": True},
        {"id": "film", "subtitles": "film.srt", "num_step": 4, "words": True},
        {"id": "plain", "text": "No words here.", "num_step": 4},
        {"id": "typed", "text": "Hi.", "words": "yes"},
    ]
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "out"
    counts = run_batch(tmp_path / "items.jsonl", out, cpu_artifacts, "int4", show_progress=False)
    assert counts == {"made": 3, "skipped": 0, "failed": 1}
    records = {r["id"]: r for r in map(json.loads, (out / RESULTS).read_text().splitlines())}
    assert "'words' must be true or false" in records["typed"]["error"]
    assert records["plain"]["words"] is None and not (out / "plain.words.json").exists()
    for name, text in (("said", lines[0]["text"]), ("film", "Good evening.")):
        words = json.loads((out / f"{name}.words.json").read_text())["words"]
        assert words == records[name]["words"]
        assert [w["word"] for w in words] == words_of(text)
        seconds = sf.info(out / f"{name}.wav").duration
        placed = [w for w in words if w["start"] is not None]
        assert placed and all(0 <= w["start"] <= w["end"] <= seconds + 1e-3 for w in placed)
    assert json.loads((out / "film.words.json").read_text())["words"][0]["start"] >= 0.45
    again = run_batch(tmp_path / "items.jsonl", out, cpu_artifacts, "int4", show_progress=False)
    assert again == {"made": 0, "skipped": 3, "failed": 1}
