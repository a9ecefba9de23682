"""A Hugging Face Hub-compatible HTTP server on 127.0.0.1 that serves one folder as a model repo.

It answers the calls ``huggingface_hub`` makes for ``snapshot_download``: repo info, the recursive
tree listing (with LFS sha256 for large files), and HEAD/GET ``resolve`` for each file, with the
Hub's headers (``X-Repo-Commit``, ``ETag``, ``X-Linked-Etag``, ``X-Linked-Size``). Faults for
tests: ``missing`` paths answer 404, ``truncated`` paths send half their bytes, ``delays`` make a
download slow. ``requests``
records every file request, so a test can tell whether anything was downloaded.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse

# files at least this big are served as LFS files, as the Hub does for weights
LFS_THRESHOLD = 10_000


class HubServer:
    def __init__(self, folder: Path, repo_id: str, port: int = 0):
        self.folder = Path(folder)
        self.repo_id = repo_id
        self.missing: set[str] = set()
        self.truncated: set[str] = set()
        self.delays: dict[
            str, float
        ] = {}  # seconds to wait before sending a file's bytes: a slow download
        self.requests: list[tuple[str, str]] = []  # (method, path) of every resolve request
        self._index = self._build_index()
        handler = type("Handler", (_Handler,), {"hub": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def _build_index(self) -> dict[str, dict]:
        """Every file's size and ids; the commit hash changes with the content, as on the Hub."""
        index = {}
        for path in sorted(p for p in self.folder.rglob("*") if p.is_file()):
            data = path.read_bytes()
            entry = {
                "size": len(data),
                "oid": hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest(),
            }
            if len(data) >= LFS_THRESHOLD:
                entry["lfs"] = {
                    "oid": hashlib.sha256(data).hexdigest(),
                    "size": len(data),
                    "pointerSize": 134,
                }
            index[path.relative_to(self.folder).as_posix()] = entry
        self.commit = hashlib.sha1(json.dumps(index, sort_keys=True).encode()).hexdigest()
        return index

    def file_requests(self) -> list[str]:
        return [path for method, path in self.requests if method == "GET"]

    def start(self) -> HubServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


class _Handler(BaseHTTPRequestHandler):
    hub: HubServer

    def log_message(self, *args) -> None:  # keep test output quiet
        pass

    def _json(self, payload, status: int = 200) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _not_found(self, message: str) -> None:
        body = json.dumps({"error": message}).encode()
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Error-Code", "EntryNotFound")
        self.send_header("X-Error-Message", message)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self) -> None:
        self._serve()

    def do_HEAD(self) -> None:
        self._serve()

    def _serve(self) -> None:
        hub = self.hub
        path = unquote(urlparse(self.path).path)
        api = f"/api/models/{hub.repo_id}"
        if path.startswith(api + "/revision/"):
            siblings = [{"rfilename": p} for p in hub._index]
            return self._json(
                {
                    "id": hub.repo_id,
                    "modelId": hub.repo_id,
                    "sha": hub.commit,
                    "siblings": siblings,
                    "private": False,
                }
            )
        if path.startswith(api + "/tree/"):
            entries, folders = [], set()
            for name, entry in hub._index.items():
                parts = name.split("/")
                for depth in range(1, len(parts)):
                    folders.add("/".join(parts[:depth]))
                entries.append({"type": "file", "path": name, **entry})
            entries += [
                {"type": "directory", "path": f, "oid": "0" * 40, "size": 0}
                for f in sorted(folders)
            ]
            return self._json(entries)
        prefix = f"/{hub.repo_id}/resolve/"
        if not path.startswith(prefix):
            return self._json({"error": f"unknown route {path}"}, 404)
        name = path[len(prefix) :].split("/", 1)[1]
        hub.requests.append((self.command, name))
        entry = hub._index.get(name)
        if entry is None or name in hub.missing:
            return self._not_found(f"{name} does not exist on revision main")
        data = (hub.folder / name).read_bytes()
        self.send_response(200)
        self.send_header("X-Repo-Commit", hub.commit)
        etag = entry["lfs"]["oid"] if "lfs" in entry else entry["oid"]
        self.send_header("ETag", f'"{etag}"')
        if "lfs" in entry:
            self.send_header("X-Linked-Etag", f'"{etag}"')
            self.send_header("X-Linked-Size", str(entry["size"]))
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        if self.command == "GET":
            time.sleep(hub.delays.get(name, 0.0))
            body = data[: len(data) // 2] if name in hub.truncated else data
            self.wfile.write(body)
            if name in hub.truncated:
                self.close_connection = True
