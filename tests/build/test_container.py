"""The container image (``Dockerfile``), built and run on a real container engine (issue 37).

No registry can be reached and ``podman run`` is refused by this sandbox (crun cannot set rlimits),
so, as the issue says: a base image is made from Debian's packages (``debootstrap``, trusting the
host's certificate authorities for pip) and imported with ``podman import``; the project's image
is built on it (``podman build --isolation chroot``); its filesystem is exported and its entry
command run as its user under ``chroot``, in namespaces of its own with ``/proc`` and
``/dev/shm`` as an engine would give them, against the tiny fixture copied in. Its ``/health``
answers, its HEALTHCHECK passes, one synthesis equals the same request on the host; without a
network it says it is offline, as the host does; a missing model folder is one line and no
crash. Slow (minutes: Debian's and PyPI's downloads); skipped where no container engine is
installed (CI installs podman and debootstrap).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import textwrap
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
import soundfile as sf

from tests.conftest import ROOT, free_port, running_app

pytestmark = pytest.mark.slow
SUITE = "bookworm"
BODY = {"model": "tts-1", "input": "Hello from a container.", "voice": "auto", "seed": 5}


def run(*command, timeout=900, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, **kwargs)
    assert result.returncode == 0, f"{command[:3]}: {result.stderr[-3000:]}"
    return result


def debian_mirror() -> str:
    """The Debian mirror apt uses here (its deb822 sources), else Debian's own."""
    sources = Path("/etc/apt/sources.list.d/debian.sources")
    if sources.exists():
        for line in sources.read_text().splitlines():
            if line.startswith("URIs:") and "security" not in line:
                return line.split()[1]
    return "http://deb.debian.org/debian"


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    """The project's image, built on a Debian base made here; yields (name, its config)."""
    missing = [t for t in ("podman", "debootstrap", "unshare", "chroot") if not shutil.which(t)]
    if missing:
        pytest.skip(
            f"{', '.join(missing)} not installed: apt-get install podman debootstrap (.ci/run does)"
        )
    if os.geteuid() != 0:
        pytest.skip("debootstrap and chroot need root")
    tag = f"{os.getpid()}-{int(time.time())}"
    base, name = f"localhost/omnivoice-base-test:{tag}", f"localhost/omnivoice-onnx-test:{tag}"
    root = tmp_path_factory.mktemp("debian")
    run(
        "debootstrap",
        "--variant=minbase",
        "--include=python3,python3-venv,ca-certificates",
        SUITE,
        str(root),
        debian_mirror(),
        timeout=1200,
    )
    # pip in the build trusts what pip here trusts (a proxy's authority, where there is one)
    bundle = os.environ.get("PIP_CERT") or os.environ.get("SSL_CERT_FILE")
    bundle = bundle or "/etc/ssl/certs/ca-certificates.crt"
    shutil.copy(bundle, root / "etc/ssl/certs/host-ca.pem")
    for cached in (root / "var/cache/apt/archives").glob("*.deb"):
        cached.unlink()
    archive = tmp_path_factory.mktemp("base") / "base.tar"
    run("tar", "-C", str(root), "-cf", str(archive), ".")
    run("podman", "import", str(archive), base)
    shutil.rmtree(root)
    try:
        run(
            "podman",
            "build",
            "--isolation",
            "chroot",
            "--format",
            "docker",  # OCI images have no HEALTHCHECK
            "--build-arg",
            f"BASE={base}",
            "--build-arg",
            "PIP_CERT=/etc/ssl/certs/host-ca.pem",
            "-t",
            name,
            str(ROOT),
            timeout=1800,
        )
        config = json.loads(run("podman", "image", "inspect", name).stdout)[0]
        yield name, config
    finally:
        subprocess.run(["podman", "rmi", "-f", name, base], capture_output=True, timeout=300)


