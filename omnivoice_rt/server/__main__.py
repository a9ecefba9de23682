"""``omnivoice-onnx-server`` and ``python -m omnivoice_rt.server``: the server's command line
(``main.py``), and ``omnivoice-onnx-replicas`` (``replicas.py``); or one line naming the extra to
install where their packages are missing."""

from __future__ import annotations

import sys

# The top-level packages of the ``server`` extra (pyproject.toml) and of Gradio's own stack.
SERVER_PACKAGES = {"gradio", "fastapi", "starlette", "uvicorn", "wyoming", "zeroconf"}
HINT = "pip install 'omnivoice-onnx[server]'"


def run(argv: list[str] | None = None) -> int:
    from omnivoice_rt.server.flags import FLAGS

    try:  # before Gradio, which reads GRADIO_SERVER_PORT as it is imported and fails on a bad one
        for flag in FLAGS:
            flag.from_env()
    except ValueError as exc:
        print(f"omnivoice-onnx-server: error: {exc}", file=sys.stderr)
        return 2
    try:
        from omnivoice_rt.server.main import main

        return main(argv)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in SERVER_PACKAGES:
            raise
        print(
            f"omnivoice-onnx-server: the server needs the 'server' extra ({exc.name} is not "
            f"installed): {HINT}",
            file=sys.stderr,
        )
        return 2


def replicas(argv: list[str] | None = None) -> int:
    try:
        from omnivoice_rt.server.replicas import main
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in SERVER_PACKAGES | {"ray", "grpc"}:
            raise
        print(
            f"omnivoice-onnx-replicas: replicas need the 'server' and 'ray' extras ({exc.name} is "
            "not installed): pip install 'omnivoice-onnx[server,ray]'",
            file=sys.stderr,
        )
        return 2
    return main(argv)


if __name__ == "__main__":
    sys.exit(run())
