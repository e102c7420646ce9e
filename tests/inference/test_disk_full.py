"""A full disk: one error naming the file and the free space; no temporary file left behind."""

from __future__ import annotations

import errno
import logging
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from frames import arrow
from PIL import Image

from dualcog import atomic, schemas
from dualcog.inference.cache import CacheWriter, ResponseCache
from dualcog.media.store import ImageSettings, prepare_images
from dualcog.runtime import run_step

PAIRS = pa.schema([("source", pa.string()), ("key", pa.string())])


def _full(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _tmp_files(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.tmp"))


def test_a_full_disk_names_the_file_and_the_free_space_and_leaves_no_temporary(
    tmp_path, monkeypatch
):
    target = tmp_path / "out" / "a.bin"

    def partial_then_full(self, data):
        with open(self, "wb") as handle:
            handle.write(data[:3])  # some bytes reached the disk before it filled
        _full()

    monkeypatch.setattr(Path, "write_bytes", partial_then_full)
    with pytest.raises(atomic.DiskFull) as info:
        atomic.write_bytes(target, b"payload")
    message = str(info.value)
    assert str(target) in message and "MiB free on" in message
    assert "free some space, then run the same command again" in message
    assert info.value.errno == errno.ENOSPC and "\n" not in message
    assert not target.exists() and _tmp_files(tmp_path) == []


@pytest.mark.parametrize(
    "failure",
    [
        OSError(errno.ENOSPC, "No space left on device"),
        OSError(errno.EDQUOT, "Disk quota exceeded"),
        OSError("IOError: error writing: No space left on device. Detail: [errno 28]"),  # Arrow
    ],
)
def test_a_parquet_artifact_on_a_full_disk(tmp_path, monkeypatch, failure):
    def write_then_fail(table, where, **kwargs):
        Path(where).write_bytes(b"PAR1 partial")
        raise failure

    monkeypatch.setattr(pq, "write_table", write_then_fail)
    target = tmp_path / "results" / "metrics.parquet"
    frame = pd.DataFrame({"source": ["a"], "key": ["k"]})
    with pytest.raises(atomic.DiskFull, match=r"no space left writing .*metrics\.parquet"):
        schemas.write_table(frame, PAIRS, target)
    assert _tmp_files(tmp_path) == []


def test_other_write_errors_pass_through_and_still_clean_up(tmp_path, monkeypatch):
    monkeypatch.setattr(Path, "write_bytes", lambda self, data: (self.touch(), 1 / 0))
    with pytest.raises(ZeroDivisionError):
        atomic.write_bytes(tmp_path / "x", b"")
    assert _tmp_files(tmp_path) == []


def test_the_workflow_error_path_prints_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(pq, "write_table", _full)
    log = tmp_path / "job.log"
    target = tmp_path / "t.parquet"

    def main(sm):
        schemas.write_table(pd.DataFrame({"source": [], "key": []}), PAIRS,
                            target)  # fmt: skip

    with pytest.raises(SystemExit) as info:
        run_step(SimpleNamespace(log=[str(log)], rule="score"), main)
    assert info.value.code == 1
    errors = [line for line in log.read_text().splitlines() if " ERROR " in line]
    assert len(errors) == 1 and f"no space left writing {target}" in errors[0]
    assert "Traceback" not in log.read_text()
    logging.getLogger().handlers.clear()


def test_the_response_cache_on_a_full_disk(tmp_path, monkeypatch):
    with ResponseCache(tmp_path / "m" / "t.jsonl") as cache:
        writer = CacheWriter(cache)
        monkeypatch.setattr(os, "write", _full)
        writer.put("k", "s1", {"status": "ok", "raw_text": "A"})
        monkeypatch.undo()
        with pytest.raises(atomic.DiskFull, match=r"no space left writing .*t\.jsonl.*MiB free"):
            writer.close()


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_rerun_removes_what_a_killed_run_left_in_the_media_store(tmp_path):
    store = tmp_path / "store"
    host = atomic.temporary_path(Path("x")).name.rsplit("-", 1)[-1][: -len(".tmp")]
    dead = store / "ab" / f"ab.jpg.{_dead_pid()}-0123456789ab-{host}.tmp"
    legacy = store / "cd" / "cd.mp4.0123456789abcdef0123456789abcdef.tmp"
    live = store / "ef" / f"ef.jpg.{os.getpid()}-0123456789ab-{host}.tmp"
    elsewhere = store / "ef" / "ef.jpg.1-0123456789ab-another-node.tmp"
    for path in (dead, legacy, live, elsewhere):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"partial")
    source = tmp_path / "a.jpg"
    Image.new("RGB", (64, 48), (10, 20, 30)).save(source, format="JPEG")
    messages: list[str] = []
    [prepared] = prepare_images([source], store, ImageSettings(), progress=messages.append)
    assert _tmp_files(store) == sorted([live, elsewhere])  # still being written, maybe
    assert any("removed 2 temporary files" in m for m in messages)
    assert (store / prepared.key[:2] / f"{prepared.key}.jpg").is_file()


def test_a_full_disk_while_preparing_images(tmp_path, monkeypatch):
    source = tmp_path / "a.jpg"
    Image.new("RGB", (64, 48), (10, 20, 30)).save(source, format="JPEG")
    monkeypatch.setattr(Path, "write_bytes", lambda self, data: (self.touch(), _full()))
    with pytest.raises(atomic.DiskFull, match=r"no space left writing .*store.*\.jpg"):
        prepare_images([source], tmp_path / "store", ImageSettings())
    assert _tmp_files(tmp_path) == []


def test_explorer_thumbnails_use_the_atomic_writer(tmp_path, monkeypatch):
    from dualcog.explorer import media as explorer_media

    target = tmp_path / "explorer" / "media" / "thumb.jpg"
    monkeypatch.setattr(Path, "write_bytes", _full)
    with pytest.raises(atomic.DiskFull) as info:
        explorer_media._write(target, b"jpeg bytes")
    assert str(target) in str(info.value) and "MiB free on" in str(info.value)
    assert not target.exists() and _tmp_files(tmp_path) == []


def _tmpfs(folder: Path, size: str) -> bool:
    """Mount (or resize) a tmpfs of `size` at `folder`; False where this machine refuses."""
    folder.mkdir(parents=True, exist_ok=True)
    command = ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)]
    if os.path.ismount(folder):
        command = ["mount", "-o", f"remount,size={size}", str(folder)]
    try:
        return subprocess.run(command, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _capped(limit: int):
    """A child's files can grow to `limit` bytes (a size-capped folder where no tmpfs can be
    mounted: writes past it fail with EFBIG, as past a full disk)."""
    import resource
    import signal

    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


@pytest.mark.integration
def test_a_full_cache_folder_stops_sending_and_the_rerun_resends_only_the_uncached(tmp_path):
    """A real full filesystem under the response cache: the first failed write stops the
    job (one error naming the file); the requests sent are those cached plus at most the
    ones in flight then; the rerun (space freed) sends only what never reached the cache."""
    from loopback_server import LoopbackServer, request_marker
    from test_inference_processes import IMAGE_KEY, base_model, write_inputs

    from dualcog.inference import cache_path, media_path, run_model

    path = media_path(tmp_path / "media", IMAGE_KEY, "image")
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\xff\xd8\xff\xe0jpeg")
    cache = tmp_path / "cache"
    mounted = _tmpfs(cache, "12k")
    code = (
        "import json, sys; from pathlib import Path\n"
        "from dualcog.inference import run_model\n"
        "from dualcog.schemas import read_arrow\n"
        "work = Path(sys.argv[1])\n"
        "model = json.loads((work / 'model.json').read_text())\n"
        "prompts = read_arrow(work / 'prompts.parquet')\n"
        "run_model(model, prompts, None, work / 'media', work / 'cache')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}

    def job(model: dict, prompts: pd.DataFrame) -> str:
        """The job's error ('' when it succeeds): in this process on a real full tmpfs, in
        a process of its own where only a size cap can stand in for one."""
        if mounted or not fill:
            try:
                run_model(model, arrow(prompts), None, tmp_path / "media", cache)
            except OSError as error:
                return str(error)
            return ""
        done = subprocess.run(
            [sys.executable, "-c", code, str(tmp_path)], env=env, capture_output=True,
            timeout=120, preexec_fn=_capped(12 * 1024),
        )  # fmt: skip
        return done.stderr.decode().strip().splitlines()[-1] if done.returncode else ""

    try:
        with LoopbackServer() as server:
            model = base_model(server, concurrency=2)
            prompts = write_inputs(tmp_path, model, 40)
            fill = True
            error = job(model, prompts)
            lines = cache_path(cache, "shared-vlm", "behavior").read_bytes().split(b"\n")
            cached = sum(1 for line in lines if line.endswith(b"}"))
            sent = server.requests
            assert "behavior.jsonl" in error and "\n" not in error, error
            if mounted:
                assert error.startswith("no space left writing"), error
            assert 0 < cached < 40 and sent - cached <= 2, (sent, cached)
            if mounted:
                assert _tmpfs(cache, "1m")
            fill = False
            assert job(model, prompts) == ""
            assert server.requests == 40 + (sent - cached)
            with server.lock:
                assert len({request_marker(b) for b in server.bodies}) == 40
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(cache)], capture_output=True, timeout=30)
