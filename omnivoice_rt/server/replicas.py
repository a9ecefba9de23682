"""Replicas on Ray Serve: the OpenAI-compatible door and the voice library's routes served by
several copies of the model behind one endpoint.

    omnivoice-onnx-replicas deploy/replicas.yaml [--address auto|local|HOST:PORT]

(``serve run deploy/replicas.yaml`` and ``serve deploy`` take the same file; KubeRay's RayService
takes it as ``serveConfigV2``.) Two deployments:

- ``Model``: one replica is one ``Service``, as in the single-process server: one model, its own
  line and prompt cache, the OpenAI door (``openai_api.py``) and ``/health`` on an app of its
  own. Serve adds and removes replicas by the requests they hold (``autoscaling_config``) and
  starts a new one when one dies.
- ``Front``: the HTTP ingress. It reads a request's body, hands it with the request's scope to a
  replica and relays the replica's answer as it streams. A replica that dies before answering is
  asked again once for a request that changes nothing (a GET, a synthesis), otherwise the client
  gets a clean 503 with Retry-After (Serve alone answers a bare 500); every answer names its
  replica in ``X-Replica``.

The voice library lives in a folder every replica sees (``voices``: a shared mount such as NFS,
or a Kubernetes PersistentVolume with ReadWriteMany); each voice is written whole and renamed into
place (``omnivoice_rt.voices``), so a replica killed mid-write leaves nothing half-made in the list.
Kept results (``result`` of ``POST /v1/audio/voices``) stay in the replica that made them.

Ray is optional: this module is imported only for replicas (``pip install 'omnivoice-onnx[ray]'``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import re
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, fields
from pathlib import Path

import anyio
import ray
from ray import serve
from ray.exceptions import RayActorError
from ray.serve.exceptions import BackPressureError, DeploymentUnavailableError
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from omnivoice_rt.limits import CONCURRENCY, MAX_WAITING, UPLOAD_TIMEOUT_S
from omnivoice_rt.server.api_errors import ApiError
from omnivoice_rt.server.turns import FIRST_PIECE_S, TURNS
from omnivoice_rt.server.voices_api import MAX_VOICE_UPLOAD
from omnivoice_rt.tools import ray_auth

logger = logging.getLogger(__name__)

IMPORT_PATH = "omnivoice_rt.server.replicas:app"  # the application, as a Serve config names it
REPLICA_HEADER = b"x-replica"  # names the replica that answered
# A request's scope as it travels to a replica: ASGI's keys of an HTTP request, plain data.
SCOPE_KEYS = (
    "type",
    "asgi",
    "http_version",
    "method",
    "scheme",
    "path",
    "raw_path",
    "query_string",
    "headers",
    "client",
    "server",
    "root_path",  # the application's route_prefix, which the routes are matched under
)
FINISH_S = 5.0  # after its client left, how long a replica's request may take to stop
# The deployments' defaults; the config's ``deployments`` override any of them.
MODEL_OPTIONS = {
    "ray_actor_options": {"num_cpus": 1},
    # a replica takes a few requests into its own line (one synthesis at a time, the rest wait
    # there: GETs and voices are answered meanwhile); the surplus waits in the ingress's queue...
    "max_ongoing_requests": 4,
    # ...up to this many; past them a client is told the server is busy (429, as the line says)
    "max_queued_requests": MAX_WAITING,
    "health_check_period_s": 5,
}
# The ingress only relays: no CPU of its own, every open request at once.
FRONT_OPTIONS = {"ray_actor_options": {"num_cpus": 0}, "max_ongoing_requests": 1000}


@dataclass
class Settings:
    """The replicas' settings: the config's ``args``, named as the server's flags (``main.py``).
    The API key, as for the server, is the environment's ``OMNIVOICE_API_KEY`` (the config's
    ``runtime_env``)."""

    artifacts: str | None = None  # folder (the same path on every node) or Hub repo
    precision: str | None = None
    threads: int | None = None  # ONNX Runtime threads: the replica's CPUs
    voices: str | None = None  # the voice library's folder, shared by every replica
    voices_writable: bool = False
    asr_model: str | None = None  # 'none': no recogniser (references need a transcript)
    align_model: str | None = None  # the word aligner: eSpeak NG, or a CTC model's folder
    max_waiting: int = MAX_WAITING  # requests waiting in one replica's line
    # generations under way in one replica, taking turns on its CPUs (the server's --concurrency
    # and --turns); Ray's max_ongoing_requests should be at least concurrency, or requests wait
    # in Ray's queue, where no turn reaches them
    concurrency: int = CONCURRENCY
    turns: str = TURNS
    first_piece: float = FIRST_PIECE_S  # a streamed long text's first piece (--first-piece)
    # of those, one client's (the server's --per-client): a client is the address Ray's proxy
    # passes on (clients.py)
    per_client: int | None = None  # None: PER_CLIENT, or concurrency where it is lower

    @classmethod
    def of(cls, args: dict) -> Settings:
        known = [field.name for field in fields(cls)]
        unknown = sorted(set(args) - set(known))
        if unknown:
            raise ValueError(
                f"unknown replica setting {', '.join(unknown)} in the config's args; the "
                f"settings are {', '.join(known)}"
            )
        return cls(**args)


class Model:
    """One replica: one ``Service`` and the OpenAI door over it, loaded before it takes requests."""

    def __init__(self, settings: dict):
        from fastapi import FastAPI

        from omnivoice_rt.server.clients import ClientAddress
        from omnivoice_rt.server.models import offered_precisions
        from omnivoice_rt.server.openai_api import OpenAIDoor
        from omnivoice_rt.server.serving import Config, Service
        from omnivoice_rt.voices import VoiceLibrary

        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
        s = Settings.of(settings)
        from omnivoice_rt import align

        align.configure(s.align_model)
        align.load_aligner(start_espeak=False)  # a CTC model that cannot load fails here
        # ONNX Runtime's threads: the CPUs Ray gave this replica, unless the config says
        cpus = ray.get_runtime_context().get_assigned_resources().get("CPU", 0)
        config = Config(
            s.artifacts,
            s.precision,
            s.threads or (max(1, round(cpus)) if cpus else None),
            asr_model=s.asr_model,
            max_waiting=s.max_waiting,
            concurrency=s.concurrency,
            turns=s.turns,
            first_piece=s.first_piece,
            per_client=s.per_client,
        )
        self.service = Service(config, offered_precisions(config.source))
        self.service.models.get(self.service.models.default)  # a model that cannot load fails here
        threading.Thread(target=self.service.reader.preload, daemon=True).start()
        self.app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
        library = VoiceLibrary(s.voices, s.voices_writable)
        OpenAIDoor(self.service, library, os.environ.get("OMNIVOICE_API_KEY")).install(self.app)
        self.app.add_api_route("/health", self.service.health, methods=["GET"])
        self.app.add_middleware(ClientAddress)  # who asked, for the line's share of each
        self.name = serve.get_replica_context().replica_tag.encode()

    async def asgi(self, scope: dict, body: bytes):
        """The app's ASGI messages answering one request (``scope`` and its whole ``body``), as
        they come. When the caller stops reading (its client left), the app hears a disconnect."""
        messages: asyncio.Queue = asyncio.Queue()
        received, gone = False, asyncio.Event()

        async def receive() -> dict:
            nonlocal received
            if not received:
                received = True
                return {"type": "http.request", "body": body, "more_body": False}
            await gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict) -> None:
            if message["type"] == "http.response.start":
                headers = [*message.get("headers", []), (REPLICA_HEADER, self.name)]
                message = {**message, "headers": headers}
            await messages.put(message)

        async def run() -> None:
            try:
                await self.app(scope, receive, send)
            finally:
                await messages.put(None)

        task = asyncio.create_task(run())
        try:
            while (message := await messages.get()) is not None:
                yield message
        finally:
            gone.set()  # the door stops what it does for this request, and its turn goes back
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(task), FINISH_S)
            task.cancel()
            if task.done() and not task.cancelled() and task.exception() is not None:
                # an error no route answered: the app sent its 500, a server logs the cause
                logger.error("a request failed", exc_info=task.exception())


class Front:
    """The HTTP ingress: each request to a replica, its answer back as it streams."""

    def __init__(self, model):
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
        self.model = model.options(stream=True, method_name="asgi")

    async def __call__(self, request: Request) -> Response:
        try:
            body = await read_body(request)
        except ApiError as exc:
            return exc.response()
        scope = {key: request.scope[key] for key in SCOPE_KEYS if key in request.scope}
        # asked again of another replica if one dies before it starts answering: what changes nothing
        retried = request.method == "GET" or request.url.path.endswith("/v1/audio/speech")
        for attempt in range(2 if retried else 1):
            stream = self.model.remote(scope, body)
            try:
                start = await stream.__anext__()
                return Relayed(start, stream)
            except BackPressureError:
                # as one server's full line answers (api_errors.api_error of errors.Busy)
                busy = "Every replica's line is full; try again shortly."
                return ApiError(429, busy, code="server_busy", kind="rate_limit_error").response()
            except (RayActorError, DeploymentUnavailableError) as exc:
                logger.warning("a replica failed before answering (try %d): %s", attempt + 1, exc)
            except BaseException:
                stream.cancel()
                raise
        gone = "The replica serving this request stopped; try again (Serve is starting another)."
        return ApiError(503, gone, code="replica_unavailable", kind="server_error").response()


class Relayed(Response):
    """A replica's answer: its first message (the status and headers) already here, the rest of
    ``stream`` sent as it comes. A replica that dies after the first message ends the answer
    early (the client sees a cut connection, never a hang). The replica does not wait for a slow
    client: what it made and the client has not read waits here."""

    def __init__(self, start: dict, stream):
        self.start, self.stream, self.background = start, stream, None

    async def __call__(self, scope, receive, send) -> None:
        try:
            await send(self.start)
            async for message in self.stream:
                await send(message)
        except RayActorError as exc:  # the answer ends here, cut: its status is already sent
            logger.warning("a replica failed while answering: %s", exc)
        finally:
            self.stream.cancel()  # the client left, or all is sent: the replica stops either way


async def read_body(request: Request) -> bytes:
    """The whole body, at most a voice upload's size, within the upload's time."""
    chunks, size = [], 0
    try:
        with anyio.fail_after(UPLOAD_TIMEOUT_S):
            async for chunk in request.stream():
                size += len(chunk)
                if size > MAX_VOICE_UPLOAD:
                    raise ApiError(413, f"The body is over {MAX_VOICE_UPLOAD >> 20} MB.")
                chunks.append(chunk)
    except TimeoutError:
        raise ApiError(408, f"The body took over {UPLOAD_TIMEOUT_S:g} s to arrive.") from None
    except ClientDisconnect:
        raise ApiError(400, "The client went away while sending its body.") from None
    return b"".join(chunks)


def app(args: dict):
    """The application (``import_path: omnivoice_rt.server.replicas:app``); ``args`` are the
    replicas' ``Settings``. Each deployment's options (replicas, CPUs, autoscaling) are the
    config's."""
    Settings.of(args)  # a wrong name is told before any replica starts
    model = serve.deployment(Model, name="Model", **MODEL_OPTIONS).bind(args)
    return serve.deployment(Front, name="Front", **FRONT_OPTIONS).bind(model)


