"""The voices every door offers: the auto voice, the designed voices (a name for a voice-design
instruct) and the library's saved voices, kept in the ``--voices DIR`` folder.

    library = VoiceLibrary("voices", writable=True)
    library.add_design("narrator", "male, middle-aged, low pitch", language="en")
    library.add_prompt("me", voice.create_voice_prompt("me.wav", "What I said."), language="en")
    [entry.name for entry in library.entries()]
    library.options("me")        # {"voice_prompt": "voices/me.npz"}: a request's options
    library.delete("me")

On disk, one voice is one name: ``NAME.npz``, a voice prompt (``omnivoice_rt.voice_prompt``; a
folder of these made by hand or by the page's "Save voice prompt" works as it is), with
``NAME.json`` beside it for its details (language, when it was added); or ``NAME.json`` alone, a
designed voice (its instruct). Every file is written whole under a temporary name, then put in
place: a name is taken by creating its file (``os.link``, which fails if it exists), so of two
writers of one name exactly one wins and the other is told the name is in use. Nothing is read
from the folder but these two kinds of file, each bounded in size and checked as it is read.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from omnivoice_rt.limits import MAX_PROMPT_FILE_BYTES
from omnivoice_rt.text.instructs import resolve_instruct
from omnivoice_rt.text.languages import check_string, resolve_language
from omnivoice_rt.voice_prompt import VoicePrompt

logger = logging.getLogger(__name__)

AUTO_VOICE = "auto"  # the model chooses the voice
# A writer's half-made files older than this are a dead writer's (removed as a library opens);
# younger ones may be another process's at work on the same folder
STALE_WRITE_S = 600.0
# Named voice designs (OpenAI's voice names): a voice of the kind described, not the same voice.
DESIGNED_VOICES = {
    "alloy": "female, middle-aged, moderate pitch",
    "ash": "male, young adult, moderate pitch",
    "ballad": "male, middle-aged, moderate pitch, british accent",
    "coral": "female, young adult, high pitch",
    "echo": "male, middle-aged, moderate pitch",
    "fable": "male, young adult, british accent",
    "nova": "female, young adult, moderate pitch",
    "onyx": "male, middle-aged, very low pitch",
    "sage": "female, middle-aged, low pitch",
    "shimmer": "female, young adult, very high pitch",
    "verse": "male, young adult, low pitch",
    "marin": "female, young adult, american accent",
    "cedar": "male, middle-aged, low pitch, american accent",
}
# A saved voice's name: letters, digits, '_', '.', '-', starting with a letter or digit.
VOICE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
MAX_VOICES = 200  # saved voices in the library; a voice is at most MAX_PROMPT_FILE_BYTES
MAX_DETAILS_BYTES = 4096  # a NAME.json
FRAME_RATE = 25  # codec frames a second: a prompt's duration


class VoiceNameError(ValueError):
    """A name a new voice may not take (its form, or a built-in voice's)."""


@dataclass(frozen=True)
class VoiceEntry:
    """One voice as the doors list it."""

    name: str
    kind: str  # "auto", "design" (an instruct) or "clone" (a voice prompt)
    language: str | None = None  # a language code, or None: any
    instruct: str | None = None
    duration: float | None = None  # seconds of the reference (clone)
    created: str | None = None  # ISO 8601, UTC
    builtin: bool = False  # the auto voice and the designed voices: not removable

    def as_dict(self) -> dict:
        return asdict(self)


BUILTIN = [VoiceEntry(AUTO_VOICE, "auto", builtin=True)] + [
    VoiceEntry(name, "design", instruct=instruct, builtin=True)
    for name, instruct in DESIGNED_VOICES.items()
]
# no saved voice takes these, in any case ("AUTO" beside "auto" would be two voices to a listener)
BUILTIN_NAMES = frozenset(entry.name for entry in BUILTIN)


class VoiceLibrary:
    """The saved voices of ``folder`` (None: none), and the built-in ones beside them. Writes
    (``add_*``, ``delete``) need ``writable``; they raise ``ValueError`` with the reason."""

    def __init__(self, folder: str | Path | None = None, writable: bool = False):
        self.folder = Path(folder) if folder else None
        if self.folder is not None and not self.folder.is_dir():
            raise FileNotFoundError(
                f"--voices {self.folder}: no such folder; create it, or leave --voices out"
            )
        self.writable = bool(writable and self.folder is not None)
        if self.writable and not os.access(self.folder, os.W_OK | os.X_OK):
            logger.warning("the voices folder %s is not writable: the library is read-only", folder)
            self.writable = False
        if self.writable:
            self._clean()
        self._lock = threading.Lock()  # one writer at a time in this process

    # ------------------------------------------------------------------ reading

    def entries(self) -> list[VoiceEntry]:
        """Every voice, built-in first, then the saved ones by name."""
        return BUILTIN + self.saved()

    def saved(self) -> list[VoiceEntry]:
        if self.folder is None:
            return []
        names = {path.stem for path in self.folder.glob("*.npz")}
        names |= {path.stem for path in self.folder.glob("*.json")}
        found = (self._entry(name) for name in sorted(names) if self._is_name(name))
        return [entry for entry in found if entry is not None]

    def names(self) -> list[str]:
        return [entry.name for entry in self.entries()]

    def get(self, name: str) -> VoiceEntry | None:
        for entry in BUILTIN:
            if entry.name == name:
                return entry
        return self._entry(name) if self.folder is not None and self._is_name(name) else None

    def options(self, name: str) -> dict:
        """The request options of voice ``name`` (``instruct`` or ``voice_prompt``, and its
        language where it has one); ``ValueError`` naming the voices there are if it is unknown."""
        entry = self.get(name) if isinstance(name, str) else None
        if entry is None:
            shown = repr(name)[:80] if isinstance(name, str) else type(name).__name__
            raise ValueError(f"Unknown voice {shown}; choose one of {', '.join(self.names())}.")
        options = {"language": entry.language}
        if entry.kind == "design":
            options["instruct"] = entry.instruct
        elif entry.kind == "clone":  # its prompt loaded as the entry was read
            options["voice_prompt"] = str(self.folder / f"{entry.name}.npz")
        return options

    def _is_name(self, name: str) -> bool:
        return bool(VOICE_NAME.fullmatch(name)) and name.lower() not in BUILTIN_NAMES

    def _entry(self, name: str) -> VoiceEntry | None:
        """The saved voice ``name`` as its files say, or None (no such voice, or files that are
        not a voice: logged, and left alone)."""
        prompt, details_path = self.folder / f"{name}.npz", self.folder / f"{name}.json"
        details = {}
        if details_path.is_file():
            try:
                if details_path.stat().st_size > MAX_DETAILS_BYTES:
                    raise ValueError(f"it is over {MAX_DETAILS_BYTES} bytes")
                details = json.loads(details_path.read_text(encoding="utf-8"))
                if not isinstance(details, dict):
                    raise ValueError("it is not a JSON object")
            except (OSError, ValueError) as exc:
                logger.warning("ignoring %s: %s", details_path.name, exc)
                details = {}
        language = details.get("language") if isinstance(details.get("language"), str) else None
        created = details.get("created") if isinstance(details.get("created"), str) else None
        if prompt.is_file():
            try:
                frames = VoicePrompt.load(prompt).codes.shape[1]
            except ValueError as exc:
                logger.warning("ignoring %s: %s", prompt.name, exc)
                return None
            return VoiceEntry(
                name,
                "clone",
                language=language,
                duration=round(frames / FRAME_RATE, 2),
                created=created or _iso(prompt.stat().st_mtime),
            )
        instruct = details.get("instruct")
        if details.get("kind") == "design" and isinstance(instruct, str):
            return VoiceEntry(name, "design", language=language, instruct=instruct, created=created)
        return None  # a clone's details whose prompt is gone, or a stranger's file

    # ------------------------------------------------------------------ writing

    def check_name(self, name) -> str:
        """``name`` if a new voice may take it; else ``ValueError`` saying why."""
        if not isinstance(name, str):
            raise VoiceNameError(f"the voice name must be a string, got {type(name).__name__}")
        check_string(name, "the voice name")
        if not VOICE_NAME.fullmatch(name):
            raise VoiceNameError(
                "A voice name is 1 to 64 letters, digits, '_', '.' or '-', starting with a letter "
                f"or digit (no spaces or slashes); got {name[:80]!r}."
            )
        if name.lower() in BUILTIN_NAMES:
            raise VoiceNameError(
                f"{name!r} is a built-in voice's name (in any case); choose another name."
            )
        return name

    def add_prompt(self, name: str, prompt: VoicePrompt, language: str | None = None) -> VoiceEntry:
        """Save ``prompt`` (a reference, encoded) as the voice ``name``."""
        if not isinstance(prompt, VoicePrompt):
            raise ValueError("a saved voice is a VoicePrompt (a reference, encoded)")
        language = self._language(language)

        def write(path: Path) -> None:
            prompt.save(path)
            if path.stat().st_size > MAX_PROMPT_FILE_BYTES:
                raise ValueError("the voice prompt is over the size limit")
            VoicePrompt.load(path)  # as every reader will: a file that loads, or none

        details = {"kind": "clone", "language": language, "created": _iso(time.time())}
        return self._add(name, ".npz", write, details)

    def add_recording(self, name: str, encode, language: str | None = None) -> VoiceEntry:
        """Save as ``name`` the voice prompt ``encode()`` makes (a reference encoded, which takes
        a turn in the server's line): the name is checked first, so a refused one costs nothing."""
        self._check_writable()
        self.check_name(name)
        if self.get(name) is not None:
            raise FileExistsError(
                f"The voice {name!r} exists already; delete it first or choose another name."
            )
        return self.add_prompt(name, encode(), language)

    def add_design(self, name: str, instruct: str, language: str | None = None) -> VoiceEntry:
        """Save the voice design ``instruct`` (voice-design items, as the API takes) as ``name``."""
        if not isinstance(instruct, str) or not instruct.strip():
            raise ValueError(
                "A designed voice needs 'instruct': voice-design items such as 'female, low pitch'."
            )
        instruct = resolve_instruct(instruct)
        language = self._language(language)
        details = {
            "kind": "design",
            "instruct": instruct,
            "language": language,
            "created": _iso(time.time()),
        }
        return self._add(name, ".json", None, details)

    def delete(self, name: str) -> None:
        """Remove the saved voice ``name``."""
        self._check_writable()
        self.check_name(name)
        with self._lock:
            if self._entry(name) is None:
                raise FileNotFoundError(f"There is no saved voice {name!r}.")
            # the prompt first: once it is gone the voice is gone, whatever stays behind
            for suffix in (".npz", ".json"):
                with contextlib.suppress(FileNotFoundError):
                    (self.folder / f"{name}{suffix}").unlink()
        logger.info("voice %r removed from the library", name)

    def _language(self, language) -> str | None:
        if language is not None:
            check_string(language, "the language")
        return resolve_language(language)

    def read_only_message(self) -> str:
        return (
            "The voice library is read-only here: start the server with --voices DIR "
            "--voices-writable (a folder it may write) to add or remove voices."
        )

    def _check_writable(self) -> None:
        if not self.writable:
            raise PermissionError(self.read_only_message())

    def _add(self, name: str, suffix: str, write, details: dict) -> VoiceEntry:
        """Write voice ``name``: ``NAME.json`` (its details) first, which claims the name, then,
        for a clone, ``NAME.npz`` by ``write(path)``; each whole under a temporary name, then
        linked in. A clone's details without its prompt are not a voice (listed once both are)."""
        self._check_writable()
        self.check_name(name)
        with self._lock:
            if self._entry(name) is not None:
                raise FileExistsError(
                    f"The voice {name!r} exists already; delete it first or choose another name."
                )
            if len(self.saved()) >= MAX_VOICES:
                raise ValueError(
                    f"The voice library is full ({MAX_VOICES} voices); delete one first."
                )
            data = json.dumps({k: v for k, v in details.items() if v is not None}).encode()
            self._place(name, ".json", lambda path: path.write_bytes(data))
            if write is not None:
                try:
                    self._place(name, suffix, write)
                except BaseException:
                    (self.folder / f"{name}.json").unlink(missing_ok=True)  # ours: linked above
                    raise
        logger.info("voice %r added to the library (%s)", name, details["kind"])
        return self._entry(name)

    def _clean(self) -> None:
        """Remove what writers that died half-way left: temporary files, and a clone's details
        without its prompt (as the server starts). Only what is older than ``STALE_WRITE_S``:
        another process sharing the folder (a second server, a replica) may be writing now."""
        before = time.time() - STALE_WRITE_S

        def stale(path: Path) -> bool:
            with contextlib.suppress(OSError):
                return path.stat().st_mtime < before
            return False

        for left in self.folder.glob(".incoming-*"):
            if stale(left):
                with contextlib.suppress(OSError):
                    left.unlink()
        for details in self.folder.glob("*.json"):
            if details.with_suffix(".npz").exists() or not self._is_name(details.stem):
                continue
            with contextlib.suppress(OSError, ValueError, AttributeError):
                if (
                    stale(details)
                    and details.stat().st_size <= MAX_DETAILS_BYTES
                    and json.loads(details.read_text(encoding="utf-8")).get("kind") == "clone"
                ):
                    details.unlink()

    def _place(self, name: str, suffix: str, write) -> None:
        """``write(temporary path)``, then the file put in place as ``NAME+suffix`` if no file of
        that name exists (else ``FileExistsError``); a failed write leaves nothing behind."""
        final = self.folder / f"{name}{suffix}"
        handle, temporary = tempfile.mkstemp(prefix=".incoming-", suffix=suffix, dir=self.folder)
        os.close(handle)
        temporary = Path(temporary)
        try:
            write(temporary)
            os.chmod(temporary, 0o644)  # mkstemp's 0600: readable as the folder's other files
            with open(temporary, "rb+") as file:
                os.fsync(file.fileno())
            try:
                os.link(temporary, final)  # atomic, and fails if another writer got there first
            except FileExistsError:
                raise FileExistsError(
                    f"The voice {name!r} exists already; delete it first or choose another name."
                ) from None
        finally:
            temporary.unlink(missing_ok=True)


def _iso(timestamp: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(timestamp))