@pytest.fixture(scope="module")
def rootfs(image, tmp_path_factory, cpu_artifacts):
    """The image's filesystem (``podman create`` + ``podman export``), the fixture in /artifacts."""
    name, _ = image
    folder = tmp_path_factory.mktemp("rootfs")
    folder.chmod(0o755)  # "/" for the image's user (pytest makes its folders 0700)
    container = run("podman", "create", name).stdout.strip()
    try:
        export = subprocess.Popen(["podman", "export", container], stdout=subprocess.PIPE)
        run("tar", "-x", "-C", str(folder), stdin=export.stdout)
        assert export.wait(timeout=600) == 0
    finally:
        subprocess.run(["podman", "rm", "-f", container], capture_output=True, timeout=120)
    shutil.copytree(cpu_artifacts, folder / "artifacts")
    for path in [folder / "artifacts", *(folder / "artifacts").rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    (folder / "proc").mkdir(exist_ok=True)
    (folder / "dev/shm").mkdir(parents=True, exist_ok=True)
    return folder


def inside(rootfs: Path, config: dict, command: str, network: bool = True):
    """``command`` (a shell line) as the image would run it: in its filesystem, as its user, with
    its environment, in new mount and process namespaces (and a new network one where
    ``network`` is False) with /proc, /dev/shm and /tmp mounted. A Popen."""
    user = config["Config"]["User"]
    passwd = (rootfs / "etc/passwd").read_text().splitlines()
    uid, gid = next(line.split(":")[2:4] for line in passwd if line.startswith(f"{user}:"))
    env = " ".join(f"'{pair}'" for pair in config["Config"]["Env"])
    mounts = (
        f"mount -t proc proc {rootfs}/proc && "
        f"mount -t tmpfs -o mode=1777 tmpfs {rootfs}/dev/shm && "
        f"mount -t tmpfs -o mode=1777 tmpfs {rootfs}/tmp && "
        + ("" if network else "ip link set lo up && ")
        + f"exec chroot --userspec={uid}:{gid} {rootfs} /usr/bin/env -i HOME=/home/{user} {env} "
        f"/bin/sh -c {shell_quote(command)}"
    )
    flags = ["--mount", "--pid", "--fork", "--kill-child"] + ([] if network else ["--net"])
    return subprocess.Popen(
        ["unshare", *flags, "sh", "-c", mounts],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def stop(process: subprocess.Popen) -> None:
    """SIGTERM to what ``inside`` started (unshare passes no signal on: to its children), then
    SIGKILL to what is left after a minute."""
    import psutil

    family = psutil.Process(process.pid).children(recursive=True)
    for member in family:
        with contextlib.suppress(psutil.NoSuchProcess):
            member.terminate()
    for member in psutil.wait_procs(family, timeout=60)[1]:
        with contextlib.suppress(psutil.NoSuchProcess):
            member.kill()
    process.wait(timeout=60)


def shell_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def entry(config: dict, *args: str) -> str:
    return " ".join([*config["Config"]["Entrypoint"], *args])


def test_the_image_is_small_runs_as_its_user_and_declares_what_operators_need(image, rootfs):
    name, config = image
    settings = config["Config"]
    assert settings["User"] == "omnivoice" and settings["Entrypoint"] == ["omnivoice-onnx-server"]
    assert {"7860/tcp", "10200/tcp"} <= set(settings["ExposedPorts"])
    assert "/data" in settings["Volumes"] and "HF_HOME=/data/huggingface" in settings["Env"]
    assert config["Healthcheck"]["Test"][0] == "CMD"
    site = next((rootfs / "opt/omnivoice/lib").glob("python3*/site-packages"))
    assert (site / "onnxruntime").is_dir() and (site / "gradio").is_dir()
    assert not (site / "torch").exists()  # the runtime's requirements only
    assert (rootfs / "data").stat().st_uid == 1000
    size = config["Size"] / 1e6
    print(f"image {name}: {size:.0f} MB")
    assert size < 2000


def test_the_image_serves_health_and_the_same_audio_as_the_host(
    image, rootfs, cpu_artifacts, tmp_path
):
    """Its server, as its entry command starts it, answers /health, passes its HEALTHCHECK and
    speaks as the same server on the host does (both on one fixed kernel: auto's choice is a
    measurement, which two processes may make differently)."""
    _, config = image
    port = free_port()
    server = inside(
        rootfs,
        config,
        f"OMNIVOICE_MATMUL=fp32 {entry(config)} --artifacts /artifacts --asr-model none "
        f"--host 127.0.0.1 --port {port}",
    )
    url = f"http://127.0.0.1:{port}"
    host = running_app(
        ["--artifacts", str(cpu_artifacts), "--asr-model", "none"],
        tmp_path / "host.log",
        HF_HUB_OFFLINE="1",
        OMNIVOICE_MATMUL="fp32",
    )
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=5).json()["loaded"] == ["int4"]:
                    break
            except httpx.HTTPError:
                pass
            assert server.poll() is None, server.stdout.read()[-3000:]
            assert time.monotonic() < deadline, "the image's server did not load its model"
            time.sleep(1)
        check = " ".join(shell_quote(part) for part in config["Healthcheck"]["Test"][1:])
        probe = inside(rootfs, config, f"GRADIO_SERVER_PORT={port} {check}")
        assert probe.wait(timeout=60) == 0, probe.stdout.read()
        there = httpx.post(f"{url}/v1/audio/speech", json=BODY, timeout=120)
        with host as here_url:
            here = httpx.post(f"{here_url}/v1/audio/speech", json=BODY, timeout=120)
        assert there.status_code == here.status_code == 200
        theirs, rate = sf.read(io.BytesIO(there.content), dtype="int16")
        ours, _ = sf.read(io.BytesIO(here.content), dtype="int16")
        assert rate == 24000 and theirs.shape == ours.shape
        assert np.abs(theirs.astype(int) - ours).max() <= 2  # the same model, its own numpy
    finally:
        stop(server)


def test_without_a_network_it_says_so_and_a_missing_folder_is_one_line(image, rootfs):
    """In a network namespace of its own (loopback only): the default Hub repo cannot be had, and
    every request is told why, as on the host; a model folder that is not there is named in one
    line, and the server keeps answering (no crash, no restart loop)."""
    _, config = image
    script = textwrap.dedent(
        """
        import json, subprocess, sys, time, urllib.request, urllib.error
        def ask(port, source):
            server = subprocess.Popen(
                [*sys.argv[1:], "--port", str(port), "--host", "127.0.0.1", "--asr-model", "none"]
                + (["--artifacts", source] if source else []),
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for _ in range(120):
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                    break
                except OSError:
                    time.sleep(0.5)
            body = json.dumps({"model": "tts-1", "input": "Hi.", "voice": "auto"}).encode()
            request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/audio/speech", body,
                                             {"Content-Type": "application/json"})
            try:
                answer = urllib.request.urlopen(request, timeout=120)
                status, text = answer.status, ""
            except urllib.error.HTTPError as exc:
                status, text = exc.code, json.loads(exc.read())["error"]["message"]
            alive = server.poll() is None
            server.terminate()
            log = server.communicate(timeout=60)[0]
            print(json.dumps({"status": status, "message": text, "alive": alive, "log": log}))
        ask(7861, None)
        ask(7862, "/models/missing")
        """
    )
    (rootfs / "tmp-probe.py").write_text(script)
    probe = inside(
        rootfs,
        config,
        "python3 /tmp-probe.py " + entry(config),
        network=False,
    )
    output = probe.communicate(timeout=600)[0]
    assert probe.returncode == 0, output[-3000:]
    offline, missing = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    assert offline["alive"] and offline["status"] == 503
    assert "cannot reach https://huggingface.co" in offline["message"]
    assert "onnx-community/OmniVoice-Onnx" in offline["message"]
    assert missing["alive"] and missing["status"] in (400, 503)
    assert "/models/missing" in missing["message"]
    for case in (offline, missing):
        assert "Traceback" not in case["log"], case["log"][-3000:]
