"""A loopback fake of the Hugging Face Hub's dataset endpoints, for download tests.

It answers what `huggingface_hub` (2.x) asks of a dataset repo at a revision:

- `GET /api/datasets/{repo}/revision/{rev}`: repo info (`sha` is the commit of `rev`);
- `GET /api/datasets/{repo}/tree/{rev}[/{folder}]?recursive=&expand=`: the file listing, in
  pages linked by a `Link: <...>; rel="next"` header, each file with its size, git blob id
  and, for LFS files, `lfs: {oid: sha256, size, pointerSize}`;
- `HEAD|GET /datasets/{repo}/resolve/{rev}/{path}`: a regular file is served there with its
  git blob id as ETag; an LFS file answers 302 to `/lfs/{sha256}` on the same server, with
  `X-Linked-Size` and `X-Linked-Etag` (its sha256), as the Hub redirects to its CDN;
- `GET /lfs/{sha256}`: the LFS object, with `Range` requests (206 + `Content-Range`).

Every answer carries `X-Repo-Commit`. Faults for tests: `drop_once` paths are cut off mid-body
on their first GET (the connection is closed), `corrupt` paths are served with one byte
changed (right length, wrong hash), `broken` paths answer 500 to GET. `token` makes every
request need `Authorization: Bearer <token>`.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit

LFS_SUFFIXES = (".jpg", ".jpeg", ".png", ".mp4", ".ply", ".npz")


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs_pointer(sha256: str, size: int) -> bytes:
    return (
        f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n"
    ).encode()


@dataclass
class HubFile:
    data: bytes
    lfs: bool

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def blob_id(self) -> str:
        """The git blob the repo holds: the LFS pointer for an LFS file, else the bytes."""
        return git_blob_id(lfs_pointer(self.sha256, len(self.data)) if self.lfs else self.data)


@dataclass
class Request:
    method: str
    path: str
    range: str | None
    authorization: str | None


@dataclass
class FakeHub:
    """Serves `files` (repo path -> bytes) as dataset `repo` at one commit (branch `main`)."""

    repo: str
    files: Mapping[str, bytes]
    page_size: int = 40
    token: str | None = None
    drop_once: set[str] = field(default_factory=set)
    drop_always: set[str] = field(default_factory=set)  # cut off mid-body on every GET
    corrupt: set[str] = field(default_factory=set)
    broken: set[str] = field(default_factory=set)
    requests: list[Request] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.entries = {
            path: HubFile(bytes(data), path.lower().endswith(LFS_SUFFIXES))
            for path, data in sorted(self.files.items())
        }
        listing = "\n".join(f"{p} {f.blob_id}" for p, f in self.entries.items())
        self.commit = hashlib.sha1(listing.encode()).hexdigest()
        self.by_sha256 = {f.sha256: p for p, f in self.entries.items() if f.lfs}
        self._dropped: set[str] = set()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # -- lifecycle ------------------------------------------------------------------------
    def __enter__(self) -> FakeHub:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 (http.server API)
                hub._handle(self, head=False)

            def do_HEAD(self) -> None:  # noqa: N802
                hub._handle(self, head=True)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    # -- what tests look at ---------------------------------------------------------------
    def content_gets(self, path: str) -> list[Request]:
        """GETs of a file's bytes (its resolve URL, or its LFS object)."""
        entry = self.entries[path]
        targets = {f"/datasets/{self.repo}/resolve/{self.commit}/{quote(path)}"}
        if entry.lfs:
            targets = {f"/lfs/{entry.sha256}"}
        return [r for r in self.requests if r.method == "GET" and r.path in targets]

    def fetched_paths(self) -> set[str]:
        """Repo paths whose bytes were requested at least once."""
        return {path for path in self.entries if self.content_gets(path)}

    # -- serving --------------------------------------------------------------------------
    def _handle(self, handler: BaseHTTPRequestHandler, head: bool) -> None:
        split = urlsplit(handler.path)
        path = unquote(split.path)
        with self._lock:
            self.requests.append(
                Request(
                    "HEAD" if head else "GET",
                    split.path,
                    handler.headers.get("Range"),
                    handler.headers.get("Authorization"),
                )
            )
        if self.token and handler.headers.get("Authorization") != f"Bearer {self.token}":
            self._reply(handler, 401, b'{"error":"Invalid credentials"}', head, json_body=True)
            return
        api = f"/api/datasets/{self.repo}/"
        resolve = f"/datasets/{self.repo}/resolve/"
        if path.startswith(api + "revision/"):
            self._repo_info(handler, path[len(api + "revision/") :], head)
        elif path.startswith(api + "tree/"):
            self._tree(handler, path[len(api + "tree/") :], parse_qs(split.query), head)
        elif path.startswith(resolve):
            revision, _, repo_path = path[len(resolve) :].partition("/")
            self._resolve(handler, revision, repo_path, head)
        elif path.startswith("/lfs/") and path[5:] in self.by_sha256:
            self._content(handler, self.by_sha256[path[5:]], head)
        elif path.startswith("/api/"):
            self._reply(handler, 404, b'{"error":"Repository not found"}', head, json_body=True,
                        headers={"X-Error-Code": "RepoNotFound"})  # fmt: skip
        else:
            self._reply(handler, 404, b"not found", head)

    def _known_revision(self, handler, revision: str, head: bool) -> bool:
        if revision in ("main", self.commit):
            return True
        self._reply(handler, 404, b'{"error":"Invalid rev id"}', head, json_body=True,
                    headers={"X-Error-Code": "RevisionNotFound"})  # fmt: skip
        return False

    def _repo_info(self, handler, revision: str, head: bool) -> None:
        if not self._known_revision(handler, revision, head):
            return
        info = {
            "_id": "0" * 24,
            "id": self.repo,
            "author": self.repo.split("/")[0],
            "sha": self.commit,
            "private": False,
            "gated": False,
            "disabled": False,
            "tags": ["license:cc-by-4.0"],
            "siblings": [{"rfilename": p} for p in self.entries],
        }
        self._reply(handler, 200, json.dumps(info).encode(), head, json_body=True)

    def _tree(self, handler, rest: str, query: dict, head: bool) -> None:
        revision, _, folder = rest.partition("/")
        if not self._known_revision(handler, revision, head):
            return
        recursive = query.get("recursive", ["False"])[0].lower() == "true"
        entries = self._tree_entries(folder.strip("/"), recursive)
        start = int(query.get("cursor", ["0"])[0])
        page = entries[start : start + self.page_size]
        headers = {}
        if start + self.page_size < len(entries):
            params = f"recursive={query.get('recursive', ['False'])[0]}&expand=False"
            next_url = f"{self.url}{urlsplit(handler.path).path}?{params}"
            headers["Link"] = f'<{next_url}&cursor={start + self.page_size}>; rel="next"'
        self._reply(handler, 200, json.dumps(page).encode(), head, json_body=True, headers=headers)

    def _tree_entries(self, folder: str, recursive: bool) -> list[dict]:
        prefix = f"{folder}/" if folder else ""
        folders: set[str] = set()
        files = []
        for path, entry in self.entries.items():
            if not path.startswith(prefix):
                continue
            rest = path[len(prefix) :].split("/")
            for depth in range(1, len(rest)):
                if recursive or depth == 1:
                    folders.add(prefix + "/".join(rest[:depth]))
            if recursive or len(rest) == 1:
                item = {"type": "file", "oid": entry.blob_id, "size": len(entry.data), "path": path}
                if entry.lfs:
                    pointer = lfs_pointer(entry.sha256, len(entry.data))
                    item["lfs"] = {
                        "oid": entry.sha256,
                        "size": len(entry.data),
                        "pointerSize": len(pointer),
                    }
                files.append(item)
        tree = [{"type": "directory", "oid": "0" * 40, "size": 0, "path": f} for f in folders]
        return sorted(tree + files, key=lambda item: item["path"])

    def _resolve(self, handler, revision: str, repo_path: str, head: bool) -> None:
        if not self._known_revision(handler, revision, head):
            return
        entry = self.entries.get(repo_path)
        if entry is None:
            self._reply(handler, 404, b"Entry not found", head,
                        headers={"X-Error-Code": "EntryNotFound"})  # fmt: skip
            return
        if entry.lfs:
            # The Hub answers an LFS file with a redirect to its CDN and the object's own size
            # and sha256 (the ETag of the resolve URL is the pointer's blob id).
            headers = {
                "Location": f"{self.url}/lfs/{entry.sha256}",
                "X-Linked-Size": str(len(entry.data)),
                "X-Linked-Etag": f'"{entry.sha256}"',
                "ETag": f'"{entry.blob_id}"',
            }
            self._reply(handler, 302, b"", head, headers=headers)
            return
        self._content(handler, repo_path, head)

    def _content(self, handler, repo_path: str, head: bool) -> None:
        entry = self.entries[repo_path]
        data = entry.data
        if repo_path in self.corrupt:
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        if not head and repo_path in self.broken:
            self._reply(handler, 500, b"Internal Error", head)
            return
        etag = entry.sha256 if entry.lfs else entry.blob_id
        status, body, headers = 200, data, {"ETag": f'"{etag}"', "Accept-Ranges": "bytes"}
        wanted = handler.headers.get("Range")
        if wanted and wanted.startswith("bytes="):
            first, _, last = wanted[len("bytes=") :].partition("-")
            start, end = int(first), int(last) if last else len(data) - 1
            status, body = 206, data[start : end + 1]
            headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
        drop = False
        if not head:
            with self._lock:
                drop = repo_path in self.drop_once and repo_path not in self._dropped
                drop = drop or repo_path in self.drop_always
                if drop:
                    self._dropped.add(repo_path)
        if drop:
            # Announce the whole body, send half of it, then hang up.
            self._send_headers(handler, status, len(body), headers)
            handler.wfile.write(body[: len(body) // 2])
            handler.wfile.flush()
            handler.close_connection = True
            handler.connection.shutdown(2)
            return
        self._reply(handler, status, body, head, headers=headers)

    def _reply(self, handler, status: int, body: bytes, head: bool, *, json_body: bool = False,
               headers: Mapping[str, str] | None = None) -> None:  # fmt: skip
        headers = dict(headers or {})
        if json_body:
            headers["Content-Type"] = "application/json"
        self._send_headers(handler, status, len(body), headers)
        if not head:
            handler.wfile.write(body)

    def _send_headers(self, handler, status: int, length: int, headers: Mapping[str, str]) -> None:
        handler.send_response(status)
        handler.send_header("X-Repo-Commit", self.commit)
        handler.send_header("Content-Length", str(length))
        for key, value in headers.items():
            handler.send_header(key, value)
        handler.end_headers()


def card_layout(demo: Path) -> dict[str, bytes]:
    """The demo benchmark laid out as the dataset card shows the release.

    `task_pipeline_data/UAV-DualCog-V1/` becomes `task_data/` (the manifests keep the
    authors' paths, as released); `scene_data/` stays. Beside what evaluation reads, the
    release carries files it never reads: a dataset card, point-cloud maps and review assets
    per scene, which a download must leave on the Hub.
    """
    files: dict[str, bytes] = {}
    task_root = demo / "task_pipeline_data" / "UAV-DualCog-V1"
    for path in sorted(task_root.rglob("*")):
        if path.is_file():
            files["task_data/" + path.relative_to(task_root).as_posix()] = path.read_bytes()
    for path in sorted((demo / "scene_data").rglob("*")):
        if path.is_file():
            files[path.relative_to(demo).as_posix()] = path.read_bytes()
    files["README.md"] = b"---\nlicense: cc-by-4.0\n---\n# UAV-DualCog (test double)\n"
    files[".gitattributes"] = b"*.jpg filter=lfs diff=lfs merge=lfs -text\n"
    for scene in sorted(p.name for p in (demo / "scene_data").iterdir()):
        files[f"scene_data/{scene}/point_cloud/map.ply"] = bytes(range(256)) * 64
        files[f"scene_data/{scene}/review/overview.png"] = b"\x89PNG review " * 100
    return files


def unread_paths(files: Iterable[str]) -> set[str]:
    """Paths of `card_layout` that evaluation never reads."""
    return {
        p
        for p in files
        if p in ("README.md", ".gitattributes")
        or "/point_cloud/" in p
        or "/review/" in p
        or "/experiments/" in p
        or p.endswith("/task_rgb.mp4")
    }


if __name__ == "__main__":
    # Serve the demo in the card's layout until interrupted: `HF_ENDPOINT=<printed url>`.
    import time

    with FakeHub(
        "Lozumi/UAV-DualCog", card_layout(Path(__file__).parents[1] / "resources/demo")
    ) as hub:
        print(f"{hub.url} commit {hub.commit}", flush=True)
        while True:
            time.sleep(3600)