# ------------------------------------------------------------------ the command


def needed_cpus(config) -> float:
    """The CPUs the config's deployments take at their fewest replicas (this module's defaults
    where the config leaves an option out)."""
    defaults = {"Model": MODEL_OPTIONS, "Front": FRONT_OPTIONS}
    total = 0.0
    for application in config.applications:
        for deployment in application.deployments:
            options = {
                **defaults.get(deployment.name, {}),
                **deployment.model_dump(exclude_unset=True),
            }
            scaling = options.get("autoscaling_config") or {}
            if scaling:
                replicas = scaling.get("initial_replicas") or scaling.get("min_replicas", 1)
            else:
                replicas = options.get("num_replicas", 1)
            cpus = (options.get("ray_actor_options") or {}).get("num_cpus", 1)
            total += (1 if replicas == "auto" else float(replicas)) * float(cpus)
    return total


def load_config(path: str):
    """The Serve config at ``path``, checked by Serve's own schema; one line when it is not one."""
    import yaml
    from pydantic import ValidationError
    from ray.serve.schema import ServeDeploySchema

    try:
        data = yaml.safe_load(Path(path).read_text())
        return ServeDeploySchema.model_validate(data)
    except OSError as exc:
        raise ValueError(f"{path}: cannot be read ({exc.strerror})") from exc
    except (yaml.YAMLError, ValidationError) as exc:
        first = str(exc).splitlines()
        raise ValueError(f"{path} is not a Serve config: {' '.join(first[:3])}") from exc


