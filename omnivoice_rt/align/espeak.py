"""eSpeak NG through its C library: a text spoken with each word's place in its audio, the
template the aligner warps onto a recording (``align.py``).

eSpeak NG is GPL-3.0, so it is an optional extra, never a dependency of the core: ``pip install
'omnivoice-onnx[align]'`` brings the ``espeakng-loader`` wheel (the library and its voices);
without it the system's ``libespeak-ng`` serves (Debian's ``espeak-ng``). Only asking for word
timings loads it. The library is process-global and not reentrant, so every call holds ``LOCK``.

Each word is preceded by an SSML ``<mark>``, whose event gives the sample where the word starts:
reliable where eSpeak's own word events are not (a number read as several words gives several;
some short words give none). A mark at the start of a sentence is lost, so there the word's
own event serves, found by its place in the text (``text_position``, counted in characters)."""

from __future__ import annotations

import collections
import ctypes
import ctypes.util
import html
import threading
from dataclasses import dataclass

import numpy as np

LOCK = threading.Lock()
# the last templates made (``Espeak.template``), each at most this long: eSpeak carries a little
# state from one synthesis to the next (its pitch flutter's phase, and more), which moves an
# alignment's words by up to tens of milliseconds from call to call; a text aligned again reuses
# its template, so identical requests get identical times (at most 8 x 30 s, about 21 MB)
TEMPLATES_KEPT, TEMPLATE_KEPT_S = 8, 30.0
EXTRA = "pip install 'omnivoice-onnx[align]' (eSpeak NG, GPL-3.0)"

# speak_lib.h (API revision 12)
AUDIO_OUTPUT_SYNCHRONOUS = 2
INITIALIZE_DONT_EXIT = 0x8000
CHARS_UTF8, SSML = 0x1, 0x10
POS_CHARACTER = 1
EVENT_LIST_TERMINATED, EVENT_WORD, EVENT_MARK = 0, 1, 3
PARAMETER_RATE, PARAMETER_PITCH = 1, 3
DEFAULT_WPM = 175


class EspeakMissing(ValueError):
    """Word timings were asked for and eSpeak NG is not installed."""


class _Id(ctypes.Union):
    _fields_ = [("number", ctypes.c_int), ("name", ctypes.c_char_p), ("string", ctypes.c_char * 8)]


class _Event(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("unique_identifier", ctypes.c_uint),
        ("text_position", ctypes.c_int),
        ("length", ctypes.c_int),
        ("audio_position", ctypes.c_int),  # milliseconds
        ("sample", ctypes.c_int),  # samples, at the library's rate
        ("user_data", ctypes.c_void_p),
        ("id", _Id),
    ]


_CALLBACK = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.POINTER(_Event)
)


@dataclass
class Rendering:
    """eSpeak's speech for some words: its samples and where each word starts (seconds; NaN for
    a word that gave no mark)."""

    samples: np.ndarray  # float32, mono
    sample_rate: int
    starts: np.ndarray


def _library() -> tuple[ctypes.CDLL, bytes | None]:
    try:
        import espeakng_loader  # the extra: the library and its voices in one wheel
    except ImportError:
        name = ctypes.util.find_library("espeak-ng")
        if name is None:
            raise EspeakMissing(f"word timings need eSpeak NG: {EXTRA}") from None
        return ctypes.CDLL(name), None
    return ctypes.CDLL(espeakng_loader.get_library_path()), espeakng_loader.get_data_path().encode()


