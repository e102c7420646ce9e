"""Progress lines of a running job: done/total, counts, rate and ETA."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from dualcog.console import format_duration

ProgressFn = Callable[[str], None]


class ProgressReporter:
    """Reports done/total, ok/error/cached counts, rate and ETA every `every_s` seconds (and
    every `every_fraction` of the work) and at the end.

    `label` (e.g. `model/task`) starts each line once; callers pass a plain sink such as
    `logging.info`, not one that adds its own prefix.
    """

    def __init__(
        self,
        label: str,
        total: int,
        progress: ProgressFn | None,
        every_fraction: float = 1.0,
        every_s: float = 30.0,  # a line per job every 30 s keeps a 45-model console short
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self.total = total
        self.progress = progress
        self.step = max(1, math.ceil(total * every_fraction))
        self.every_s = every_s
        self.clock = clock
        self.started = clock()
        self.last_report = self.started
        self.next_count = self.step
        self.done = self.ok = self.errors = self.cached = 0
        self.last_reported_done = -1

    def restart(self) -> None:
        """Start the clock of the rate and ETA now (after start-up work)."""
        self.started = self.last_report = self.clock()

    def message(self, text: str) -> None:
        if self.progress is not None:
            self.progress(f"{self.label}: {text}")

    def add(self, status: str, cached: bool = False) -> None:
        self.done += 1
        self.ok += status == "ok"
        self.errors += status == "error"
        self.cached += cached
        if self.progress is None or cached:  # cached rows are summed up in one message
            return
        now = self.clock()
        if self.done >= self.next_count or now - self.last_report >= self.every_s:
            self.report(now)
            while self.next_count <= self.done:
                self.next_count += self.step

    def tick(self) -> None:
        """Report if `every_s` passed without a report (called by a timer while waiting)."""
        now = self.clock()
        if now - self.last_report >= self.every_s:
            self.report(now)

    def finish(self) -> None:
        if self.done != self.last_reported_done:
            self.report()

    def report(self, now: float | None = None) -> None:
        now = self.clock() if now is None else now
        self.last_report = now
        self.last_reported_done = self.done
        elapsed = max(now - self.started, 1e-9)
        sent = self.done - self.cached
        rate = sent / elapsed
        remaining = self.total - self.done
        if remaining == 0:
            eta = "0s"
        elif rate > 0:
            eta = format_duration(remaining / rate)
        else:
            # Nothing answered yet: the model's other jobs hold its shared requests budget.
            model = self.label.split("/")[0]
            self.message(
                f"{self.done}/{self.total} done, waiting for {model}'s shared concurrency slot "
                f"(or its first reply), elapsed {format_duration(elapsed)}"
            )
            return
        self.message(
            f"{self.done}/{self.total} done, ok={self.ok}, errors={self.errors}, "
            f"cached={self.cached}, {rate:.2f} req/s, ETA {eta}, elapsed {format_duration(elapsed)}"
        )
