"""Replicas on Ray Serve (``omnivoice_rt/server/replicas.py``, ``deploy/replicas.yaml``) on a real
Ray cluster of two nodes on loopback, one CPU each, two replicas of one CPU, reached with the
official ``openai`` client; the single-process server on the same artifacts is the reference."""

from __future__ import annotations

import concurrent.futures
import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import httpx
import openai
import psutil
import pytest
import yaml

from tests.conftest import (
    RAY_CLI,
    ROOT,
    free_port,
    ray_environment,
    ray_head,
    ray_stop,
    running_app,
)

pytest.importorskip("ray.serve", reason="Ray Serve (the ray extra: ray[serve])")

SETTINGS = {"OMNIVOICE_MATMUL": "fp32"}
PREFIX = "/tts"
REPLICA = "ServeReplica:omnivoice:Model"  # a Model replica's process title
TEXTS = [
    f"Request number {n} is answered by whichever replica is free, word for word the same."
    for n in range(8)
]


def replica_pids() -> set[int]:
    return {
        process.pid
        for process in psutil.process_iter(["cmdline"])
        if REPLICA in " ".join(process.info["cmdline"] or [])
    }


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A Ray head and a second node on this machine, one CPU each, with token authentication as
    a machine where Ray once wrote ``~/.ray/auth_token`` has it (the head turns it on by itself;
    the joining node is told ``RAY_AUTH_MODE=token``, as docs/replicas.md says); (its address,
    the environment of the commands run against it: RAY_AUTH_MODE unset, the token in HOME)."""
    environment = {**ray_environment(tmp_path_factory.mktemp("ray-home"), "file"), **SETTINGS}
    port = free_port()
    address = f"127.0.0.1:{port}"
    common = ["--node-ip-address", "127.0.0.1", "--num-cpus", "1", "--disable-usage-stats"]
    try:
        ray_head(port, environment)
        subprocess.run(
            [*RAY_CLI, "start", "--address", address, *common],
            check=True,
            env={**environment, "RAY_AUTH_MODE": "token"},
            capture_output=True,
            timeout=180,
        )
        yield address, environment
    finally:
        ray_stop(environment)


def config_file(folder: Path, artifacts: Path, voices: Path, port: int, replicas: int = 2) -> Path:
    """deploy/replicas.yaml with this test's artifacts, voices, port and replicas of one CPU, under
    ``PREFIX`` (a route prefix other than the shipped ``/``: the routes must work under one)."""
    config = yaml.safe_load((ROOT / "deploy" / "replicas.yaml").read_text())
    config["http_options"]["port"] = port
    application = config["applications"][0]
    application["route_prefix"] = PREFIX
    application["runtime_env"]["env_vars"]["OMNIVOICE_MATMUL"] = "fp32"
    application["args"].update(
        artifacts=str(artifacts), voices=str(voices), asr_model="none", precision=None
    )
    model = next(d for d in application["deployments"] if d["name"] == "Model")
    del model["autoscaling_config"]
    model.update(num_replicas=replicas, ray_actor_options={"num_cpus": 1})
    path = folder / f"replicas-{replicas}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def command(config: Path, address: str, environment: dict, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "omnivoice_rt.server.replicas", str(config), "--address", address],
        cwd=ROOT,
        env=environment,
        **kwargs,
    )


def one_line(run: subprocess.Popen) -> str:
    """The command's one line of error (it exits 2, no traceback)."""
    out, err = run.communicate(timeout=600)
    lines = [line for line in err.splitlines() if "omnivoice-onnx-replicas" in line]
    assert run.returncode == 2 and len(lines) == 1 and "Traceback" not in err, (out, err)
    return lines[0]


