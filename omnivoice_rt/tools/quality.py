"""How the presets sound against ``best``, for people with the real weights.

    python -m omnivoice_rt eval --mode quality --model-dir DIR --presets best,balanced,fast,turbo

speaks ``SENTENCES`` (or a file of your own) with each preset, the presets in turn for each
sentence, and reports per preset: the error rate of what a speech recogniser hears (words, or
characters for languages written without spaces), the speaker similarity to the reference (or,
for an auto or designed voice, to ``best``'s audio of the same sentence), the duration against
``best``'s and the real-time factor; a table, a JSON file, an SVG plot and the wav files.

Random weights make these numbers meaningless, so the tests check the mechanics on real speech
(espeak-ng's voices, pocketsphinx's English recogniser, resemblyzer's trained speaker encoder).
"""

from __future__ import annotations

import json
import logging
import time
import unicodedata
from dataclasses import asdict, dataclass
from pathlib import Path
from xml.sax.saxutils import escape

import numpy as np

from omnivoice_rt.audio import ops as audio_ops
from omnivoice_rt.errors import ArtifactError

logger = logging.getLogger(__name__)

# Sentences in several languages OmniVoice speaks, each with its language id.
SENTENCES: list[tuple[str, str]] = [
    ("en", "The quick brown fox jumps over the lazy dog near the river bank."),
    ("en", "Please call me back before five o'clock tomorrow afternoon."),
    ("en", "Seven thousand people watched the final match in the old stadium."),
    ("zh", "今天天气很好，我们一起去公园散步吧。"),
    ("zh", "这家餐厅的菜很好吃，价格也不贵。"),
    ("de", "Der Zug nach Berlin fährt in zehn Minuten vom dritten Gleis ab."),
    ("fr", "Je voudrais réserver une table pour deux personnes ce soir."),
    ("es", "Mañana vamos a visitar el museo de arte moderno con mis padres."),
    ("ja", "明日の朝、駅の前で友達と会う約束があります。"),
]
# Languages written without spaces between words: scored by characters (CER), others by words.
BY_CHARACTERS = {"zh", "yue", "ja", "ko", "th", "lo", "my", "km", "bo"}
SPEAKER_RATE = 16000
# A WeSpeaker ResNet34 trained on VoxCeleb, ONNX (input: Kaldi fbank features).
DEFAULT_SPEAKER_MODEL = "openspeech/wespeaker-models:voxceleb_resnet34_LM.onnx"


# ----------------------------------------------------------------------------- what was heard


def units(text: str, language: str | None) -> list[str]:
    """``text`` as the units an error rate counts: lower case, no punctuation or symbols; words,
    or characters for the languages of ``BY_CHARACTERS``."""
    text = unicodedata.normalize("NFKC", text).lower()
    kept = "".join(" " if unicodedata.category(c)[0] in "PSZC" else c for c in text)
    if language in BY_CHARACTERS:
        return [c for c in kept if not c.isspace()]
    return kept.split()


def edit_distance(a: list[str], b: list[str]) -> int:
    """Levenshtein distance: substitutions, insertions and deletions turning ``a`` into ``b``."""
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        diagonal, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            diagonal, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, diagonal + (x != y))
    return row[-1]


def error_rate(said: str, heard: str, language: str | None) -> float:
    """Word error rate (character error rate for ``BY_CHARACTERS``) of ``heard`` against ``said``."""
    reference = units(said, language)
    return edit_distance(reference, units(heard, language)) / max(len(reference), 1)


# ----------------------------------------------------------------------------- who was heard


def kaldi_fbank(wav: np.ndarray, bins: int = 80) -> np.ndarray:
    """(frames, bins) log mel energies of 16 kHz audio as WeSpeaker computes them for its ONNX
    models (``torchaudio.compliance.kaldi.fbank`` of the audio times 2**15: 25 ms Hamming
    frames every 10 ms, no dither, then the mean over time subtracted)."""
    x = np.asarray(wav, dtype=np.float64) * (1 << 15)
    if x.size < 400:
        raise ValueError("the audio is shorter than 25 ms: no speaker can be heard in it")
    count = 1 + (x.size - 400) // 160
    frames = np.lib.stride_tricks.sliding_window_view(x, 400)[::160][:count].copy()
    frames -= frames.mean(axis=1, keepdims=True)
    frames -= 0.97 * np.concatenate([frames[:, :1], frames[:, :-1]], axis=1)  # pre-emphasis
    frames *= np.hamming(400)
    power = np.abs(np.fft.rfft(frames, 512)) ** 2
    mel = lambda f: 1127.0 * np.log(1.0 + f / 700.0)  # noqa: E731 - Kaldi's mel scale
    low, high = mel(20.0), mel(SPEAKER_RATE / 2)
    edges = low + (high - low) / (bins + 1) * np.arange(bins + 2)
    at = mel(SPEAKER_RATE / 512 * np.arange(256))
    up = (at - edges[:-2, None]) / (edges[1:-1, None] - edges[:-2, None])
    down = (edges[2:, None] - at) / (edges[2:, None] - edges[1:-1, None])
    banks = np.pad(np.maximum(0.0, np.minimum(up, down)), ((0, 0), (0, 1)))
    energies = np.log(np.maximum(power @ banks.T, np.finfo(np.float32).eps))
    return (energies - energies.mean(axis=0)).astype(np.float32)


