"""What the Gradio side of the server lets through: the files a request may name, what it logs
of a refusal or a client gone mid-request, and what is left of its uploads at exit.

A Gradio request names a file by a path (``FileData``); Gradio copies it into its cache, from
where ``/gradio_api/file=`` serves it to anyone. Gradio refuses paths outside its upload folder
only once it believes it was launched, which ``gr.mount_gradio_app`` never marks (``launch()``
sets ``has_launched``; ``processing_utils._check_allowed`` returns early without it), so a
request could have had any file this process can read, its environment included, copied and
served. :func:`guard` sets that mark on the mounted page, and ``tests/server/test_security.py`` tries
every door that takes a file against planted secrets.

MCP clients name files by strings. Gradio's MCP takes only http(s) URLs (fetched from public
addresses only) and ``data:`` URIs; :func:`accept_mcp_files` lets its tools take as well what a
client has on this server: a path that ``POST /gradio_api/upload`` returned, this server's own
``/gradio_api/file=`` URL (a result to pass on), and an empty string for "not given". A path
outside the upload folder is refused before anything is read.

Gradio prints a traceback for every error it meets, its own refusals of a request's input
(a value out of a slider's range, a path not uploaded) included; :func:`quiet_refusals` makes
those one line of the log, as the server's own refusals are, and leaves tracebacks for the rest;
:class:`QuietDisconnects` does the same for a client that leaves while sending its request.

Uploads and results live in Gradio's upload folder (``GRADIO_TEMP_DIR``); unless one is set, each
server process has its own (:func:`own_upload_folder`), removed at a normal stop with whatever
refused or abandoned uploads left in it.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import re
import shutil
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote, urlsplit

import gradio as gr
from gradio.utils import get_upload_folder, is_in_or_equal
from starlette.requests import ClientDisconnect

logger = logging.getLogger(__name__)

FILE_ROUTE = "/gradio_api/file="
MCP_FILE_HINT = "give a file as an http(s) URL, a data: URI, or the path that POST /gradio_api/upload returned for it"


def guard(demo: gr.Blocks, local_url: str) -> None:
    """Gradio's own file checks on for a page mounted in another app, as ``launch()`` turns them
    on: a request may name only files in the upload folder. Checked here: if Gradio would copy a
    file from outside, the server does not start. ``local_url`` is where this process serves
    the page (``launch()`` tells MCP so; mounted, MCP would take it from the first request's
    headers, which a client chooses)."""
    demo.has_launched = True
    check_file_guard(demo)
    if demo.mcp_server_obj is not None:
        demo.mcp_server_obj._local_url = local_url
        accept_mcp_files(demo)
    quiet_refusals()


def check_file_guard(demo: gr.Blocks) -> None:
    """Fail closed: ask Gradio's check (``processing_utils._check_allowed``) for this very file."""
    from gradio.context import LocalContext
    from gradio.exceptions import InvalidPathError
    from gradio.processing_utils import _check_allowed

    token = LocalContext.blocks.set(demo)
    try:
        _check_allowed(__file__, True)
    except InvalidPathError:
        return
    finally:
        LocalContext.blocks.reset(token)
    raise RuntimeError(
        "Gradio's check of the files a request names is off in this version of Gradio: the "
        "server would hand out any file it can read. Install the Gradio of requirements.txt."
    )


GRADIO_DIR = str(Path(gr.__file__).parent)


def gradio_refusal(error: BaseException | None) -> bool:
    """Whether ``error`` is Gradio refusing a request's input (a gr.Error, a path not uploaded,
    too few values, a ``FileData`` without its ``meta``, a URL to a private address) rather than
    a bug: raised by Gradio's own code, or while Gradio read the request's input, or a gr.Error."""
    if isinstance(error, gr.Error):
        return True
    if not isinstance(error, INPUT_ERRORS) or error.__traceback__ is None:
        return False
    frames = []
    frame = error.__traceback__
    while frame is not None:
        frames.append(frame.tb_frame.f_code)
        frame = frame.tb_next
    reading_input = any(
        code.co_name == "preprocess_data" and code.co_filename.startswith(GRADIO_DIR)
        for code in frames
    )
    return reading_input or (
        isinstance(error, ValueError) and frames[-1].co_filename.startswith(GRADIO_DIR)
    )


# what reading a request's input raises on bad input (a seed of Infinity: OverflowError)
INPUT_ERRORS = (ValueError, TypeError, OverflowError)


class _Tracebacks:
    """``traceback`` for Gradio's queue, whose ``print_exc`` logs a refused input as one line."""

    def __getattr__(self, name):
        return getattr(traceback, name)

    @staticmethod
    def print_exc(*args, **kwargs) -> None:
        error = sys.exc_info()[1]
        if gradio_refusal(error):
            lines = str(error).splitlines()[:2] or [type(error).__name__]
            logger.info("refused a request: %s", " ".join(line.strip() for line in lines)[:300])
        else:
            traceback.print_exc(*args, **kwargs)


def quiet_refusals() -> None:
    import gradio.queueing

    gradio.queueing.traceback = _Tracebacks()


