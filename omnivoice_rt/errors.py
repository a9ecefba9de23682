"""The runtime's error vocabulary, shared by every door: each message says what is wrong and what
to do about it. Doors (the page, gradio_client, the CLI...) turn ``REPORTED`` errors into messages
and log the detail; anything else is a bug."""


class ArtifactError(ValueError):
    """An artifact folder is missing, incomplete, corrupt or of an unknown kind; the message says how to fix it."""


class AlignError(ValueError):
    """A recording or text that cannot be aligned (too long, too many words: align it in
    parts); ``omnivoice_rt.align``'s."""


class SynthesisError(RuntimeError):
    """ONNX Runtime failed on a request that passed every check; the log has its detail."""


class Busy(RuntimeError):
    """A server's line of requests is full (``limits.MAX_WAITING`` waiting); try again later."""


class Stopping(Busy):
    """The server is stopping (SIGTERM): it takes no new request; try again shortly, here once it is
    back or on another replica."""

    def __init__(
        self,
        message: str = "The server is stopping and takes no new request: try again in a minute.",
    ):
        super().__init__(message)


class Cancelled(Exception):
    """The request was abandoned (its page closed, its client went away); synthesis stopped at the next step."""


# bad input, bad artifacts, a failed run, a full line
REPORTED = (ValueError, FileNotFoundError, SynthesisError, Busy)