class SpeakerEncoder:
    """An ONNX speaker-embedding model: audio -> a unit vector; ``similarity`` is the cosine.

    Its one input is either the 16 kHz waveform, (1, samples), or WeSpeaker's features,
    (1, frames, 80) (:func:`kaldi_fbank`)."""

    def __init__(self, session):
        self.session = session
        self.input = session.get_inputs()[0]
        self.features = len(self.input.shape) == 3

    @classmethod
    def load(cls, source: str | Path = DEFAULT_SPEAKER_MODEL, threads: int | None = None):
        """A local ``.onnx`` file, or ``REPO:FILE`` on the Hub."""
        import onnxruntime as ort

        path = Path(source)
        if not path.is_file():
            repo, _, name = str(source).partition(":")
            if not name.endswith(".onnx"):
                raise FileNotFoundError(
                    f"speaker model {source!r}: give a local .onnx file or REPO:FILE.onnx on the Hub "
                    f"(default {DEFAULT_SPEAKER_MODEL})"
                )
            from omnivoice_rt.artifacts.hub import download

            path = download(repo, [name], hint="give a local .onnx file") / name
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        try:
            session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own types
            raise ArtifactError(f"the speaker model {path} could not be loaded: {exc}") from exc
        return cls(session)

    def embed(self, audio) -> np.ndarray:
        """The unit embedding of ``audio`` (a path, bytes, or (array, sample_rate))."""
        wav = audio_ops.load_audio(audio, SPEAKER_RATE)[0].astype(np.float32)
        feed = kaldi_fbank(wav)[None] if self.features else wav[None]
        vector = self.session.run(None, {self.input.name: feed})[0].reshape(-1)
        return vector / max(float(np.linalg.norm(vector)), 1e-12)

    def similarity(self, a, b) -> float:
        return float(self.embed(a) @ self.embed(b))


# ----------------------------------------------------------------------------- the presets


@dataclass
class Sample:
    preset: str  # PRESET, or PRESET@KERNEL when kernels are compared
    language: str | None
    text: str
    heard: str | None  # None: no recogniser (--asr-model none), the error rate not measured
    error: float | None
    similarity: float | None  # to the reference, or to best's audio of the sentence
    seconds: float  # of audio
    took: float  # seconds to make it


def read_sentences(path: str | Path) -> list[tuple[str | None, str]]:
    """One sentence per line, ``LANGUAGE<TAB>TEXT`` (a language id such as en, zh) or ``TEXT``
    alone (the language detected, scored by words); empty lines and ``#`` lines skipped."""
    sentences = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        language, tab, text = line.partition("\t")
        sentences.append((language.strip() or None, text.strip()) if tab else (None, line.strip()))
    if not sentences:
        raise ValueError(f"{path} has no sentences: write one per line, LANGUAGE<TAB>TEXT")
    return sentences


def evaluate(
    voices,
    presets: list[str],
    sentences: list[tuple[str | None, str]],
    hear,
    speaker: SpeakerEncoder | None = None,
    output: Path | None = None,
    seed: int = 0,
    **options,
) -> list[Sample]:
    """Each sentence with each preset of each voice (a model, or ``{kernel: model}`` to compare
    kernels: the samples' ``preset`` is then ``PRESET@KERNEL``), in turn, so the machine's drift
    is shared; ``hear(audio, language) -> text`` is the recogniser (None: none, the error rate
    is not measured); ``options`` go to every synthesis (``ref_audio``, ``ref_text``, ``instruct``...). The wav files go to
    ``output/PRESET/N.wav``."""
    import soundfile as sf

    runs = [
        (f"{preset}@{kernel}" if isinstance(voices, dict) else preset, voice, preset)
        for kernel, voice in (voices.items() if isinstance(voices, dict) else [("", voices)])
        for preset in presets
    ]
    samples = []
    reference = options.get("ref_audio")
    if speaker is not None and reference is not None:
        reference = speaker.embed(reference)  # once: every sample is held against it
    for n, (language, text) in enumerate(sentences):
        against = reference  # else the first run's audio of this sentence
        for label, voice, preset in runs:
            started = time.perf_counter()
            speech = voice.generate(text, language=language, preset=preset, seed=seed, **options)
            took = time.perf_counter() - started
            audio = (speech.waveform, speech.sample_rate)
            if output is not None:
                (output / label).mkdir(parents=True, exist_ok=True)
                sf.write(output / label / f"{n}.wav", *audio)
            heard = None if hear is None else hear(audio, language)
            similarity = None
            if speaker is not None:
                embedding = speaker.embed(audio)
                against = embedding if against is None else against
                similarity = float(against @ embedding)
            samples.append(
                Sample(
                    label,
                    language,
                    text,
                    heard,
                    None if heard is None else error_rate(text, heard, language),
                    similarity,
                    speech.seconds,
                    took,
                )
            )
            logger.info("%s %d: heard %r", label, n, heard)
    return samples


