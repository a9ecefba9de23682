"""The voices of several speakers in one result (a dialogue script, a dub's "Name: text" cues):
each speaker's request options, their references encoded once.

    table = merged_voices({"language": "en", "seed": 0}, {"Ann": library.options("ann")})
    voices = encode_voices(voice, table)
    voices["Ann"]["options"], voices["Ann"]["prompt"]   # voices[None]: the default voice's

A speaker's voice fields (``VOICE_FIELDS``) replace the default's; the other options (the
language, the settings) are the default's unless the speaker's own say otherwise, but the
track's (``TRACK_FIELDS``: its sample rate), which are the default's alone. A speaker
without a reference (the auto voice, a design) has no prompt until its first line is made; its
later lines take that line's voice (``Speech.voice_prompt``), so one speaker is one voice.
"""

from __future__ import annotations

from omnivoice_rt.voice_prompt import VoicePrompt

VOICE_FIELDS = ("instruct", "ref_audio", "ref_text", "voice_prompt")  # a speaker's replace these
TRACK_FIELDS = ("sample_rate",)  # the whole track's, never one speaker's


def merged_voices(options: dict, speakers: dict[str, dict] | None) -> dict:
    """Each speaker's options, None the default's: its voice fields, the default's others."""
    table = {None: options}
    for name, theirs in (speakers or {}).items():
        table[name] = {
            **{k: v for k, v in options.items() if k not in VOICE_FIELDS},
            **{k: v for k, v in theirs.items() if v is not None and k not in TRACK_FIELDS},
        }
    return table


def encode_voices(voice, voices: dict) -> dict:
    """``merged_voices``' table with each reference encoded once (a prompt):
    ``{name: {"options": its options but the reference, "prompt": VoicePrompt or None}}``."""
    encoded = {}
    for name, mine in voices.items():
        prompt = mine.get("voice_prompt")
        if isinstance(prompt, str):
            prompt = VoicePrompt.load(prompt, voice.num_codebooks)
        elif prompt is None and mine.get("ref_audio") is not None:
            prompt = voice.create_voice_prompt(
                mine["ref_audio"], mine.get("ref_text"), language=mine.get("language")
            )
        encoded[name] = {"options": without_reference(mine), "prompt": prompt}
    return encoded


def without_reference(options: dict) -> dict:
    return {k: v for k, v in options.items() if k not in ("ref_audio", "ref_text", "voice_prompt")}
