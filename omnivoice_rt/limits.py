"""The bounds every door shares (the page, gradio_client, the CLI, the HTTP and MCP doors, batch):
one table, each with the reason it is there. docs/limits.md lists them.

A request is measured against these before any model runs: text and transcripts by length,
reference files by their header (never decoded when over the cap), voice prompt files by their
members' headers (never decompressed when over), and the conditional row by the LLM's position
table and the memory one attention layer needs for it.
"""

from __future__ import annotations

import math

MAX_TEXT_CHARS = 10_000  # text to speak; past ~30 s of speech it is made in chunks
MAX_DURATION_S = 600.0  # a forced duration, and a text's pauses added up
MAX_PAUSE_S = 10.0  # one pause ([pause:1.5s], SSML's <break time="1.5s"/>)
# a text's segments between its pauses and SSML's tags: each is one generation at least
MAX_SEGMENTS = 200
# a subtitle file to dub (omnivoice_rt.text.subtitles): its size, its cues, its last time
MAX_SUBTITLE_BYTES = 2 << 20
MAX_CUES = 5_000
MAX_TRACK_S = 6 * 3600.0
# a dub's fastest speech: a cue whose text needs more to fit its window is reported, not cut
DUB_MAX_SPEED = 1.5
MAX_SPEAKERS = 16  # named speakers of one dialogue script
MAX_SPEAKER_CHARS = 64  # a speaker's name in a script, as a voice's name in the library
MAX_TURN_PAUSE_S = 5.0  # the silence between two turns of a script
MAX_SCRIPT_CHARS = 100_000  # a dialogue script; each turn is a request, at most MAX_TEXT_CHARS
# word timings (omnivoice_rt/align): the recording one alignment takes (longer: align it in parts;
# a piece of speech is ~15 s), and the words of its text
MAX_ALIGN_S = 120.0
MAX_ALIGN_WORDS = 2_000
MAX_INSTRUCT_CHARS = 500  # a voice design: at most six short items ("female, low pitch")
# speaking rate: 1.0 normal; a bound each way keeps the estimate finite
MIN_SPEED, MAX_SPEED = (0.1, 10.0)
MAX_STEPS = 64  # unmasking steps: the presets use 12, 16 and 32; upstream's docs suggest 16 to 32
MIN_REFERENCE_S = 0.5  # of sound in a reference, after silence removal
# the codec's HuBERT attends over the whole reference: memory grows with its square
MAX_REFERENCE_S = 30.0
# a reference recording before silence removal, read from its header
MAX_SOURCE_S = 4 * MAX_REFERENCE_S
MAX_SOURCE_RATE = 192_000  # samples per second of a reference recording
MAX_SOURCE_CHANNELS = 32
# a reference's transcript: 30 s of fast speech is about 600 characters
MAX_TRANSCRIPT_CHARS = 2_000
MAX_PROMPT_FILE_BYTES = 1 << 20  # a voice prompt .npz: 30 s of codes are 48 kB
MAX_UPLOAD = "20mb"  # any upload to the Space
# the rates an answer may be resampled to (the model makes 24 kHz): telephony to video
MIN_SAMPLE_RATE, MAX_SAMPLE_RATE = 8_000, 48_000
# requests waiting for their turn in a server, all doors together; more are turned away
MAX_WAITING = 32
# generations under way at once in a server, taking turns on the CPU (server/turns.py): each
# holds its caches (a balanced clone of a 30 s reference: ~200 MB of keys and values), so four
# is under a gigabyte beside the model, and lets a newcomer start while three long texts go on
CONCURRENCY = 4
# of those, one client's (an address: server/clients.py): two, so that a client with many
# requests keeps one streaming while it waits for the next, and others find half the slots;
# its requests beyond wait behind other clients', holding at most its share of MAX_WAITING
# (here half: 16)
PER_CLIENT = 2
# Connections a server holds, each a file descriptor of the 1,024 a process commonly has: past
# them a newcomer is refused at once (HTTP 503, a Wyoming 'busy' event), and silent ones close.
MAX_HTTP_CONNECTIONS = 256  # the page, its API, MCP and the OpenAI door
HEADER_TIMEOUT_S = 10.0  # an HTTP request's headers, from its connection or the last answer
MAX_WYOMING_CONNECTIONS = 32  # Home Assistant opens one per request
WYOMING_IDLE_S = 60.0  # a Wyoming connection without an event while nothing is answered
# A client that sends its body slowly, or stops reading the audio, holds a connection (and, for
# the audio, its turn in the line): past these it is let go.
BODY_TIMEOUT_S = 30.0  # an OpenAI request's body (1 MB at most)
UPLOAD_TIMEOUT_S = 120.0  # a voice's upload (20 MB at most)
SEND_TIMEOUT_S = 30.0  # a piece of audio the client does not read
# On SIGTERM the server takes no new connections and lets those open finish for this long (an
# event stream a client keeps open would otherwise hold the stop for ever), then exits 0.
GRACEFUL_STOP_S = 10.0
# Before that, on SIGTERM, the requests under way may finish for this long while new ones are
# refused (503); with GRACEFUL_STOP_S, within Kubernetes' default 30 s grace (--stop-timeout)
DRAIN_S = 20.0
# One attention layer holds heads x rows x rows float32 scores for the conditional row: at 2 GiB
# the real model (16 heads) takes 5,792 positions, far beyond a 30 s reference and a 15 s chunk.
ATTENTION_BUDGET_BYTES = 2 << 30


def max_row(heads: int, position_table: int | None) -> tuple[int, str]:
    """The longest conditional row the model may run, and what sets it."""
    budget = math.isqrt(ATTENTION_BUDGET_BYTES // (4 * max(1, heads)))
    if position_table and position_table <= budget:
        return position_table, f"the LLM's position table ({position_table} positions)"
    return budget, f"the attention memory budget ({ATTENTION_BUDGET_BYTES >> 20} MiB for one layer)"