def summary(samples: list[Sample]) -> list[dict]:
    """Per preset: mean error rate, mean similarity, duration against the first preset's (mean of
    the ratios per sentence) and real-time factor (all seconds taken over all seconds made)."""
    presets = list(dict.fromkeys(s.preset for s in samples))
    first = {s.text: s.seconds for s in samples if s.preset == presets[0]}
    rows = []
    for preset in presets:
        mine = [s for s in samples if s.preset == preset]
        heard = [s.error for s in mine if s.error is not None]
        similar = [s.similarity for s in mine if s.similarity is not None]
        rows.append(
            {
                "preset": preset,
                "error": float(np.mean(heard)) if heard else None,
                "similarity": float(np.mean(similar)) if similar else None,
                "duration": float(np.mean([s.seconds / first[s.text] for s in mine])),
                "rtf": sum(s.took for s in mine) / max(sum(s.seconds for s in mine), 1e-9),
            }
        )
    return rows


COLUMNS = {  # column: (heading, format)
    "error": ("error rate", "{:.3f}"),
    "similarity": ("similarity", "{:.3f}"),
    "duration": ("duration / first", "{:.3f}"),
    "rtf": ("real-time factor", "{:.2f}"),
}


def table(rows: list[dict]) -> str:
    """The summary as a Markdown table."""
    lines = ["| preset | " + " | ".join(h for h, _ in COLUMNS.values()) + " |"]
    lines.append("|---" * (len(COLUMNS) + 1) + "|")
    for row in rows:
        cells = ["-" if row[k] is None else f.format(row[k]) for k, (_, f) in COLUMNS.items()]
        lines.append(f"| {row['preset']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> None:
    """An SVG with one horizontal bar chart per column of ``COLUMNS``, stacked: a bar per preset,
    its value written after it. A value not measured (no recogniser, no speaker model) is written
    as such, never drawn as zero. Sized from its labels (about 7 px a character)."""
    label = 16 + 7 * max(len(row["preset"]) for row in rows)  # the presets' column
    bars, values, line = 260, 90, 20  # the longest bar, the values' column, a row's height
    width, y, parts = label + bars + values, 0, []
    for key, (heading, form) in COLUMNS.items():
        parts.append(f'<text x="4" y="{y + 18}" font-size="14" font-weight="bold">{heading}</text>')
        y += 28
        top = max([row[key] for row in rows if row[key] is not None] + [1e-9])
        for row in rows:
            value = row[key]
            parts.append(
                f'<text x="{label - 8}" y="{y + 14}" font-size="12" text-anchor="end">'
                f"{escape(row['preset'])}</text>"
            )
            if value is None:
                parts.append(
                    f'<text x="{label}" y="{y + 14}" font-size="12" fill="#777">not measured</text>'
                )
            else:
                length = bars * max(value, 0.0) / top
                parts.append(
                    f'<rect x="{label}" y="{y + 3}" width="{length:.1f}" height="{line - 6}" '
                    f'fill="#4a7ab7"/><text x="{label + length + 4:.1f}" y="{y + 14}" '
                    f'font-size="12">{form.format(value)}</text>'
                )
            y += line
        y += 12
    path.write_text(
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{y}" '
        f'font-family="sans-serif">' + "".join(parts) + "</svg>\n",
        encoding="utf-8",
    )


def report(samples: list[Sample], output: Path) -> str:
    """Write ``output/quality.json`` (every sample and the summary) and ``quality.svg``; the table."""
    rows = summary(samples)
    output.mkdir(parents=True, exist_ok=True)
    payload = {"summary": rows, "samples": [asdict(s) for s in samples]}
    (output / "quality.json").write_text(json.dumps(payload, ensure_ascii=False, indent=1))
    plot(rows, output / "quality.svg")
    return table(rows)
