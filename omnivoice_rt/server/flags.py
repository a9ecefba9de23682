"""The server's flags, one table: each flag's environment variable, type, default, bound and help,
from which ``main.py`` makes its parser and its checks and docs/server.md its table
(``python -m omnivoice_rt.server.flags`` prints the table; a test compares the two).

A value comes from the flag, else from its environment variable, else the default; a value out of
its bound, or an environment variable that is not of the flag's type, is one line naming both.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

from omnivoice_rt.artifacts.profiles import PROFILES
from omnivoice_rt.limits import (
    CONCURRENCY,
    DRAIN_S,
    GRACEFUL_STOP_S,
    HEADER_TIMEOUT_S,
    MAX_HTTP_CONNECTIONS,
    MAX_WAITING,
    MAX_WYOMING_CONNECTIONS,
    PER_CLIENT,
    WYOMING_IDLE_S,
)
from omnivoice_rt.server.turns import FIRST_PIECE_S, POLICIES, TURNS


@dataclass(frozen=True)
class Flag:
    """One flag of ``omnivoice-onnx-server``."""

    name: str  # --max-waiting
    env: str | None  # OMNIVOICE_MAX_WAITING, read where the flag is not given
    kind: type  # str, int, float, or bool (a switch: on with the flag, or env 'true')
    default: object  # where neither is given; None: unset
    help: str  # what the docs' table and --help say (the default first)
    low: float | None = None  # the smallest value accepted
    high: float | None = None  # the largest
    above: bool = False  # the value must be above ``low``, not merely at least it
    choices: tuple | None = None
    metavar: str | None = None
    bare: object = None  # the value of the flag given without one (nargs="?")
    unset: tuple[str, ...] = ("",)  # environment values that leave the flag unset

    @property
    def dest(self) -> str:
        return self.name.removeprefix("--").replace("-", "_")

    def bound(self) -> str:
        """The bound in words, for help and errors ('' without one)."""
        if self.low is None and self.high is None:
            return ""
        if self.high is None:
            return f"{'above' if self.above else 'at least'} {self.low:g}"
        return f"{self.low:g} to {self.high:g}"

    def check(self, value):
        """``value`` if within the bound (None passes), else a ValueError naming the flag."""
        if value is None or self.kind not in (int, float):
            return value
        low_ok = self.low is None or (value > self.low if self.above else value >= self.low)
        if not low_ok or (self.high is not None and value > self.high):
            raise ValueError(f"{self.name} takes {self.bound()}, not {value:g}")
        return value

    def from_env(self):
        """The environment's value, converted, or ``default``; a ValueError naming the
        variable where it is not of the flag's type."""
        raw = os.environ.get(self.env) if self.env else None
        if raw is None or raw.strip() in self.unset:
            return self.default
        if self.kind is bool:
            return raw.strip().lower() == "true"
        try:
            value = self.kind(raw)
        except ValueError:
            kind = {int: "a whole number", float: "a number"}.get(self.kind, self.kind.__name__)
            raise ValueError(f"{self.env}={raw!r} ({self.name}) is not {kind}") from None
        if self.choices and value not in self.choices:
            raise ValueError(f"{self.env}={raw!r} ({self.name}): one of {', '.join(self.choices)}")
        return value


