"""Errors in OpenAI's shape, for every route under ``/v1`` (the speech door and the voice
library): ``{"error": {"message", "type", "param", "code"}}`` with its HTTP status, and the
runtime's error vocabulary (``omnivoice_rt.errors``) in those words."""

from __future__ import annotations

import logging

from fastapi.responses import JSONResponse

from omnivoice_rt.errors import ArtifactError, Busy, Cancelled, Stopping, SynthesisError

logger = logging.getLogger(__name__)

RETRY_AFTER_S = 30  # the Retry-After of a busy or stopping server's answers


class ApiError(Exception):
    """An error in OpenAI's shape: {"error": {"message", "type", "param", "code"}} with its status."""

    def __init__(
        self,
        status: int,
        message: str,
        param: str | None = None,
        code: str | None = None,
        kind: str = "invalid_request_error",
    ):
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.kind = (
            status,
            message,
            param,
            code,
            kind,
        )

    def response(self) -> JSONResponse:
        body = {
            "error": {
                "message": self.message,
                "type": self.kind,
                "param": self.param,
                "code": self.code,
            }
        }
        headers = {"Retry-After": str(RETRY_AFTER_S)} if self.status in (429, 503) else None
        return JSONResponse(body, status_code=self.status, headers=headers)


def api_error(exc: Exception) -> ApiError:
    """The runtime's error vocabulary in OpenAI's words."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, Cancelled):  # the client went away: nobody reads this answer
        return ApiError(499, str(exc), code="client_closed_request")
    if isinstance(exc, Stopping):
        return ApiError(503, str(exc), code="server_stopping", kind="server_error")
    if isinstance(exc, Busy):
        return ApiError(429, str(exc), code="server_busy", kind="rate_limit_error")
    if isinstance(exc, ArtifactError):
        return ApiError(
            503, f"The model cannot be loaded: {exc}", code="model_unavailable", kind="server_error"
        )
    if isinstance(exc, SynthesisError):
        return ApiError(500, str(exc), kind="server_error")
    if isinstance(exc, (ValueError, FileNotFoundError)):
        return ApiError(400, str(exc))
    logger.exception("unexpected error in /v1/audio/speech")
    return ApiError(
        500, "The server failed on this request; its log has the detail.", kind="server_error"
    )