def deploy(config, address: str, package_travels: bool = True):
    """Connect to the cluster at ``address``, check that it has the CPUs the replicas take, and
    deploy; the package travels to the cluster with the job, as for ``batch --ray``."""
    import ray
    from ray.serve._private import api as serve_api
    from ray.serve.config import ProxyLocation, gRPCOptions

    import omnivoice_rt

    package = str(Path(omnivoice_rt.__file__).parent)
    where = "on this machine" if address in ("auto", "local") else f"at {address}"
    no_cluster = (
        f"--address {address}: no Ray cluster is running {where}; start one with `ray start "
        "--head`, or use --address local for a cluster of this machine alone"
    )
    if address not in ("auto", "local") and not answers(address):
        raise ValueError(no_cluster)  # Ray itself would retry for minutes
    ray_auth.prepare(address, "--address")  # the token the cluster asks for, or one line
    try:
        ray.init(
            address=address,  # "local": a new cluster, never one found on this machine
            namespace="serve",
            # uploaded to the cluster once; the applications name it by its URI below
            runtime_env={"py_modules": [package]} if package_travels else None,
            log_to_driver=False,
            logging_level=logging.WARNING,
        )
    except ConnectionError as exc:
        raise ValueError(ray_auth.refusal(exc, f"--address {address}") or no_cluster) from exc
    have, need = ray.cluster_resources().get("CPU", 0), needed_cpus(config)
    if need > have:
        raise ValueError(
            f"the replicas take {need:g} CPUs and the cluster has {have:g}: lower num_replicas "
            "(or min_replicas) or ray_actor_options.num_cpus in the config, or add a node "
            "(`ray start --address HEAD:6379`)"
        )
    if package_travels:
        uploaded = ray.get_runtime_context().runtime_env.get("py_modules", [])
        for application in config.applications:
            env = dict(application.runtime_env or {})
            env.setdefault("py_modules", uploaded)
            application.runtime_env = env
    client = serve_api.serve_start(
        http_options=config.http_options.model_dump(),
        proxy_location=config.proxy_location or ProxyLocation.HeadOnly,
        grpc_options=gRPCOptions(**config.grpc_options.model_dump()),
    )
    client.deploy_apps(config, _blocking=False)