def uploaded(path: str) -> str | None:
    """``path`` when it is a file in Gradio's upload folder (links resolved), else None."""
    try:
        resolved = Path(os.path.abspath(path)).resolve()
        inside = is_in_or_equal(resolved, get_upload_folder())
        return str(resolved) if resolved.is_file() and inside else None
    except (OSError, ValueError):
        return None


def accept_mcp_files(demo: gr.Blocks) -> None:
    """The MCP tools' file arguments: "" for none, an uploaded path or this server's file URL as
    that file, anything else as Gradio's MCP takes it (an http(s) URL, a ``data:`` URI)."""
    import gradio.mcp

    # where it saves data: URIs, read at its import
    gradio.mcp.DEFAULT_TEMP_DIR = get_upload_folder()
    server = demo.mcp_server_obj
    convert = server.convert_strings_to_filedata

    def as_file(path: str | None, missing: str) -> dict:
        if path is None:
            raise ValueError(f"{missing}; {MCP_FILE_HINT}")
        return {"path": path, "meta": {"_type": "gradio.FileData"}, "orig_name": Path(path).name}

    def local(value):
        if value is None or (isinstance(value, str) and not value.strip()):
            return None  # not given
        if not isinstance(value, str):
            raise ValueError(f"a file argument is a string; {MCP_FILE_HINT}")
        parts = urlsplit(value)
        if parts.scheme in ("http", "https") and FILE_ROUTE in parts.path:
            # A file URL of this server (a result to pass on): the upload folder decides.
            path = unquote(parts.path.split(FILE_ROUTE, 1)[1])
            return as_file(uploaded(path), "that file is not on this server (any more)")
        if parts.scheme in ("http", "https") and not public_host(parts.hostname):
            raise ValueError(f"a file URL must name a public address; {MCP_FILE_HINT}")
        if parts.scheme in ("http", "https", "data"):
            return value  # Gradio's MCP fetches it (public addresses only) or decodes it
        return as_file(uploaded(value), "a file argument is not a URL nor a file uploaded here")

    def convert_files(arguments, positions):
        if isinstance(arguments, dict):
            arguments = {
                name: local(value) if [name] in positions else value
                for name, value in arguments.items()
            }
        return convert(arguments, positions)

    server.convert_strings_to_filedata = convert_files


def public_host(host: str | None) -> bool:
    """Whether a URL's host may be public: a name (Gradio resolves it and refuses private
    addresses then), or a global IP address; not ``localhost`` nor a private, loopback or link-local
    address, which are refused here at once, with the reason."""
    if (
        not host
        or host.lower() in ("localhost", "localhost.")
        or host.lower().endswith(".localhost")
    ):
        return False
    try:
        return ipaddress.ip_address(host).is_global
    except ValueError:
        return True  # a name


class QuietDisconnects:
    """ASGI middleware: a client that went away while sending its request is one line of the log,
    not an "Exception in ASGI application" traceback (nobody is there to answer)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        try:
            await self.app(scope, receive, send)
        except ClientDisconnect:
            logger.info("a client went away while sending its request to %s", scope.get("path"))


class NoFileProxy:
    """ASGI middleware: ``/gradio_api/file=`` followed by a URL is Gradio fetching that URL for
    the client, which would make a public server anyone's proxy; this page needs none, so 403."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        path = unquote(scope.get("path", "")) if scope["type"] == "http" else ""
        if FILE_ROUTE in path and "://" in path.split(FILE_ROUTE, 1)[1]:
            await send({"type": "http.response.start", "status": 403, "headers": []})
            await send({"type": "http.response.body", "body": b"File not allowed."})
            return
        await self.app(scope, receive, send)


def own_upload_folder() -> Callable[[], None]:
    """Gradio's upload folder for this process alone (before the page is built), unless
    ``GRADIO_TEMP_DIR`` names one; returns what to do at a normal stop: remove it, or, for a
    folder named by the environment, :func:`prune_uploads`."""
    if os.environ.get("GRADIO_TEMP_DIR"):
        return prune_uploads
    folder = tempfile.mkdtemp(prefix="omnivoice-uploads-")
    os.environ["GRADIO_TEMP_DIR"] = folder
    return lambda: shutil.rmtree(folder, ignore_errors=True)


def prune_uploads() -> None:
    """At a normal stop, after Gradio has deleted the files it made: what refused uploads leave in
    a shared upload folder (``GRADIO_TEMP_DIR``), Gradio's own names only: empty files among its
    temporary uploads (``tmp*``) and in its hash folders, and hash folders left empty."""
    root = Path(get_upload_folder())
    if not root.is_dir():
        return
    for entry in root.iterdir():
        if entry.is_symlink():
            continue
        if entry.is_file() and entry.name.startswith("tmp"):
            _remove_if_empty(entry)
        elif entry.is_dir() and HASH_FOLDER.fullmatch(entry.name):
            for file in entry.iterdir():
                if file.is_file() and not file.is_symlink():
                    _remove_if_empty(file)
            with contextlib.suppress(OSError):
                entry.rmdir()  # only when empty


HASH_FOLDER = re.compile(r"[0-9a-f]{64}")  # a folder Gradio names by the hash of what it holds


def _remove_if_empty(path: Path) -> None:
    with contextlib.suppress(OSError):
        if path.stat().st_size == 0:
            path.unlink()
