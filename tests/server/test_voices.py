"""The voice library (``omnivoice_rt/voices.py``) on a real folder: what it lists, what it refuses, and
what it leaves on disk when writes fail or race. Its HTTP and Wyoming doors: tests/server/test_wyoming.py."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

from omnivoice_rt import voices as voices_module
from omnivoice_rt.voice_prompt import VoicePrompt
from omnivoice_rt.voices import BUILTIN, VoiceLibrary


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
