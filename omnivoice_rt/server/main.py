"""The server: one process, every door on one line.

    omnivoice-onnx-server [--artifacts FOLDER_OR_HUB_REPO] [--precision int4] [--port 7860]
        [--voices DIR] [--mcp] [--wyoming tcp://HOST:PORT]

(also ``python -m omnivoice_rt.server`` and, on a Hugging Face Space, ``python app.py``). The Gradio
page and its API at ``/`` (``page/``), the OpenAI-compatible door under ``/v1``
(``openai_api.py``), MCP at ``/gradio_api/mcp``, Wyoming for Home Assistant
(``wyoming_door.py``), ``/health``; every door shares ``serving.py``'s ``Service``.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading

import gradio as gr

from omnivoice_rt.artifacts.profiles import PROFILES
from omnivoice_rt.limits import GRACEFUL_STOP_S, MAX_UPLOAD, MAX_WYOMING_CONNECTIONS, WYOMING_IDLE_S
from omnivoice_rt.server import connections, flags, gradio_guard, lifecycle
from omnivoice_rt.server.clients import ClientAddress
from omnivoice_rt.server.models import offered_precisions
from omnivoice_rt.server.page import PAGE_CSS, PAGE_HEAD, build_demo
from omnivoice_rt.server.serving import DEFAULTS, Config, Service
from omnivoice_rt.voices import VoiceLibrary

logger = logging.getLogger(__name__)


def build_server(
    config: Config,
    voice_dir: str | None = None,
    api_key: str | None = None,
    mcp: bool = False,
    local_url: str = "http://127.0.0.1:7860/",
    voices_writable: bool = False,
    wyoming: str | None = None,
    wyoming_zeroconf: str | None = None,
    wyoming_limits: tuple[int, float] = (MAX_WYOMING_CONNECTIONS, WYOMING_IDLE_S),
):
    """One FastAPI app for every door: the OpenAI-compatible routes under /v1, the Gradio page and
    its API at /, and, with ``mcp``, Gradio's MCP server at /gradio_api/mcp (which calls the page's
    API at ``local_url``); with ``wyoming`` (a tcp:// address), the Wyoming door for Home Assistant
    (``wyoming_limits``: its connections at once, its idle timeout in seconds). One ``Service``:
    one line of requests, one set of loaded models and caches; one voice library (``voice_dir``,
    written to with ``voices_writable``)."""
    from fastapi import FastAPI

    from omnivoice_rt.server.openai_api import OpenAIDoor

    service = Service(config, offered_precisions(config.source))
    if DEFAULTS["normalize_text"]:  # so that the first request does not wait for the normalizers
        threading.Thread(
            target=service.reader.preload, name="normalize-preload", daemon=True
        ).start()
    # No generated docs: the OpenAI door's contract is OpenAI's, the page documents its own API.
    server = FastAPI(title="OmniVoice ONNX", docs_url=None, redoc_url=None, openapi_url=None)
    server.add_middleware(gradio_guard.QuietDisconnects)
    server.add_middleware(gradio_guard.NoFileProxy)
    library = VoiceLibrary(voice_dir, voices_writable)
    OpenAIDoor(service, library, api_key).install(server)
    if wyoming:
        from omnivoice_rt.server.wyoming_door import WyomingDoor

        WyomingDoor(service, library, wyoming, wyoming_zeroconf, *wyoming_limits).start()
    # For load balancers and monitors: the line's state, open like the page.
    server.add_api_route("/health", service.health, methods=["GET"])
    # Who asked, for the line's share of each client (clients.py)
    server.add_middleware(ClientAddress)
    # Stopping (SIGTERM): every new request answered 503 at once, before any door sees it
    server.add_middleware(lifecycle.StoppingGuard, service=service)
    server.state.service = service
    if config.idle_unload:
        lifecycle.IdleUnloader(service, config.idle_unload).start()
    demo = build_demo(config, service, library, keyed=bool(api_key))
    # Gradio's queue lets every request through to the one line, which admits --concurrency,
    # keeps --max-waiting in order and turns away the surplus (Busy): its limit applies per
    # event listener, and a request held there would be out of the line's and the turns' reach.
    # Its threads stay bounded by Gradio's own limit (max_threads, 40).
    workers = config.concurrency + config.max_waiting + len(PROFILES)
    demo.queue(default_concurrency_limit=workers, max_size=workers + config.max_waiting)
    server = gr.mount_gradio_app(
        server,
        demo,
        path="/",
        mcp_server=mcp,
        max_file_size=MAX_UPLOAD,
        css=PAGE_CSS,
        head=PAGE_HEAD,
        # Only the server's own messages (gr.Error) reach a client, not other exceptions' text.
        show_error=False,
        app_kwargs={"docs_url": None, "redoc_url": None, "openapi_url": None},
    )
    # Requests name only uploaded files (mounting alone checks none).
    gradio_guard.guard(demo, local_url)
    return server


def local_url(host: str, port: int) -> str:
    """Where this process can reach itself: the host it listens on, loopback for all of them."""
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


def together(args) -> None:
    """What the flags ask of each other (each alone is checked by its bound in ``flags.FLAGS``)."""
    if args.wyoming_zeroconf and not args.wyoming:
        raise ValueError(
            "--wyoming-zeroconf advertises the Wyoming door: give --wyoming tcp://HOST:PORT"
        )
    if args.wyoming:
        from omnivoice_rt.server.wyoming_door import check_uri

        check_uri(args.wyoming, args.wyoming_zeroconf)
    if args.per_client is not None and args.per_client > args.concurrency:
        raise ValueError(
            f"--per-client {args.per_client} is above --concurrency {args.concurrency}: one "
            "client's requests under way are some of all those under way"
        )
    if args.voices_writable and not args.voices:
        raise ValueError("--voices-writable needs --voices DIR, the folder the library is kept in")


def start_aligner(source: str | None) -> None:
    """``--align-model``: the process's word aligner; a CTC model is loaded now, so that a
    folder that is not one is one line at start (eSpeak NG loads when words are first asked
    for, or names its extra then)."""
    from omnivoice_rt import align
    from omnivoice_rt.errors import ArtifactError

    align.configure(source)
    try:
        align.load_aligner(start_espeak=False)
    except (ArtifactError, OSError) as exc:  # a Hub download's failure is an ArtifactError
        flags.parser().error(f"--align-model: {exc}")


def main(argv: list[str] | None = None) -> int:
    args = flags.parse(argv, check=together)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    import uvicorn

    # a line per request (MCP's calls to the page's API, its sessions)
    for chatty in ("httpx", "mcp"):
        logging.getLogger(chatty).setLevel(logging.WARNING)
    clean_up = gradio_guard.own_upload_folder()  # before the page is built: Gradio reads it then
    try:
        start_aligner(args.align_model)
        config = Config(
            args.artifacts,
            args.precision,
            args.threads,
            preload=True,
            concurrency=args.concurrency,
            turns=args.turns,
            first_piece=args.first_piece,
            per_client=args.per_client,
            asr_model=args.asr_model,
            max_waiting=args.max_waiting,
            idle_unload=args.idle_unload,
        )
        key, loopback = os.environ.get("OMNIVOICE_API_KEY"), local_url(args.host, args.port)
        try:
            server = build_server(
                config,
                args.voices,
                key,
                args.mcp,
                loopback,
                args.voices_writable,
                args.wyoming,
                args.wyoming_zeroconf,
                (args.wyoming_max_connections, args.wyoming_idle_timeout),
            )
        except (ValueError, FileNotFoundError) as exc:  # a door that cannot open: one line
            flags.parser().error(str(exc))
        logger.info(
            "serving on http://%s:%d (OpenAI-compatible: /v1/audio/speech%s%s)",
            args.host,
            args.port,
            "; MCP: /gradio_api/mcp" if args.mcp else "",
            f"; Wyoming: {args.wyoming}" if args.wyoming else "",
        )
        # On SIGTERM the server drains (lifecycle.DrainingServer: no new request, those under way
        # finish within --stop-timeout), uvicorn shuts down gracefully (within GRACEFUL_STOP_S),
        # then raises SIGTERM again for the handler it found: this one exits normally, so the
        # clean-up below and atexit's (the examples' temporary folder) run.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        http = connections.http_protocol(args.max_connections, args.header_timeout)
        served = uvicorn.Config(
            server,
            host=args.host,
            port=args.port,
            log_level="warning",
            http=http,
            timeout_graceful_shutdown=GRACEFUL_STOP_S,
            # X-Forwarded-For believed from these only: who the client is (clients.py)
            forwarded_allow_ips=args.forwarded_allow_ips,
        )
        connections.quiet_resource_errors()  # after uvicorn set up its loggers
        lifecycle.DrainingServer(served, server.state.service, args.stop_timeout).run()
    finally:
        clean_up()  # after Gradio deleted the files it made
    return 0


if __name__ == "__main__":
    sys.exit(main())
