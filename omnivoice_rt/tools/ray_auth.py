"""Ray's token authentication for the clusters our commands join (``batch --ray``,
``omnivoice-onnx-replicas --address``): the mode chosen before ``ray.init``, and a refused or
missing token told in one line instead of Ray's 20 s of retries and a misleading "failed to connect".

What Ray 2.60 does (``ray/_private/authentication/authentication_token_setup.py``, and
https://docs.ray.io/en/latest/ray-security/token-auth.html): the mode is ``RAY_AUTH_MODE``
(``token`` or ``disabled``); the token is ``RAY_AUTH_TOKEN``, else the file ``RAY_AUTH_TOKEN_PATH``
names, else ``~/.ray/auth_token``. Where ``RAY_AUTH_MODE`` is unset, a new cluster of
``ray.init()`` (our ``local``) turns token mode on and writes ``~/.ray/auth_token`` if missing;
``ray start --head`` turns it on when a token is found; and ``ray.init(address="auto")`` sends a
token it finds. But a driver given an explicit ``HOST:PORT`` and a node joining with
``ray start --address`` stay in ``disabled`` mode and send nothing: the GCS answers
``Unauthenticated`` until ray.init gives up. So once one ``ray.init(address="local")`` has written
``~/.ray/auth_token``, every later ``ray start --head`` on that machine asks for a token that
``batch --ray HOST:PORT`` did not send.

What we do, never turning authentication off: with ``RAY_AUTH_MODE`` set, Ray's choice stands and a
refused or missing token is one line. Unset, we ask the cluster (one gRPC call, milliseconds)
whether it wants a token; if it does and the cluster is on this machine (so its head read the same
token we find), we send ours, as Ray does for a cluster found with ``auto``. To a cluster on
another machine a token is sent only when ``RAY_AUTH_MODE=token`` says so (Ray's rule for explicit
addresses: a token is a secret, not offered to whoever asks).
"""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path

logger = logging.getLogger(__name__)

MODE, TOKEN, TOKEN_PATH = "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"
# A GCS method every cluster answers, the one a joining node calls first; an empty request is valid.
PROBE = "/ray.rpc.NodeInfoGcsService/GetClusterId"
WHERE = f"{TOKEN}, {TOKEN_PATH} or ~/.ray/auth_token"
ASK_HEAD = "`ray get-auth-token` on its head prints it"


def default_token_path() -> Path:
    return Path.home() / ".ray" / "auth_token"


def token_at_hand() -> tuple[str | None, str]:
    """(the token Ray would send, where it is from), in Ray's order; (None, "") without one.
    An unreadable ``RAY_AUTH_TOKEN_PATH`` is a ``ValueError`` (Ray aborts the process on it)."""
    if os.environ.get(TOKEN, "").strip():
        return os.environ[TOKEN].strip(), TOKEN
    if os.environ.get(TOKEN_PATH):
        path = Path(os.environ[TOKEN_PATH]).expanduser()
        try:
            token = path.read_text().strip()
        except OSError as exc:
            raise ValueError(f"{TOKEN_PATH}={path} cannot be read ({exc.strerror})") from exc
        if not token:
            raise ValueError(f"{TOKEN_PATH}={path} is empty: write the cluster's token there")
        return token, f"{TOKEN_PATH}={path}"
    path = default_token_path()
    try:
        token = path.read_text().strip()
    except OSError:
        return None, ""
    return (token, str(path)) if token else (None, "")


def probe(address: str, token: str | None) -> str:
    """What the cluster's GCS at ``HOST:PORT`` says to one call: ``ok``, ``refused`` (it wants a
    token, or another one) or ``unreachable``."""
    import grpc  # Ray's own dependency

    target = address.removeprefix("ray://")
    metadata = [("authorization", f"Bearer {token}")] if token else None
    with grpc.insecure_channel(target) as channel:
        try:
            channel.unary_unary(PROBE)(b"", timeout=5, metadata=metadata)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.UNAUTHENTICATED:
                return "refused"
            if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                return "unreachable"
            return "ok"  # it answered without asking for a token (an older GCS, say)
    return "ok"


