"""Audio file formats for the doors that return bytes (the OpenAI-compatible endpoint): one table,
and a writer that turns pieces of speech into bytes as they are made; ``pcm16``, the 16-bit
samples every door writes.

    writer = AudioWriter("mp3", 16000, streamed=True)
    for piece in voice.stream(text, sample_rate=16000):
        send(writer.write(piece.waveform))
    send(writer.close())

A format is written at the rate its pieces come at (``check_rate``: 8 to 48 kHz, a format's own
set where it has one); a request's ``sample_rate`` resamples them in the runtime, through one
streaming resampler (soxr, ``Resampler``) for all its pieces, flushed with the last: the same
samples as the whole resampled at once.

Streamed, ``pcm`` is raw samples, ``wav`` a header that leaves its sizes open (0xFFFFFFFF, as
OpenAI's streamed wav) then raw samples, ``mp3``, ``opus`` and ``aac`` (ADTS) the encoder's
frames as it makes them; ``flac`` is written whole at the end (its header is rewritten on
closing). Not streamed, every format is one complete file, written at ``close``. libsndfile
writes all but ``aac``, which FFmpeg's encoder writes through PyAV (``pip install av``).
"""

from __future__ import annotations

import io
import struct

import numpy as np
import soundfile as sf

from omnivoice_rt.limits import MAX_SAMPLE_RATE, MIN_SAMPLE_RATE

# response_format -> (media type, libsndfile format, subtype); pcm is 16-bit little-endian mono, no header.
FORMATS = {
    "wav": ("audio/wav", "WAV", "PCM_16"),
    "mp3": ("audio/mpeg", "MP3", "MPEG_LAYER_III"),
    "flac": ("audio/flac", "FLAC", "PCM_16"),
    "opus": ("audio/ogg", "OGG", "OPUS"),
    "aac": ("audio/aac", "ADTS", "aac"),  # FFmpeg's, through PyAV
    "pcm": ("audio/pcm", None, None),
}
# formats whose bytes can leave before the end of the audio
STREAMED = {"pcm", "wav", "mp3", "opus", "aac"}
# formats that take some rates only (the others: any rate in MIN_SAMPLE_RATE..MAX_SAMPLE_RATE):
# Opus its own five, MP3 and AAC the MPEG standard rates
MPEG_RATES = (8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000)
RATES = {"opus": (8000, 12000, 16000, 24000, 48000), "mp3": MPEG_RATES, "aac": MPEG_RATES}
AAC_BIT_RATE = 64_000  # mono speech: transparent enough, a third of 24 kHz 16-bit pcm's


def check_rate(response_format: str, rate) -> int:
    """``rate`` if ``response_format`` can be written at it, else a ValueError naming
    ``sample_rate`` and the rates it may be."""
    if isinstance(rate, bool) or not isinstance(rate, int):
        raise ValueError(
            f"sample_rate must be a whole number of samples a second, {MIN_SAMPLE_RATE} to "
            f"{MAX_SAMPLE_RATE}, not {rate!r}"
        )
    if not MIN_SAMPLE_RATE <= rate <= MAX_SAMPLE_RATE:
        raise ValueError(
            f"sample_rate takes {MIN_SAMPLE_RATE} to {MAX_SAMPLE_RATE} samples a second, not {rate}"
        )
    if rate not in RATES.get(response_format, (rate,)):
        rates = ", ".join(str(r) for r in RATES[response_format])
        raise ValueError(f"{response_format} is written at {rates} samples a second, not {rate}")
    return rate


