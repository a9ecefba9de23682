"""Voices kept for later: a reference encoded as a voice prompt file or saved in the server's
library, the library's list, a result's voice kept ("Keep this voice"), and the transcript a
reference fills in; the endpoints of the "Voice cloning" tab that do not speak."""

from __future__ import annotations

import gradio as gr

from omnivoice_rt.server.page.options import inputs
from omnivoice_rt.server.page.shared import (
    LIBRARY_KEYED,
    abandoned,
    as_messages,
    language_arg,
    page_client,
    prompt_file,
    refused,
)
from omnivoice_rt.text.languages import check_string
from omnivoice_rt.voices import VoiceLibrary


class VoiceHandlers:
    """The voice endpoints, a part of ``handlers.Handlers`` (``service``, ``library``,
    ``keyed``)."""

    def save_voice_prompt(self, ref_audio, ref_text=None, precision=None, progress=gr.Progress()):
        """Encode a reference recording once as a voice prompt file, to clone that voice again without the recording.

        Args:
            ref_audio: A recording of the voice: 3-10 s of one person speaking clearly (0.5-30 s accepted; up to 20 MB): an http(s) URL, a data: URI, or the path POST /gradio_api/upload returned.
            ref_text: What the recording says; empty: it is transcribed with Whisper.
            precision: The model precision that encodes the prompt (prompts work across precisions); left out: the server's default.
        Returns:
            A voice prompt file (.npz, kept for an hour on this server) to pass to clone as voice_prompt.
        """
        if not ref_audio:
            raise refused("Record or upload a reference voice first.")
        with as_messages():
            if ref_text is not None:
                check_string(ref_text, "ref_text (the reference's transcript)")
            reference = self.service.reference(
                precision,
                ref_audio,
                ref_text,
                None,
                progress,
                None,
                abandoned(),
                client=page_client(),
            )
            with reference as (_, prompt, _):
                pass
        path = prompt_file()
        prompt.save(path)
        return str(path)

    def transcribe(self, ref_audio, language="Auto", progress=gr.Progress()):
        """Transcribe a reference recording with Whisper: what the recording says, to check before cloning.

        Args:
            ref_audio: A recording of up to 30 s (longer ones are cut at a silence near 20 s): an http(s) URL, a data: URI, or the path POST /gradio_api/upload returned.
            language: The recording's language by name or code; "Auto" detects it.
        Returns:
            The transcript, one line of text.
        """
        if not ref_audio:
            return ""
        with as_messages():
            return self.service.transcribe(
                ref_audio, language_arg(language), progress, abandoned(), page_client()
            )

    def list_voices(self):
        """The voices of the server's library, to clone by name (clone's voice argument): saved references and named voice designs.

        Returns:
            A list of voices: name, kind ("clone": a saved reference, "design": an instruct), language, instruct, duration of the reference in seconds, created.
        """
        return [entry.as_dict() for entry in self.library.saved()]

    def save_to_library(
        self,
        name,
        ref_audio=None,
        ref_text=None,
        language="Auto",
        precision=None,
        progress=gr.Progress(),
    ):
        """Save a reference recording in the server's voice library under a name, for every door (the page, clone's voice argument, the OpenAI and Wyoming doors). Only where the server allows it (--voices-writable) and has no API key (with a key: POST /v1/audio/voices).

        Args:
            name: The voice's name: 1 to 64 letters, digits, '_', '.' or '-'.
            ref_audio: A recording of the voice: 3-10 s of one person speaking clearly: an http(s) URL, a data: URI, or the path POST /gradio_api/upload returned.
            ref_text: What the recording says; empty: it is transcribed with Whisper.
            language: The recording's language by name or code; "Auto": none.
            precision: The model precision that encodes it; left out: the server's default.
        Returns:
            One line saying what was saved.
        """
        if self.keyed and self.library.writable:
            raise refused(LIBRARY_KEYED)
        if not ref_audio:
            raise refused("Record or upload a reference voice first.")
        with as_messages():
            language = language_arg(language)

        def encode():
            reference = self.service.reference(
                precision,
                ref_audio,
                ref_text or None,
                language,
                progress,
                None,
                abandoned(),
                client=page_client(),
            )
            with reference as (_, prompt, _):
                return prompt

        with as_messages():
            try:
                named = name.strip() if isinstance(name, str) else name
                entry = self.library.add_recording(named, encode, language)
            except (FileExistsError, PermissionError) as exc:  # not REPORTED: said here
                raise ValueError(str(exc)) from None
        return f"Saved {entry.name!r} in the library ({entry.duration:g} s of speech)."

    def keep_voice(self, result, name=None):
        """The page's "Keep this voice": the last result's voice (its first piece's codes and
        text: ``Speech.voice_prompt``) as a voice prompt file, and, given a name where the page
        may write to the library, as a voice of the library too."""
        if not result:
            raise refused("Generate something first: the voice of the result is what is kept.")
        with as_messages():
            prompt = self.service.results.get(result)
        path = prompt_file()
        prompt.save(path)
        named = name.strip() if isinstance(name, str) else ""
        if not named or not self.library.writable or self.keyed:
            return str(path), (
                "This voice is in the prompt file: load it under Voice cloning to speak in it "
                "again."
            )
        with as_messages():
            try:
                entry = self.library.add_prompt(named, prompt)
            except (FileExistsError, PermissionError) as exc:  # not REPORTED: said here
                raise ValueError(str(exc)) from None
        return str(path), (
            f"Kept {entry.name!r} in the library ({entry.duration:g} s of its speech): choose it "
            "under Voice cloning, or as the voice of any door."
        )


def wire(handlers, top, library: VoiceLibrary, cloning, keep) -> None:
    """Saving a voice (a prompt file, the library, the result's voice), listing the library's,
    and the transcript a recorded or uploaded reference fills in."""
    voice_choices = cloning["voice"]

    def refreshed():
        return gr.Dropdown(choices=[""] + [entry.name for entry in library.saved()])

    precision = {"precision": top["precision"]}
    cloning["save_button"].click(
        handlers.save_voice_prompt,
        inputs(handlers.save_voice_prompt, precision, cloning),
        cloning["saved_prompt"],
        api_name="save_voice_prompt",
    )
    cloning["library_button"].click(
        handlers.save_to_library,
        inputs(handlers.save_to_library, precision, cloning),
        cloning["library_line"],
        api_name="save_to_library",
    ).then(refreshed, None, voice_choices, api_visibility="private")
    gr.Button(visible=False).click(
        handlers.list_voices, None, gr.JSON(visible=False), api_name="list_voices"
    )
    keep["button"].click(
        handlers.keep_voice,
        inputs(handlers.keep_voice, keep),
        [keep["file"], keep["line"]],
        api_visibility="private",  # the result's id lives in the page's state
    ).then(refreshed, None, voice_choices, api_visibility="private")
    # A recorded or uploaded reference fills the transcript box, which stays editable.
    transcribing = inputs(handlers.transcribe, cloning)
    cloning["ref_audio"].upload(
        handlers.transcribe, transcribing, cloning["ref_text"], api_name="transcribe"
    )
    cloning["ref_audio"].stop_recording(
        handlers.transcribe, transcribing, cloning["ref_text"], api_visibility="private"
    )
