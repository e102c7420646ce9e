"""Atomic file writes: a temporary file beside the target, renamed over it when complete.

A failed write removes its temporary file; a full disk (or quota) becomes one `DiskFull` error
naming the file, the free space and what to do. The temporary name carries the host and the
process id, so a later run can tell a file left by a killed writer (`remove_stale_temporaries`)
from one another process is still writing.
"""

from __future__ import annotations

import errno
import os
import shutil
import socket
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from dualcog.errors import DualCogError

TMP_SUFFIX = ".tmp"
_NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})


class DiskFull(DualCogError, OSError):
    """No space left where a result is written: free space, then rerun."""


def _host() -> str:
    return socket.gethostname().replace(".", "_") or "host"


# The most `temporary_path` adds to a name: ".", a pid (Linux: at most 7 digits), "-", 12 hex
# digits, "-", a host name (HOST_NAME_MAX: 64) and ".tmp".
TEMPORARY_NAME_EXTRA = 1 + 7 + 1 + 12 + 1 + 64 + len(TMP_SUFFIX)


def temporary_path(path: Path) -> Path:
    """`<name>.<pid>-<random>-<host>.tmp` beside `path` (unique per writer)."""
    return path.with_name(f"{path.name}.{os.getpid()}-{uuid.uuid4().hex[:12]}-{_host()}.tmp")


def free_space_text(path: Path) -> str:
    folder = path if path.is_dir() else path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return "free space unknown"
    return f"{free / 2**20:.1f} MiB free on {folder}"


def is_disk_full(error: BaseException) -> bool:
    # Arrow's IO errors carry no errno, only the system's message.
    return isinstance(error, OSError) and (
        error.errno in _NO_SPACE or "No space left on device" in str(error)
    )


def disk_full(path: Path, error: OSError) -> DiskFull:
    full = DiskFull(
        f"no space left writing {path} ({free_space_text(path)}): "
        "free some space, then run the same command again"
    )
    full.errno = error.errno or errno.ENOSPC
    return full


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path to write; on success it replaces `path`, on failure it is gone."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_path(path)
    try:
        yield tmp
        tmp.replace(path)
    except BaseException as error:
        tmp.unlink(missing_ok=True)
        if is_disk_full(error):
            raise disk_full(path, error) from None  # type: ignore[arg-type]
        raise


def write_bytes(path: str | Path, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def write_text(path: str | Path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def write_with(path: str | Path, write: Callable[[Path], object]) -> None:
    """`write(tmp)` (e.g. a Parquet writer), then the rename."""
    with atomic_path(path) as tmp:
        write(tmp)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temporaries(folder: str | Path) -> int:
    """Remove `*.tmp` files under `folder` left by dead writers of this host; return how many.

    A temporary file of a live process, or of another host (a cluster node sharing the
    folder), is kept: it may still be renamed into place.
    """
    host = _host()
    removed = 0
    for tmp in Path(folder).rglob(f"*{TMP_SUFFIX}"):
        owner = tmp.name[: -len(TMP_SUFFIX)].rsplit(".", 1)[-1].split("-", 2)
        live = len(owner) == 3 and owner[0].isdigit()
        if live and (owner[2] != host or _pid_alive(int(owner[0]))):
            continue  # another host's writer, or a live one
        # else: the older naming (no host or pid); only a killed run leaves these behind
        tmp.unlink(missing_ok=True)
        removed += 1
    return removed