class Resampler:
    """One stream of audio at another rate, piece by piece (soxr's streaming resampler): the
    pieces ``push`` returns, then ``flush``'s tail, are the whole resampled at once. The output
    is aligned in time with the input but held back by the filter's delay (12 ms at 16 kHz, 43
    ms at 8 kHz), so a piece's samples come partly with the next push: ``ahead`` says where the
    next sample pushed lands, counted from the start of what that push returns."""

    def __init__(self, source: int, rate: int):
        import soxr

        self._stream = soxr.ResampleStream(source, rate, 1, dtype="float32", quality="HQ")
        self.source, self.rate = source, rate
        self._taken = self._given = 0  # samples pushed, and returned

    @property
    def ahead(self) -> int:
        return round(self._taken * self.rate / self.source) - self._given

    def push(self, waveform: np.ndarray) -> np.ndarray:
        waveform = np.ascontiguousarray(waveform, dtype=np.float32).reshape(-1)
        out = self._stream.resample_chunk(waveform)
        self._taken, self._given = self._taken + waveform.size, self._given + out.size
        return out

    def flush(self) -> np.ndarray:
        out = self._stream.resample_chunk(np.zeros(0, np.float32), last=True)
        self._given += out.size
        return out

    def placed(self, waveform: np.ndarray, captions: list, last: bool) -> tuple[np.ndarray, list]:
        """One result of a stream resampled, the stream flushed with the ``last``, and its
        captions (``Caption``) moved to where their samples came out."""
        ahead = self.ahead  # where this waveform's first sample lands in ``out``
        out = self.push(waveform)
        if last:
            out = np.concatenate([out, self.flush()])
        return out, [caption.at_rate(self.rate, ahead, out.size, last) for caption in captions]


def resampled(waveform: np.ndarray, source: int, rate: int) -> np.ndarray:
    """A whole (N,) or (1, N) waveform at ``rate`` (itself where ``rate`` is ``source``)."""
    if rate == source:
        return waveform
    samples = np.asarray(waveform, dtype=np.float32).reshape(-1)
    resampler = Resampler(source, rate)
    return np.concatenate([resampler.push(samples), resampler.flush()])


def available_formats() -> list[str]:
    """The formats this machine writes (mp3 and opus need libsndfile 1.1 or later, aac PyAV)."""
    return [name for name in FORMATS if not missing_encoder(name)]


def missing_encoder(response_format: str) -> str:
    """What this machine lacks to write ``response_format`` ('' where nothing)."""
    _, container, subtype = FORMATS[response_format]
    if container is None:
        return ""
    if container == "ADTS":
        try:
            import av
        except ImportError:
            return "aac is encoded by FFmpeg through PyAV, which is not installed: pip install av"
        return "" if "aac" in av.codecs_available else "this PyAV's FFmpeg has no aac encoder"
    if container in sf.available_formats() and subtype in sf.available_subtypes(container):
        return ""
    return f"this machine's libsndfile {sf.__libsndfile_version__} does not write {response_format}"


class AacFile:
    """An ADTS stream of AAC frames written into ``buffer`` as 16-bit mono samples come
    (FFmpeg's encoder through PyAV), as ``soundfile.SoundFile`` writes the other formats."""

    def __init__(self, buffer: io.BytesIO, sample_rate: int):
        import av

        self._av, self.sample_rate = av, sample_rate
        self._container = av.open(buffer, "w", format="adts")
        self._stream = self._container.add_stream("aac", rate=sample_rate)
        self._stream.codec_context.layout = "mono"
        self._stream.bit_rate = AAC_BIT_RATE

    def write(self, samples: np.ndarray) -> None:
        if not samples.size:
            return
        frame = self._av.AudioFrame.from_ndarray(
            samples.reshape(1, -1), format="s16", layout="mono"
        )
        frame.sample_rate = self.sample_rate
        self._mux(frame)

    def close(self) -> None:
        self._mux(None)  # the encoder's last frames
        self._container.close()

    def _mux(self, frame) -> None:
        for packet in self._stream.encode(frame):
            self._container.mux(packet)


def decoded(path, rate: int, max_seconds: float) -> np.ndarray:
    """A file libsndfile cannot read (AAC, M4A...) decoded by FFmpeg through PyAV: its first
    audio stream, mono float32 at ``rate``; ``ValueError`` where it is not audio FFmpeg reads,
    PyAV is missing, or it runs past ``max_seconds`` (decoding stops there)."""
    try:
        import av
    except ImportError:
        raise ValueError(f"{path}: not audio libsndfile reads, and PyAV is not installed") from None
    limit, parts, count = int(max_seconds * rate), [], 0
    try:
        with av.open(str(path)) as container:
            if not container.streams.audio:
                raise ValueError(f"{path}: no audio in it")
            resampler = av.AudioResampler(format="flt", layout="mono", rate=rate)
            for frame in container.decode(container.streams.audio[0]):
                for out in resampler.resample(frame):
                    parts.append(out.to_ndarray().reshape(-1))
                    count += parts[-1].size
                if count > limit:
                    raise ValueError(f"{path}: longer than {max_seconds:.0f} s")
            parts += [out.to_ndarray().reshape(-1) for out in resampler.resample(None)]
    except av.FFmpegError as exc:
        raise ValueError(f"{path}: not audio this can read ({exc})") from None
    return np.concatenate(parts).astype(np.float32) if parts else np.zeros(0, np.float32)


