"""Spending limits of one model: `cost_limit` (USD) and `token_limit` (prompt + completion
tokens, reasoning included in completion), shared by all its jobs and kept across reruns.

What a model has spent is never stored as a running total (which could drift after a crash or
a deleted file): it is read from the model's response cache (`<cache_dir>/<model>/*.jsonl`),
whose every line is one reply with the usage the server reported. Each process keeps its own
read position per cache file and reads only what was appended since, under one lock.

What is in flight is reserved before it is sent. Each process holds its reservations in its
own `hold-*.bin` file under `<cache_dir>/<model>/.budget/`, locked (`flock`) while the process
lives: a file whose lock can be taken belongs to a process that died, so its reservations
are dropped, never leaked. Creating, reading and removing hold files happens under
`limit.lock` in the same folder, so a check sees every live reservation.

A request is sent when `spent + reserved + its estimate` stays within every limit; it waits
while only reservations of requests in flight stand in the way (they may settle lower), and
it is refused (a `budget_exhausted` error row) once `spent + its estimate` alone would pass.
Its estimate, in order: `estimated_tokens_per_request` (priced at the dearer of the input and
output prices), the mean usage of this task's replies in the cache, the mean of the model's
other replies; with none of these the request reserves all that is left, so the first
request of a model goes out alone and measures the size of the next ones. A reply settles its
reservation once its cache line is written (its real usage is then read from the cache). A
reply without reported usage counts as one estimate (`max_tokens` completion tokens when
nothing else is known). A limit can therefore be passed only by what the requests in flight
use beyond their estimates.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import struct
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dualcog.inference.failures import BUDGET_EXHAUSTED
from dualcog.inference.locks import flock
from dualcog.prices import Prices, model_prices

__all__ = ["BUDGET_EXHAUSTED", "Refusal", "SpendLimit", "Spend", "Tally", "CacheLedger"]
_HOLD = struct.Struct("<2d")  # reserved tokens, reserved USD
WAIT_POLL_S = 0.01
DEFAULT_MAX_TOKENS = 2048  # the schema's default of `max_tokens`


@dataclass(frozen=True)
class Spend:
    """An amount in both units a limit counts: tokens and US dollars."""

    tokens: float = 0.0
    cost: float = 0.0

    def __add__(self, other: Spend) -> Spend:
        return Spend(self.tokens + other.tokens, self.cost + other.cost)

    def __sub__(self, other: Spend) -> Spend:
        return Spend(self.tokens - other.tokens, self.cost - other.cost)


@dataclass
class Tally:
    """Usage of cache lines: replies with reported usage, their token sums, and the ok
    replies that reported none."""

    replies: int = 0
    prompt: int = 0
    completion: int = 0
    cached: int = 0
    unreported: int = 0

    def add(self, entry: Mapping[str, Any]) -> None:
        prompt = _count(entry.get("prompt_tokens"))
        completion = _count(entry.get("completion_tokens"))
        if prompt is None and completion is None:
            if entry.get("status") == "ok":
                self.unreported += 1
            return
        self.replies += 1
        self.prompt += prompt or 0
        self.completion += completion or 0
        self.cached += _count(entry.get("cached_tokens")) or 0

    def merged(self, other: Tally) -> Tally:
        return Tally(
            self.replies + other.replies,
            self.prompt + other.prompt,
            self.completion + other.completion,
            self.cached + other.cached,
            self.unreported + other.unreported,
        )


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


@dataclass
class _FileTail:
    offset: int = 0
    tally: Tally = field(default_factory=Tally)


class CacheLedger:
    """The usage recorded in a model's cache files, read incrementally (complete lines only:
    a line being written, or torn by a killed writer, is read once it is whole)."""

    def __init__(self, model_dir: Path) -> None:
        self.model_dir = Path(model_dir)
        self.files: dict[str, _FileTail] = {}

    def refresh(self) -> None:
        if not self.model_dir.is_dir():
            return
        for path in sorted(self.model_dir.glob("*.jsonl")):
            tail = self.files.setdefault(path.stem, _FileTail())
            try:
                with path.open("rb") as handle:
                    size = os.fstat(handle.fileno()).st_size
                    if size < tail.offset:  # the file was replaced: count it afresh
                        self.files[path.stem] = tail = _FileTail()
                    handle.seek(tail.offset)
                    data = handle.read(size - tail.offset)
            except FileNotFoundError:
                continue
            end = data.rfind(b"\n") + 1
            for line in data[:end].split(b"\n"):
                try:
                    entry = json.loads(line) if line.strip() else None
                except ValueError:  # unreadable lines are skipped by the cache too
                    entry = None
                if isinstance(entry, dict):
                    tail.tally.add(entry)
            tail.offset += end

    def task(self, task: str) -> Tally:
        from dualcog.inference.cache import safe_name

        tail = self.files.get(safe_name(task))
        return tail.tally if tail is not None else Tally()

    def total(self) -> Tally:
        out = Tally()
        for tail in self.files.values():
            out = out.merged(tail.tally)
        return out


@dataclass(frozen=True)
class Refusal:
    """Why a request is not sent: the limit it would pass, what was spent, its estimate."""

    limit: str  # "cost_limit" or "token_limit"
    text: str


class SpendLimit:
    """`cost_limit` and `token_limit` of one model entry, for one task's requests.

    Inactive (every method a no-op) when neither limit is set.
    """

    def __init__(self, model: Mapping[str, Any], model_dir: Path, task: str) -> None:
        self.name = str(model.get("name"))
        self.task = task
        cost_limit, token_limit = model.get("cost_limit"), model.get("token_limit")
        self.cost_limit = None if cost_limit is None else float(cost_limit)
        self.token_limit = None if token_limit is None else float(token_limit)
        self.prices: Prices | None = model_prices(model)
        if self.cost_limit is not None and self.prices is None:
            raise ValueError(f"model {self.name!r}: cost_limit needs prices")
        configured = model.get("estimated_tokens_per_request")
        self.configured = None if configured is None else float(configured)
        self.max_tokens = float(model.get("max_tokens") or DEFAULT_MAX_TOKENS)
        self.active = self.cost_limit is not None or self.token_limit is not None
        self.ledger = CacheLedger(model_dir)
        self.folder = Path(model_dir) / ".budget"
        self.lock_fd = self.hold_fd = -1
        self.hold_path: Path | None = None
        self.held = Spend()  # what this process has reserved

    # -- arithmetic (no files) ---------------------------------------------------------------

    def cost_of(self, prompt: float, completion: float, cached: float = 0.0) -> float:
        return self.prices.cost(prompt, completion, cached) if self.prices is not None else 0.0

    def estimate(self, task: Tally, model: Tally) -> Spend | None:
        """One request's expected usage; None when nothing is known (see the module doc)."""
        if self.configured is not None:
            dearer = max(self.prices.input, self.prices.output) if self.prices else 0.0
            return Spend(self.configured, self.configured * dearer / 1e6)
        for tally in (task, model):
            if tally.replies:
                n = tally.replies
                return Spend(
                    (tally.prompt + tally.completion) / n,
                    self.cost_of(tally.prompt / n, tally.completion / n, tally.cached / n),
                )
        return None

    def spent(self, model: Tally) -> Spend:
        """What the replies of `model` cost; an unreported reply counts as one estimate."""
        reported = Spend(
            model.prompt + model.completion,
            self.cost_of(model.prompt, model.completion, model.cached),
        )
        if not model.unreported:
            return reported
        each = self.estimate(Tally(), model) or Spend(
            self.max_tokens, self.cost_of(0.0, self.max_tokens)
        )
        return reported + Spend(each.tokens * model.unreported, each.cost * model.unreported)

    def _limits(self) -> list[tuple[str, float, str]]:
        out = []
        if self.cost_limit is not None:
            out.append(("cost_limit", self.cost_limit, "cost"))
        if self.token_limit is not None:
            out.append(("token_limit", self.token_limit, "tokens"))
        return out

    def decide(
        self, spent: Spend, reserved: Spend, estimate: Spend | None
    ) -> Spend | Refusal | None:
        """The reservation to take, a `Refusal`, or None: wait for reservations to settle."""
        if estimate is None:
            # Nothing known about a request's size: it goes alone and takes what is left.
            if any(getattr(spent, unit) >= limit for _, limit, unit in self._limits()):
                return self._refusal(spent, None)
            if reserved.tokens > 0 or reserved.cost > 0:
                return None
            return Spend(
                max(0.0, (self.token_limit or 0.0) - spent.tokens),
                max(0.0, (self.cost_limit or 0.0) - spent.cost),
            )
        if any(getattr(spent + estimate, unit) > limit for _, limit, unit in self._limits()):
            return self._refusal(spent, estimate)
        total = spent + reserved + estimate
        if any(getattr(total, unit) > limit for _, limit, unit in self._limits()):
            return None
        return estimate

    def _refusal(self, spent: Spend, estimate: Spend | None) -> Refusal:
        for name, limit, unit in self._limits():
            value = getattr(spent + (estimate or Spend()), unit)
            if value > limit or (estimate is None and getattr(spent, unit) >= limit):
                return Refusal(name, self._text(name, limit, unit, spent, estimate))
        raise AssertionError("no limit passed")  # pragma: no cover

    def _text(
        self, name: str, limit: float, unit: str, spent: Spend, estimate: Spend | None
    ) -> str:
        show = _usd if unit == "cost" else _tokens
        next_one = f"the next request (~{show(getattr(estimate, unit))})" if estimate else "more"
        return (
            f"not sent: {next_one} would pass {name} {show(limit)} of model {self.name} "
            f"({show(getattr(spent, unit))} spent)"
        )

    def state_text(self) -> str:
        """Each limit with what was spent against it, from the cache as it is now."""
        self.ledger.refresh()
        spent = self.spent(self.ledger.total())
        return "; ".join(
            f"{name} {(_usd if unit == 'cost' else _tokens)(limit)}: "
            f"{(_usd if unit == 'cost' else _tokens)(getattr(spent, unit))} spent"
            for name, limit, unit in self._limits()
        )

    # -- shared state ------------------------------------------------------------------------

    def open(self) -> None:
        if not self.active or self.lock_fd >= 0:
            return
        # The cache read so far, outside the lock (seconds for a paper-scale cache, once):
        # the checks under the lock then read only what was appended since.
        self.ledger.refresh()
        self.folder.mkdir(parents=True, exist_ok=True)
        self.lock_fd = os.open(self.folder / "limit.lock", os.O_RDWR | os.O_CREAT, 0o644)
        with self._locked():
            self.hold_path = self.folder / f"hold-{os.getpid()}-{uuid.uuid4().hex[:8]}.bin"
            self.hold_fd = os.open(self.hold_path, os.O_RDWR | os.O_CREAT, 0o644)
            flock(self.hold_fd, fcntl.LOCK_EX, self.hold_path)
            self._write_hold()

    def close(self) -> None:
        if self.lock_fd < 0:
            return
        with self._locked():
            if self.hold_fd >= 0 and self.hold_path is not None:
                self.hold_path.unlink(missing_ok=True)
                os.close(self.hold_fd)
                self.hold_fd = -1
        os.close(self.lock_fd)
        self.lock_fd = -1

    def _locked(self) -> _Lock:
        return _Lock(self.lock_fd, self.folder / "limit.lock")

    def _write_hold(self) -> None:
        os.pwrite(self.hold_fd, _HOLD.pack(self.held.tokens, self.held.cost), 0)

    def _others(self) -> Spend:
        """Reservations of the other live processes; a dead one's file is removed."""
        total = Spend()
        for path in self.folder.glob("hold-*.bin"):
            if path == self.hold_path:
                continue
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                try:
                    flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, path)
                except BlockingIOError:  # its owner lives: its reservations count
                    data = os.pread(fd, _HOLD.size, 0)
                    if len(data) == _HOLD.size:
                        total = total + Spend(*_HOLD.unpack(data))
                else:
                    path.unlink(missing_ok=True)  # its owner died
            finally:
                os.close(fd)
        return total

    def try_reserve(self) -> Spend | Refusal | None:
        """Under the lock: a reservation (now held), a refusal, or None (wait and ask again)."""
        with self._locked():
            self.ledger.refresh()
            model = self.ledger.total()
            spent = self.spent(model)
            estimate = self.estimate(self.ledger.task(self.task), model)
            decision = self.decide(spent, self._others() + self.held, estimate)
            if isinstance(decision, Spend):
                self.held = self.held + decision
                self._write_hold()
            return decision

    async def reserve(self) -> Spend | Refusal:
        """Wait until a request may go (its reservation) or never will (a `Refusal`)."""
        if not self.active:
            return Spend()
        self.open()
        delay = WAIT_POLL_S
        while (decision := self.try_reserve()) is None:
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.2)
        return decision

    def hold(self, count: int) -> Spend:
        """Hold `count` requests' estimate without a check: requests already sent (a batch
        resumed after a kill), whose cost counts against every later request."""
        if not self.active or count <= 0:
            return Spend()
        self.open()
        with self._locked():
            self.ledger.refresh()
            model = self.ledger.total()
            each = self.estimate(self.ledger.task(self.task), model) or Spend(
                self.max_tokens, self.cost_of(0.0, self.max_tokens)
            )
            held = Spend(each.tokens * count, each.cost * count)
            self.held = self.held + held
            self._write_hold()
        return held

    def settle(self, reservation: Spend) -> None:
        """Give back a reservation: the request's cache line, if any, is written by now."""
        if not self.active or self.lock_fd < 0:
            return
        with self._locked():
            self.held = self.held - reservation
            self._write_hold()


class _Lock:
    def __init__(self, fd: int, path: Path) -> None:
        self.fd, self.path = fd, path

    def __enter__(self) -> None:
        flock(self.fd, fcntl.LOCK_EX, self.path)

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)


def _usd(value: float) -> str:
    return f"${value:,.4f}"


def _tokens(value: float) -> str:
    return f"{value:,.0f} tokens"