# First, before the module's cluster starts (its `ray stop` would stop that one too): a cluster
# without a token and one whose nodes all have RAY_AUTH_MODE=token and RAY_AUTH_TOKEN; asking for
# more CPUs than it has is told only once connected (and authenticated); a wrong token in one line.
@pytest.mark.parametrize("auth", ["none", "env"])
def test_the_command_joins_a_cluster_with_or_without_a_token(auth, cpu_artifacts, tmp_path):
    environment = {**ray_environment(tmp_path / "home", auth), **SETTINGS}
    port = free_port()
    address = f"127.0.0.1:{port}"
    config = config_file(tmp_path, cpu_artifacts, tmp_path, free_port(), replicas=3)
    pipes = dict(stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ray_head(port, environment)
        line = one_line(command(config, address, environment, **pipes))
        assert "take 3 CPUs and the cluster has 1" in line, line
        if auth == "env":
            wrong = {**environment, "RAY_AUTH_TOKEN": "not-the-token"}
            line = one_line(command(config, address, wrong, **pipes))
            assert "refused the token from RAY_AUTH_TOKEN" in line, line
            # and the same without any token, the mode unset
            bare = {k: v for k, v in environment.items() if not k.startswith("RAY_AUTH")}
            line = one_line(command(config, address, bare, **pipes))
            assert "asks for a token" in line and "RAY_AUTH_MODE=token" in line, line
    finally:
        ray_stop(environment)


# First: it deploys nothing that stays, before the deployment the others share.
def test_the_command_says_in_one_line_what_is_wrong(cluster, cpu_artifacts, tmp_path):
    address, environment = cluster
    port = free_port()
    config = config_file(tmp_path, cpu_artifacts, tmp_path, port)
    pipes = dict(stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    no_cluster = one_line(command(config, f"127.0.0.1:{free_port()}", environment, **pipes))
    assert "ray start --head" in no_cluster, no_cluster
    too_many = config_file(tmp_path, cpu_artifacts, tmp_path, port, 3)
    line = one_line(command(too_many, address, environment, **pipes))
    assert "take 3 CPUs and the cluster has 2" in line and "num_replicas" in line, line
    # a setting the replicas do not know, before anything starts
    wrong = yaml.safe_load(config.read_text())
    wrong["applications"][0]["args"]["voice_dir"] = "/nowhere"
    config.write_text(yaml.safe_dump(wrong))
    line = one_line(command(config, address, environment, **pipes))
    assert "unknown replica setting voice_dir" in line, line
    assert "the settings are artifacts" in line, line
    # a model folder that is not there: the replicas' own error, once, and nothing left running
    del wrong["applications"][0]["args"]["voice_dir"]
    wrong["applications"][0]["args"]["artifacts"] = str(tmp_path / "missing")
    config.write_text(yaml.safe_dump(wrong))
    line = one_line(command(config, address, environment, **pipes))
    assert "omnivoice failed to deploy" in line and str(tmp_path / "missing") in line, line
    deadline = time.time() + 60
    while replica_pids():
        assert time.time() < deadline, "a replica is left running"
        time.sleep(1)


@pytest.fixture(scope="module")
def deployed(cluster, cpu_artifacts, tmp_path_factory):
    """The shipped config, deployed by ``omnivoice-onnx-replicas``: (URL, voice folder)."""
    address, environment = cluster
    folder = tmp_path_factory.mktemp("replicas")
    voices = folder / "voices"
    voices.mkdir()
    port = free_port()
    log = folder / "replicas.log"
    with open(log, "w") as out:
        process = command(
            config_file(folder, cpu_artifacts, voices, port),
            address,
            environment,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}{PREFIX}"
    deadline = time.time() + 300
    while "serving on" not in log.read_text():
        assert process.poll() is None and time.time() < deadline, log.read_text()[-3000:]
        time.sleep(1)
    try:
        yield url, voices
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=120) == 0, log.read_text()[-3000:]


@pytest.fixture(scope="module")
def reference(cpu_artifacts, tmp_path_factory):
    """Each text's wav from the single-process server, seed n for text n."""
    log = tmp_path_factory.mktemp("single") / "server.log"
    with running_app(["--artifacts", str(cpu_artifacts), "--asr-model", "none"], log) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused")
        return [speak(client, n)[0] for n in range(len(TEXTS))]


def speak(client, n: int, voice: str = "alloy") -> tuple[bytes, str]:
    """Text n with seed n: (wav bytes, the replica that answered)."""
    raw = client.audio.speech.with_raw_response.create(
        model="omnivoice",
        voice=voice,
        input=TEXTS[n],
        response_format="wav",
        extra_body={"seed": n},
    )
    return raw.content, raw.headers.get("x-replica", "")


def client_of(url: str) -> openai.OpenAI:
    # no retries: a failure is seen as it is; a hang is a timeout
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=180)