def on_this_machine(address: str) -> bool:
    """Whether ``HOST:PORT`` is an address of this machine (loopback, or one it can bind)."""
    host = address.removeprefix("ray://").rpartition(":")[0].strip("[]")
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return False
    for family, _, _, _, sockaddr in infos:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((sockaddr[0], 0))
            except OSError:
                continue
            return True
    return False


def use_token_mode() -> None:
    """``RAY_AUTH_MODE=token`` for this process and the ones it starts, as Ray does for a cluster
    found with ``auto`` (its config is read at import: refreshed as Ray's own setup refreshes it)."""
    os.environ[MODE] = "token"
    try:
        from ray._raylet import Config

        Config.initialize("")
    except ImportError:  # Ray not imported yet: it reads the variable when it is
        pass


def prepare(address: str, flag: str) -> None:
    """Before ``ray.init(address)``: choose the mode that cluster asks for, or raise a
    ``ValueError`` of one line naming what to set. ``flag`` names the option in that line."""
    mode = os.environ.get(MODE, "").strip().lower() or None
    token, source = token_at_hand() if mode != "disabled" else (None, "")
    if address == "local":  # a new cluster: Ray's default (token, made if missing) or the mode set
        return
    where = f"{flag} {address}"
    if address == "auto":
        address = current_cluster()
        if address is None:
            return  # none on this machine: the caller's "no cluster" line
        where = f"{flag} auto (the cluster at {address})"
    if mode == "token" and token is None:
        raise ValueError(f"{where}: {MODE}=token but no token is set: put the cluster's in {WHERE}")
    answer = probe(address, token if mode == "token" else None)
    if answer != "refused":
        return  # fine, or nothing there: the caller says so
    if mode == "token":
        raise ValueError(
            f"{where}: the cluster refused the token from {source}: set {TOKEN} or {TOKEN_PATH} "
            f"to its token ({ASK_HEAD})"
        )
    if mode == "disabled":
        raise ValueError(
            f"{where}: the cluster asks for a token and {MODE}=disabled: set {MODE}=token with "
            f"its token in {WHERE} ({ASK_HEAD})"
        )
    if token is None:
        raise ValueError(
            f"{where}: the cluster asks for a token (token authentication): set {MODE}=token "
            f"with its token in {WHERE} ({ASK_HEAD})"
        )
    if not on_this_machine(address):
        raise ValueError(
            f"{where}: the cluster asks for a token: set {MODE}=token to send it the one in "
            f"{source}, or its own in {TOKEN} ({ASK_HEAD})"
        )
    if probe(address, token) == "refused":
        raise ValueError(
            f"{where}: the cluster refused the token from {source}: set {MODE}=token with its "
            f"token in {TOKEN} or {TOKEN_PATH} ({ASK_HEAD})"
        )
    logger.info("%s asks for a token: sending the one from %s", where, source)
    use_token_mode()


def current_cluster() -> str | None:
    """The address ``ray.init(address="auto")`` would take: ``RAY_ADDRESS``, else the cluster
    last started on this machine (Ray's own record of it); None without one."""
    if os.environ.get("RAY_ADDRESS") not in (None, "", "auto"):
        return os.environ["RAY_ADDRESS"]
    try:
        from ray._private.utils import read_ray_address

        return read_ray_address() or None
    except Exception:  # an older or newer Ray without it: leave "auto" to Ray
        return None


def refusal(exc: BaseException, where: str) -> str | None:
    """The one line for a ``ray.init`` that failed on authentication (Ray wraps it in a
    ConnectionError after its retries), or None where it failed for another reason."""
    seen = exc
    while seen is not None:
        if type(seen).__name__ == "AuthenticationError" or "InvalidAuthToken" in str(seen):
            return (
                f"{where}: the cluster refused this machine's token, or wanted one: set {MODE}=token "
                f"with its token in {WHERE} ({ASK_HEAD})"
            )
        seen = seen.__cause__ or seen.__context__
    return None