def answers(address: str) -> bool:
    """Whether something listens at a cluster's ``HOST:PORT`` (or ``ray://HOST:PORT``)."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=5):
            return True
    except (OSError, ValueError):
        return False


def wait_running(names: list[str], timeout: float) -> None:
    """Until every application runs; one line with the reason when one fails to deploy."""
    deadline = time.monotonic() + timeout
    while True:
        states = serve.status().applications
        for name in names:
            state = states.get(name)
            if state and "FAIL" in state.status:
                messages = [state.message] + [d.message for d in state.deployments.values()]
                raise ValueError(f"{name} failed to deploy: {reason(messages) or state.status}")
        if all(states.get(name) and states[name].status == "RUNNING" for name in names):
            return
        if time.monotonic() > deadline:
            raise ValueError(
                f"the replicas did not start within {timeout:g} s; `serve status` tells why"
            )
        time.sleep(1.0)


def reason(messages: list[str]) -> str:
    """What a failed deployment's messages (tracebacks among them) come to: the last exception's
    own words (a replica that cannot load its model: the runtime's error, which names the fix)."""
    raised = [
        match.group(2)
        for message in messages
        for match in re.finditer(r"^(\w[\w.]*(?:Error|Exception)): (.+)$", message or "", re.M)
        if match.group(1).split(".")[-1] not in ("RayTaskError", "RuntimeError")
    ]
    if raised:
        return raised[-1]
    lines = [line for message in messages for line in (message or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="omnivoice-onnx-replicas",
        description="Replicas of the OpenAI-compatible door on Ray Serve, from a Serve config "
        "(deploy/replicas.yaml)",
    )
    parser.add_argument("config", help="a Serve config file (YAML), such as deploy/replicas.yaml")
    parser.add_argument(
        "--address",
        default=os.environ.get("RAY_ADDRESS", "auto"),
        help="the Ray cluster: auto (the one this machine belongs to), local (a cluster of this "
        "machine alone, for this run) or HOST:PORT of its head (env RAY_ADDRESS)",
    )
    parser.add_argument(
        "--start-timeout",
        type=float,
        default=600.0,
        help="seconds the replicas may take to load (default 600)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    try:
        config = load_config(args.config)
        for application in config.applications:
            if application.import_path == IMPORT_PATH:
                Settings.of(application.args or {})  # told here rather than by a failed deploy
        deploy(config, args.address)
        try:
            names = [application.name for application in config.applications]
            wait_running(names, args.start_timeout)
        except ValueError:
            serve.shutdown()  # nothing left retrying on the cluster
            raise
    except ValueError as exc:
        print(f"omnivoice-onnx-replicas: {exc}", file=sys.stderr)
        return 2
    http = config.http_options
    logger.info("serving on http://%s:%d (Ctrl-C or SIGTERM stops)", http.host, http.port)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    signal.signal(signal.SIGINT, lambda *_: stopped.set())
    stopped.wait()
    # Serve and its applications go (the config named them all); each replica finishes what it
    # holds within its graceful_shutdown_timeout_s first
    serve.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