FLAGS = (
    Flag(
        "--artifacts",
        "OMNIVOICE_ARTIFACTS",
        str,
        None,
        "the artifact folder or Hub repo; default the Hub repo `$OMNIVOICE_REPO`, else "
        "`onnx-community/OmniVoice-Onnx`",
    ),
    Flag(
        "--precision",
        "OMNIVOICE_PRECISION",
        str,
        None,
        "the default precision: `int4` (also `int8`, `fp16`, `fp32`, `cuda`); on a source whose "
        "`int4` heads are int4 (the published repo), `fp16`: its fp16 heads beside the same int4 "
        "LLM, as fast (the page says which and why)",
        choices=tuple(PROFILES),
    ),
    Flag(
        "--host",
        "GRADIO_SERVER_NAME",
        str,
        "127.0.0.1",
        "the address to listen on (default 127.0.0.1)",
    ),
    Flag("--port", "GRADIO_SERVER_PORT", int, 7860, "the port (default 7860)", low=0, high=65535),
    Flag(
        "--concurrency",
        "OMNIVOICE_CONCURRENCY",
        int,
        CONCURRENCY,
        f"generations under way at once (default {CONCURRENCY}), each holding its caches in "
        "memory; they take turns on the CPU (`--turns`), later requests wait in line",
        low=1,
    ),
    Flag(
        "--turns",
        "OMNIVOICE_TURNS",
        str,
        TURNS,
        "who computes next among the generations under way (default `step`): `step` hands the "
        "CPU on at every unmasking step, listeners with nothing left to play first, then the "
        "least CPU had since their last audio; `shortest`: the same turns, then the least work "
        "left before their next audio; `request`: a request computes from its first step to "
        "its last, `--concurrency` of them side by side (the behaviour before turns)",
        choices=tuple(POLICIES),
    ),
    Flag(
        "--first-piece",
        "OMNIVOICE_FIRST_PIECE",
        float,
        FIRST_PIECE_S,
        f"a streamed text long enough to be cut (over 30 s of speech) has a first piece of "
        f"about this many seconds (default {FIRST_PIECE_S:g}), its sentences whole, and the "
        "next ones growing to upstream's ~15 s: its first audio sooner while others share the "
        "CPU; `0`: upstream's pieces (a whole answer always has them)",
        low=0,
        metavar="SECONDS",
    ),
    Flag(
        "--per-client",
        "OMNIVOICE_PER_CLIENT",
        int,
        None,
        f"of those, how many one client's requests may be (default {PER_CLIENT}, or "
        "`--concurrency` where lower; at most `--concurrency`); its others wait behind other clients' in their own order, holding at "
        "most its share of `--max-waiting` (as `--per-client` is of `--concurrency`). A client "
        "is an address (an IPv6 /64), behind a proxy the one `--forwarded-allow-ips` believes",
        low=1,
    ),
    Flag(
        "--max-waiting",
        "OMNIVOICE_MAX_WAITING",
        int,
        MAX_WAITING,
        f"requests waiting in the one line of every door (default {MAX_WAITING}); more are "
        "told the server is busy",
        low=0,
        high=1000,
    ),
    Flag(
        "--max-connections",
        "OMNIVOICE_MAX_CONNECTIONS",
        int,
        MAX_HTTP_CONNECTIONS,
        f"HTTP connections open at once (default {MAX_HTTP_CONNECTIONS}); a newcomer past them "
        "is answered 503 and closed",
        low=1,
    ),
    Flag(
        "--header-timeout",
        "OMNIVOICE_HEADER_TIMEOUT",
        float,
        HEADER_TIMEOUT_S,
        f"seconds for a request's headers to arrive (default {HEADER_TIMEOUT_S:g}; from the "
        "connection, or from the previous answer); a slower connection is closed",
        low=0,
        above=True,
    ),
    Flag(
        "--forwarded-allow-ips",
        "FORWARDED_ALLOW_IPS",
        str,
        "127.0.0.1",
        "the reverse proxies (addresses or networks, comma-separated, uvicorn's setting) whose "
        "`X-Forwarded-For` says who the client is (default 127.0.0.1; `app.py` on a Space: the "
        "private networks its proxy comes from); from anyone else the header is ignored",
    ),
    Flag(
        "--threads",
        None,
        int,
        None,
        "ONNX Runtime threads per session (default, or 0: ONNX Runtime's)",
        low=0,
    ),
    Flag(
        "--idle-unload",
        "OMNIVOICE_IDLE_UNLOAD",
        float,
        None,
        "seconds without a request after which the models and the recogniser are freed; the "
        'next request loads them again (default: keep them; see "Running it as a service")',
        low=0,
        above=True,
        metavar="SECONDS",
        unset=("", "0"),
    ),
    Flag(
        "--stop-timeout",
        "OMNIVOICE_STOP_TIMEOUT",
        float,
        DRAIN_S,
        f"on SIGTERM, seconds the requests under way may take to finish while new ones get 503 "
        f"(default {DRAIN_S:g}; then {GRACEFUL_STOP_S:g} s for open connections)",
        low=0,
        metavar="SECONDS",
    ),
    Flag(
        "--asr-model",
        "OMNIVOICE_ASR_MODEL",
        str,
        None,
        "the speech recogniser for references: a Whisper folder or Hub repo (onnx-community "
        "layout); default `onnx-community/whisper-base` (int8), loaded after the default "
        "precision; `none`: off",
    ),
    Flag(
        "--align-model",
        "OMNIVOICE_ALIGN_MODEL",
        str,
        None,
        "the word aligner of every door's `words`: `espeak` (default: eSpeak NG, the align "
        "extra), or a CTC acoustic model's folder or Hub repo (model.onnx and aligner.json, "
        "docs/design.md section 10), loaded at start",
    ),
    Flag(
        "--voices",
        "OMNIVOICE_VOICES",
        str,
        None,
        "the voice library's folder (`NAME.npz` voice prompts, `NAME.json` designs), voices of "
        "every door by name (default: none)",
        metavar="DIR",
    ),
    Flag(
        "--voices-writable",
        "OMNIVOICE_VOICES_WRITABLE",
        bool,
        False,
        "let clients add and remove voices in `--voices` (POST and DELETE /v1/audio/voices, "
        "the page's 'Save to the library'; see \"The voice library\"; env `true`)",
    ),
    Flag(
        "--wyoming",
        "OMNIVOICE_WYOMING",
        str,
        None,
        "also serve the Wyoming protocol for Home Assistant at this address, in the same line "
        '(see "Home Assistant")',
        metavar="tcp://HOST:PORT",
    ),
    Flag(
        "--wyoming-zeroconf",
        None,
        str,
        None,
        "advertise the Wyoming door over zeroconf (mDNS) so Home Assistant discovers it (name "
        "`omnivoice` where none is given)",
        metavar="NAME",
        bare="omnivoice",
    ),
    Flag(
        "--wyoming-max-connections",
        "OMNIVOICE_WYOMING_MAX_CONNECTIONS",
        int,
        MAX_WYOMING_CONNECTIONS,
        f"Wyoming connections open at once (default {MAX_WYOMING_CONNECTIONS}); a newcomer past "
        "them gets an `error` event (`busy`) and is closed",
        low=1,
    ),
    Flag(
        "--wyoming-idle-timeout",
        "OMNIVOICE_WYOMING_IDLE_TIMEOUT",
        float,
        WYOMING_IDLE_S,
        f"seconds a Wyoming connection may send nothing while nothing is made for it (default "
        f"{WYOMING_IDLE_S:g}); then it gets an `error` event (`idle`) and is closed",
        low=0,
        above=True,
    ),
    Flag(
        "--mcp",
        "GRADIO_MCP_SERVER",
        bool,
        False,
        "serve the tools over MCP (streamable HTTP) at /gradio_api/mcp (env `true`)",
    ),
)


