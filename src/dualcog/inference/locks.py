"""`flock` with a readable error where the filesystem does not support it."""

from __future__ import annotations

import errno
import fcntl
from pathlib import Path

from dualcog.errors import DualCogError

UNSUPPORTED = frozenset({errno.ENOLCK, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL})


class LockUnsupported(DualCogError):
    """The cache folder's filesystem cannot lock files, so budgets cannot be shared."""


def flock(fd: int, operation: int, path: Path | str) -> None:
    """`fcntl.flock`; raises `BlockingIOError` for a busy non-blocking lock, as `flock` does."""
    try:
        fcntl.flock(fd, operation)
    except BlockingIOError:
        raise
    except OSError as error:
        if error.errno in UNSUPPORTED:
            raise LockUnsupported(
                f"{path}: file locks (flock) do not work on this filesystem ({error.strerror}); "
                "the response cache and the per-model request budgets need them. Put "
                "`cache_dir` on a local disk or on a shared filesystem with flock (NFSv4, "
                "GPFS, BeeGFS, Lustre mounted with -o flock)."
            ) from None
        raise