def post(url: str, path: str, body: dict) -> tuple[int, dict, str]:
    request = urllib.request.Request(
        url + path, json.dumps(body).encode(), {"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as answer:
            return answer.status, json.loads(answer.read()), answer.headers["x-replica"]
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read()), exc.headers.get("x-replica", "")


def test_eight_clients_get_the_single_servers_audio_from_both_replicas(deployed, reference):
    url, _ = deployed
    client = client_of(url)
    with concurrent.futures.ThreadPoolExecutor(len(TEXTS)) as pool:
        answers = list(pool.map(lambda n: speak(client, n), range(len(TEXTS))))
    for n, (audio, _) in enumerate(answers):
        assert audio == reference[n], f"text {n} differs from the single-process server's"
    served_by = {replica for _, replica in answers}
    assert len(served_by) == 2 and "" not in served_by, served_by


def test_a_voice_added_through_one_replica_is_used_through_the_other(deployed, reference):
    url, voices = deployed
    status, body, added_by = post(
        url, "/v1/audio/voices", {"name": "keeper", "instruct": "female, low pitch"}
    )
    assert status == 201 and added_by, body
    assert (voices / "keeper.json").is_file()
    client = client_of(url)
    # the ingress spreads requests at random: one of a few lands on the other replica
    for _ in range(20):
        audio, replica = speak(client, 0, voice="keeper")
        assert audio[:4] == b"RIFF" and audio != reference[0]  # a designed voice, not alloy
        if replica != added_by:
            break
    else:
        pytest.fail(f"every request was answered by {added_by}")


def test_a_client_that_leaves_stops_its_synthesis_on_the_replica(deployed):
    url, _ = deployed
    body = {
        "model": "omnivoice",
        "voice": "alloy",
        "input": " ".join(TEXTS * 12),  # 96 pieces: far more than are made when it leaves
        "response_format": "pcm",
        "stream_format": "sse",
    }
    with httpx.stream("POST", f"{url}/v1/audio/speech", json=body, timeout=120) as answer:
        assert answer.status_code == 200 and answer.headers["x-replica"]
        next(answer.iter_bytes())  # the first piece; then the client leaves
    # the replica heard it: the request ended as cancelled, not made to its end
    cancelled = 'omnivoice_requests_total{door="openai",outcome="cancelled"} 1.0'
    deadline = time.time() + 120
    while cancelled not in urllib.request.urlopen(f"{url}/metrics", timeout=30).read().decode():
        assert time.time() < deadline, "no replica counted the request as cancelled"
        time.sleep(0.5)


def test_a_killed_replica_leaves_no_request_hanging_and_comes_back(deployed, reference):
    url, voices = deployed
    client = client_of(url)
    before = replica_pids()
    assert len(before) == 2, before

    def outcome(n: int):
        try:
            return speak(client, n)[0]
        except openai.APIStatusError as exc:
            return exc.status_code, exc.response.json()["error"]["code"]
        except openai.APIConnectionError:  # an answer under way when its replica died: cut
            return "cut"

    with concurrent.futures.ThreadPoolExecutor(len(TEXTS) + 4) as pool:
        speeches = [pool.submit(outcome, n) for n in range(len(TEXTS))]
        designs = [
            pool.submit(post, url, "/v1/audio/voices", {"name": f"v{n}", "instruct": "male"})
            for n in range(4)
        ]
        # once one is answered, each replica holds the others' turns: one being made, the rest
        # waiting in its line
        concurrent.futures.wait(speeches, return_when=concurrent.futures.FIRST_COMPLETED)
        victim = min(before)
        psutil.Process(victim).send_signal(signal.SIGKILL)
        # none hangs: each answers within the client's timeout, or this raises
        answers = [speech.result(timeout=200) for speech in speeches]
        added = [design.result(timeout=200) for design in designs]
    for n, answer in enumerate(answers):
        # answered (the same audio: one the dead replica held, not yet started, is made again by
        # the other), a clean 503 in OpenAI's shape, or an answer already under way cut short
        assert answer in (reference[n], (503, "replica_unavailable"), "cut"), (n, answer)
    assert sum(answer == reference[n] for n, answer in enumerate(answers)) >= len(TEXTS) // 2
    # the library holds only whole voices: each one listed reads, every voice added is listed
    listed = json.loads(urllib.request.urlopen(f"{url}/v1/audio/voices", timeout=60).read())
    names = {voice["id"] for voice in listed["data"]}
    for n, (status, body, _) in enumerate(added):
        assert status == 201 or status == 503, body
        if status == 201:
            assert f"v{n}" in names
    for path in voices.glob("*.json"):
        json.loads(path.read_text())
    # Serve starts another replica, which answers
    deadline = time.time() + 180
    while not (len(replica_pids()) == 2 and victim not in replica_pids()):
        assert time.time() < deadline, "Serve did not bring the replica back"
        time.sleep(1)
    seen = set()
    while len(seen) < 2:
        assert time.time() < deadline, f"only {seen} answered after the kill"
        audio, replica = speak(client, 1)
        assert audio == reference[1]
        seen.add(replica)