def parser() -> argparse.ArgumentParser:
    """The parser of ``FLAGS``: each flag's default is its environment's value (read now)."""
    made = argparse.ArgumentParser(
        prog="omnivoice-onnx-server",
        description="OmniVoice ONNX: the page, the OpenAI-compatible door, MCP and Wyoming",
    )
    for flag in FLAGS:
        told = flag.help.replace("%", "%%").replace("`", "")
        told += f" (env {flag.env})" if flag.env else ""
        told += f"; {flag.bound()}" if flag.bound() else ""
        if flag.kind is bool:
            made.add_argument(flag.name, action="store_true", default=None, help=told)
            continue
        made.add_argument(
            flag.name,
            type=flag.kind,
            default=None,
            choices=list(flag.choices) if flag.choices else None,
            metavar=flag.metavar,
            nargs="?" if flag.bare is not None else None,
            const=flag.bare,
            help=told,
        )
    return made


def parse(argv: list[str] | None, check=None) -> argparse.Namespace:
    """The flags, each from the command line, else its environment variable, else its default,
    within its bound, then ``check(args)`` (what flags ask of each other); a bad value, or a
    ``ValueError`` of ``check``, is ``parser().error``'s one line (exit 2)."""
    made = parser()
    args = made.parse_args(argv)
    try:
        for flag in FLAGS:
            given = getattr(args, flag.dest)
            value = given if given is not None else flag.from_env()
            setattr(args, flag.dest, flag.check(value))
        if check:
            check(args)
    except ValueError as exc:
        made.error(str(exc))
    return args


def markdown() -> str:
    """docs/server.md's table of the flags."""
    rows = ["| flag | environment | what, and the default |", "|---|---|---|"]
    for flag in FLAGS:
        name = f"`{flag.name}" + (f" {flag.metavar}`" if flag.metavar else "`")
        if flag.bare is not None:
            name = f"`{flag.name} [{flag.metavar}]`"
        env = f"`{flag.env}`" if flag.env else ""
        bound = f"; {flag.bound()}" if flag.bound() else ""
        rows.append(f"| {name} | {env} | {flag.help}{bound} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
