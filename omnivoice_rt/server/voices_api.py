"""The voice library's HTTP door, beside the OpenAI-compatible routes (same key, same errors):

    GET    /v1/audio/voices          every voice: auto, the designed ones, the library's
    POST   /v1/audio/voices          add one: multipart (name, audio + transcript, or prompt
                                     .npz; language) or JSON/multipart (name, instruct, or
                                     result: a speech response's X-Voice-Result; language)
    DELETE /v1/audio/voices/{name}   remove a saved voice

Writes need ``--voices DIR --voices-writable`` (and the API key where one is set). A recording is
encoded in the server's one line, as a cloning request would be; transcribed when it comes
without a transcript.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import anyio
from fastapi import APIRouter, Request
from starlette.requests import ClientDisconnect

from omnivoice_rt.limits import MAX_TRANSCRIPT_CHARS, UPLOAD_TIMEOUT_S
from omnivoice_rt.server.api_errors import ApiError, api_error
from omnivoice_rt.server.clients import from_headers
from omnivoice_rt.server.serving import ResultGone
from omnivoice_rt.voice_prompt import VoicePrompt
from omnivoice_rt.voices import VoiceEntry, VoiceNameError

MAX_VOICE_UPLOAD = 20 << 20  # a recording of a voice: the page's upload limit (limits.MAX_UPLOAD)
FORM_FIELDS = ("name", "language", "instruct", "result", "transcript", "audio", "prompt")
JSON_FIELDS = ("name", "language", "instruct", "result")


def listed(entry: VoiceEntry) -> dict:
    return {"id": entry.name, "object": "voice", **entry.as_dict()}


def voice_routes(door) -> APIRouter:
    """The routes over an ``OpenAIDoor`` (its service, library, key and threads)."""
    library, service = door.library, door.service
    router = APIRouter(prefix="/v1")

    def refused(exc: Exception) -> ApiError:
        if isinstance(exc, PermissionError):
            return ApiError(403, str(exc), code="voices_read_only", kind="permission_error")
        if isinstance(exc, FileExistsError):
            return ApiError(409, str(exc), param="name", code="voice_exists")
        if isinstance(exc, VoiceNameError):
            return ApiError(400, str(exc), param="name", code="invalid_voice_name")
        if isinstance(exc, FileNotFoundError):
            return ApiError(404, str(exc), param="name", code="voice_not_found")
        if isinstance(exc, ResultGone):
            return ApiError(404, str(exc), param="result", code="result_not_found")
        return api_error(exc)

    @router.get("/audio/voices")
    async def voices(request: Request):
        door.check_key(request)
        entries = await anyio.to_thread.run_sync(library.entries)
        return {"object": "list", "data": [listed(entry) for entry in entries]}

    @router.post("/audio/voices", status_code=201)
    async def add(request: Request):
        door.check_key(request)
        if not library.writable:  # before reading an upload that cannot be kept
            raise refused(PermissionError(library.read_only_message()))
        with tempfile.TemporaryDirectory(prefix="omnivoice-voice-") as folder:
            try:
                with anyio.fail_after(UPLOAD_TIMEOUT_S):
                    fields = await read_fields(request, Path(folder))
            except TimeoutError:
                raise ApiError(
                    408, f"The upload took over {UPLOAD_TIMEOUT_S:g} s to arrive.", code="timeout"
                ) from None
            try:
                entry = await anyio.to_thread.run_sync(
                    add_voice, fields, from_headers(request.headers), limiter=door.waiting_threads
                )
            except Exception as exc:  # noqa: BLE001 - every failure in the door's words
                raise refused(exc) from exc
        return listed(entry)

    @router.delete("/audio/voices/{name}")
    async def delete(name: str, request: Request):
        door.check_key(request)
        try:
            await anyio.to_thread.run_sync(library.delete, name)
        except Exception as exc:  # noqa: BLE001
            raise refused(exc) from exc
        return {"id": name, "object": "voice", "deleted": True}

    def add_voice(fields: dict, client: str | None) -> VoiceEntry:
        """The voice of a checked form: a design, a prompt file, or a recording encoded now (in
        a turn of ``client``'s, ``clients.py``)."""
        name, language = fields.get("name"), fields.get("language") or None
        if not isinstance(name, str) or not name:
            raise ValueError("'name' is required: the new voice's name, such as 'narrator'.")
        kinds = [key for key in ("instruct", "audio", "prompt", "result") if fields.get(key)]
        if len(kinds) != 1:
            raise ValueError(
                "Give exactly one of 'audio' (a recording, with 'transcript' or transcribed), "
                "'prompt' (a voice prompt .npz), 'instruct' (a voice design) or 'result' (a "
                "speech response's X-Voice-Result header: that result's voice)."
            )
        if kinds == ["instruct"]:
            return library.add_design(name, fields["instruct"], language)
        if kinds == ["result"]:
            library.check_name(name)  # before the id: a refused name says so first
            return library.add_prompt(name, service.results.get(fields["result"]), language)
        if kinds == ["prompt"]:
            return library.add_prompt(name, VoicePrompt.load(fields["prompt"]), language)
        transcript = fields.get("transcript") or None
        if transcript is not None and len(transcript) > MAX_TRANSCRIPT_CHARS:
            raise ValueError(
                f"'transcript' is {len(transcript)} characters; the limit is {MAX_TRANSCRIPT_CHARS}."
            )

        def encode():
            reference = service.reference(
                service.models.default, fields["audio"], transcript, language, client=client
            )
            with reference as (_voice, prompt, _reused):
                return prompt

        return library.add_recording(name, encode, language)

    async def read_fields(request: Request, folder: Path) -> dict:
        """The body's fields (files saved into ``folder``: their paths), read up to
        ``MAX_VOICE_UPLOAD`` bytes; JSON or a multipart form."""
        received = 0

        async def receive():
            nonlocal received
            message = await request.receive()
            received += len(message.get("body", b""))
            if received > MAX_VOICE_UPLOAD:
                raise ApiError(413, f"The upload is over {MAX_VOICE_UPLOAD >> 20} MB.")
            return message

        bounded = Request(request.scope, receive)
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        try:
            if kind == "application/json":
                body = await bounded.body()
                try:
                    data = json.loads(body)
                except ValueError as exc:
                    raise ApiError(400, f"The body is not valid JSON: {exc}.") from exc
                if not isinstance(data, dict) or not set(data) <= set(JSON_FIELDS):
                    raise ApiError(
                        400,
                        "A JSON body adds a designed voice {'name', 'instruct', 'language'} or a "
                        "result's {'name', 'result', 'language'}; send a recording or a prompt "
                        "as multipart/form-data.",
                    )
                return {key: value for key, value in data.items() if value is not None}
            if kind not in ("multipart/form-data", "application/x-www-form-urlencoded"):
                raise ApiError(
                    415,
                    "Send the voice as multipart/form-data (name, audio or prompt or instruct, "
                    "transcript, language) or as JSON (name, instruct, language).",
                )
            form = await bounded.form(max_files=1, max_fields=len(FORM_FIELDS))
            fields = {}
            for key, value in form.multi_items():
                if key not in FORM_FIELDS or key in fields:
                    raise ApiError(
                        400,
                        f"Unknown or repeated field {key[:40]!r}; the fields are {', '.join(FORM_FIELDS)}.",
                    )
                if isinstance(value, str):
                    if key in ("audio", "prompt"):
                        raise ApiError(400, f"'{key}' must be a file upload.", param=key)
                    fields[key] = value
                else:
                    if key not in ("audio", "prompt"):
                        raise ApiError(400, f"'{key}' is text, not a file.", param=key)
                    path = folder / ("prompt.npz" if key == "prompt" else "reference")
                    path.write_bytes(await value.read())
                    fields[key] = str(path)
            return fields
        except ClientDisconnect:
            raise ApiError(400, "The client went away while sending its body.") from None
        except ApiError:
            raise
        except Exception as exc:  # noqa: BLE001 - a malformed form: python-multipart's words
            raise ApiError(400, f"The form could not be read: {exc}") from exc

    return router