class Espeak:
    """The one eSpeak NG of this process (:func:`engine`)."""

    def __init__(self):
        lib, data = _library()
        lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.espeak_Synth.argtypes = [
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_uint,
            ctypes.c_int,
            ctypes.c_uint,
            ctypes.c_uint,
            ctypes.POINTER(ctypes.c_uint),
            ctypes.c_void_p,
        ]
        lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        self.sample_rate = lib.espeak_Initialize(
            AUDIO_OUTPUT_SYNCHRONOUS, 0, data, INITIALIZE_DONT_EXIT
        )
        if self.sample_rate <= 0:
            raise EspeakMissing(f"eSpeak NG did not start (its voices not found): {EXTRA}")
        self._lib = lib
        self._chunks: list[np.ndarray] = []
        self._marks: dict[int, int] = {}
        self._words: list[tuple[int, int]] = []  # (text_position, sample) of each word event
        self._callback = _CALLBACK(self._heard)  # kept: the library calls it
        lib.espeak_SetSynthCallback(self._callback)
        self._kept: collections.OrderedDict = collections.OrderedDict()  # template's key -> it
        self._keeping = threading.Lock()

    def _heard(self, wav, count, events) -> int:
        if wav and count > 0:
            self._chunks.append(np.ctypeslib.as_array(wav, (count,)).copy())
        i = 0
        while events[i].type != EVENT_LIST_TERMINATED:
            event = events[i]
            if event.type == EVENT_MARK and event.id.name:
                self._marks.setdefault(int(event.id.name), event.sample)
            elif event.type == EVENT_WORD:
                self._words.append((event.text_position, event.sample))
            i += 1
        return 0

    def has_voice(self, voice: str) -> bool:
        with LOCK:
            return self._lib.espeak_SetVoiceByName(voice.encode()) == 0

    def template(self, words: list[str], voice: str, joiner: str = " ") -> Rendering:
        """``speak(words, voice, joiner=joiner)``, the same (read-only) rendering again for the
        same words while it is among the last ``TEMPLATES_KEPT`` made (``TEMPLATE_KEPT_S`` long
        at most: a longer one, as the align tool's up to 120 s, is made anew each time)."""
        key = (tuple(words), voice, joiner)
        with self._keeping:  # made under it: two threads asking at once get one rendering
            if key in self._kept:
                self._kept.move_to_end(key)
                return self._kept[key]
            made = self.speak(words, voice, joiner=joiner)  # eSpeak is one at a time anyway
            made.samples.flags.writeable = made.starts.flags.writeable = False
            if made.samples.size <= TEMPLATE_KEPT_S * self.sample_rate:
                self._kept[key] = made
                while len(self._kept) > TEMPLATES_KEPT:
                    self._kept.popitem(last=False)
            return made

    def forget(self) -> None:
        """Drops the templates kept: the next alignment of a text renders it anew (a bench
        samples eSpeak's renderings, which vary from call to call)."""
        with self._keeping:
            self._kept.clear()

    def speak(
        self,
        words: list[str],
        voice: str,
        *,
        joiner: str = " ",
        wpm: int = DEFAULT_WPM,
        pitch: int = 50,
        rates: list[float] | None = None,
        breaks_ms: list[float] | None = None,
    ) -> Rendering:
        """``words`` spoken in ``voice`` (an eSpeak voice name, ``en`` or ``en+f3``) at ``wpm``,
        ``joiner`` between them (``""`` for a script written without spaces); ``rates``: each
        word's rate (1.0 the voice's), ``breaks_ms``: a silence after each word (0: none)."""
        parts, spans = ["<speak>"], []  # spans: where each word's text is, in characters
        for index, word in enumerate(words):
            body = html.escape(word, quote=False)
            parts.append(f'<mark name="{index}"/>')
            if rates is not None:
                parts.append(f'<prosody rate="{round(rates[index] * 100)}%">')
            at = sum(map(len, parts)) + 1  # eSpeak counts from 1
            spans.append((at, at + len(body)))
            parts.append(body + ("</prosody>" if rates is not None else "") + joiner)
            if breaks_ms is not None and breaks_ms[index] > 0:
                parts.append(f'<break time="{round(breaks_ms[index])}ms"/>')
        parts.append("</speak>")
        text = "".join(parts).encode() + b"\0"
        with LOCK:
            self._chunks, self._marks, self._words = [], {}, []
            if self._lib.espeak_SetVoiceByName(voice.encode()) != 0:
                raise ValueError(f"eSpeak NG has no voice {voice!r}")
            self._lib.espeak_SetParameter(PARAMETER_RATE, int(wpm), 0)
            self._lib.espeak_SetParameter(PARAMETER_PITCH, int(pitch), 0)
            self._lib.espeak_Synth(
                text, len(text), 0, POS_CHARACTER, 0, CHARS_UTF8 | SSML, None, None
            )
            self._lib.espeak_Synchronize()
            chunks, marks, events = self._chunks, self._marks, self._words
        samples = np.concatenate(chunks) if chunks else np.zeros(0, np.int16)
        starts = np.array([marks.get(i, np.nan) for i in range(len(words))], np.float64)
        for index, (first, last) in enumerate(spans):
            if np.isnan(starts[index]):  # its mark was lost: its word event, if it has one
                found = [sample for at, sample in events if first <= at < last]
                starts[index] = found[0] if found else np.nan
        return Rendering(
            samples.astype(np.float32) / 32768.0, self.sample_rate, starts / self.sample_rate
        )


_STARTING = threading.Lock()


def engine() -> Espeak:
    """The process's one eSpeak NG, started on first use by one thread (``EspeakMissing``
    without it)."""
    with _STARTING:
        if _ENGINE:
            return _ENGINE[0]
        with LOCK:
            _ENGINE.append(Espeak())
        return _ENGINE[0]


_ENGINE: list[Espeak] = []