def pcm16(waveform: np.ndarray) -> np.ndarray:
    """16-bit samples of a float waveform in [-1, 1], as made: never rescaled."""
    return np.round(np.clip(waveform, -1.0, 1.0) * 32767).astype(np.int16)


def wav_header(sample_rate: int, data_bytes: int = 0xFFFFFFFF) -> bytes:
    """A 16-bit mono wav header; the default sizes say 'until the stream ends'."""
    riff = 0xFFFFFFFF if data_bytes == 0xFFFFFFFF else 36 + data_bytes
    fmt = struct.pack("<4sIHHIIHH", b"fmt ", 16, 1, 1, sample_rate, sample_rate * 2, 2, 16)
    return (
        b"RIFF" + struct.pack("<I", riff) + b"WAVE" + fmt + b"data" + struct.pack("<I", data_bytes)
    )


class AudioWriter:
    """Bytes of one audio file, written piece by piece: ``write`` returns what can be sent now
    (nothing when not streamed), ``close`` the rest, at the pieces' ``sample_rate``, one the
    format takes (``check_rate``)."""

    def __init__(self, response_format: str, sample_rate: int, streamed: bool = True):
        if response_format not in FORMATS:
            raise ValueError(
                f"unknown audio format {response_format!r}; choose one of {', '.join(FORMATS)}"
            )
        self.format = response_format
        self.sample_rate = check_rate(response_format, sample_rate)
        self.streamed = streamed and response_format in STREAMED
        self._pieces: list[np.ndarray] = []  # kept until close when not streamed
        self._buffer: io.BytesIO | None = None
        self._file: sf.SoundFile | None = None
        self._sent = 0
        self._started = False

    def write(self, waveform: np.ndarray) -> bytes:
        return self._write(pcm16(np.asarray(waveform, dtype=np.float32).reshape(-1)))

    def close(self) -> bytes:
        return self._close()

    def _write(self, samples: np.ndarray) -> bytes:
        if not self.streamed:
            self._pieces.append(samples)
            return b""
        if self.format in ("pcm", "wav"):
            header = (
                wav_header(self.sample_rate) if self.format == "wav" and not self._started else b""
            )
            self._started = True
            return header + samples.tobytes()
        if self._file is None:
            self._buffer = io.BytesIO()
            self._file = self._open(self._buffer)
        self._file.write(samples)
        return self._new_bytes()

    def _open(self, buffer: io.BytesIO):
        """The encoder of this format, writing into ``buffer``."""
        _, container, subtype = FORMATS[self.format]
        if container == "ADTS":
            return AacFile(buffer, self.sample_rate)
        return sf.SoundFile(buffer, "w", self.sample_rate, 1, subtype, format=container)

    def _close(self) -> bytes:
        if self.streamed:
            if self._file is None:
                return b""
            self._file.close()  # the encoder's last frames (a header rewritten at the start is not sent again)
            return self._new_bytes()
        samples = np.concatenate(self._pieces) if self._pieces else np.zeros(0, np.int16)
        if self.format == "pcm":
            return samples.tobytes()
        if self.format == "wav":
            return wav_header(self.sample_rate, samples.nbytes) + samples.tobytes()
        buffer = io.BytesIO()
        encoder = self._open(buffer)
        encoder.write(samples)
        encoder.close()
        return buffer.getvalue()

    def _new_bytes(self) -> bytes:
        data = self._buffer.getbuffer()[self._sent :].tobytes()
        self._sent += len(data)
        return data
