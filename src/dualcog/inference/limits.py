"""Spending limits of one model: `cost_limit` (USD) and `token_limit` (prompt + completion
tokens, reasoning included in completion), shared by all its jobs and kept across reruns.

What a model has spent is never stored as a running total (which could drift after a crash or
a deleted file): it is read from the model's response cache (`<cache_dir>/<model>/*.jsonl`),
whose every line is one reply with the usage the server reported. Each process keeps its own
read position per cache file and reads only what was appended since, under one lock.

What is in flight is reserved before it is sent. Each process holds its reservations in its
own `hold-*.bin` file under `<cache_dir>/<model>/.budget/`, locked (`flock`) while the process
lives; the file also names each request in flight (cache key, sample id, and the size of its
task's cache file when it was reserved), written before the request goes out. A file whose
lock can be taken belongs to a process that died (a `kill -9`, a crash, a full disk): each of
its requests whose cache line was written after its reservation is settled (its usage is in
the cache); any other may have been billed with its answer lost, so its reservation moves to
`lost.jsonl` in the same folder and counts as spent from then on (docs/failures.md says how
to release it once the provider's bill shows what it cost). Requests sent in a batch are not
named: their batch record outlives the process, and the run that resumes it holds them again.
Creating, reading and removing hold files happens under `limit.lock`, so a check sees every
live reservation.

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
use beyond their estimates, whatever is killed when.
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

from dualcog.inference.cache import safe_name
from dualcog.inference.failures import BUDGET_EXHAUSTED
from dualcog.inference.locks import flock
from dualcog.prices import Prices, model_prices

__all__ = ["BUDGET_EXHAUSTED", "Refusal", "SpendLimit", "Spend", "Tally", "CacheLedger"]
_HOLD = struct.Struct("<2d")  # reserved tokens, reserved USD; then the JSON of `_Inflight`s
LOST_FILE = "lost.jsonl"
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


@dataclass(frozen=True)
class Inflight:
    """A request reserved and perhaps sent: its cache line, once written, lies past `since`
    in `<task>.jsonl`."""

    cache_key: str
    sample_id: str
    since: int


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
        self.inflight: dict[Inflight, Spend] = {}  # its named part (requests sent one by one)
        self.lost_seen: tuple[int, Spend] = (-1, Spend())  # lost.jsonl: (size read, sum)

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

    def spent_now(self) -> Spend:
        """The cache's replies plus the reservations of requests lost in flight at a crash."""
        self.ledger.refresh()
        return self.spent(self.ledger.total()) + self.lost()

    def state_text(self) -> str:
        """Each limit with what was spent against it, from the cache as it is now."""
        spent, lost = self.spent_now(), self.lost()
        text = "; ".join(
            f"{name} {(_usd if unit == 'cost' else _tokens)(limit)}: "
            f"{(_usd if unit == 'cost' else _tokens)(getattr(spent, unit))} spent"
            for name, limit, unit in self._limits()
        )
        if lost.tokens or lost.cost:
            text += (
                f" (of it {_tokens(lost.tokens)}, {_usd(lost.cost)} reserved by requests in "
                f"flight at a crash: {self.folder / LOST_FILE})"
            )
        return text

    def lost(self) -> Spend:
        """The sum of `lost.jsonl` (each lost request once, however often it was recorded)."""
        path = self.folder / LOST_FILE
        try:
            if path.stat().st_size == self.lost_seen[0]:  # appended to only: unchanged
                return self.lost_seen[1]
            data = path.read_bytes()
        except FileNotFoundError:
            return Spend()
        seen: dict[tuple[str, str, str], Spend] = {}
        for line in data.split(b"\n"):
            try:
                entry = json.loads(line) if line.strip() else None
            except ValueError:
                entry = None
            if not isinstance(entry, dict):
                continue
            tokens, cost = entry.get("tokens"), entry.get("cost")
            if isinstance(tokens, int | float) and isinstance(cost, int | float):
                ident = (str(entry.get("hold")), str(entry.get("cache_key")),
                         str(entry.get("sample_id")))  # fmt: skip
                seen[ident] = Spend(max(0.0, float(tokens)), max(0.0, float(cost)))
        total = Spend()
        for amount in seen.values():
            total = total + amount
        self.lost_seen = (len(data), total)
        return total

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
                try:
                    if self.inflight:  # sent, never settled (Ctrl-C, an error, a full disk)
                        self._reconcile(self.hold_path, self.hold_fd)
                    self.hold_path.unlink(missing_ok=True)
                except OSError:  # the file stays; the next run reconciles it
                    pass
                os.close(self.hold_fd)
                self.hold_fd = -1
        os.close(self.lock_fd)
        self.lock_fd = -1

    def _locked(self) -> _Lock:
        return _Lock(self.lock_fd, self.folder / "limit.lock")

    def _write_hold(self) -> None:
        # One write (a killed process leaves all of it or none); a longer earlier payload's
        # tail is cut after, and ignored by the reader if a kill comes in between.
        named = [
            [item.cache_key, item.sample_id, item.since, spend.tokens, spend.cost]
            for item, spend in self.inflight.items()
        ]
        payload = json.dumps({"task": self.task, "inflight": named}).encode()
        data = _HOLD.pack(self.held.tokens, self.held.cost) + payload
        os.pwrite(self.hold_fd, data, 0)
        os.ftruncate(self.hold_fd, len(data))

    def _task_file(self, task: str) -> Path:

        return self.ledger.model_dir / f"{safe_name(task)}.jsonl"

    def _answered(self, task: str, items: list[Inflight]) -> set[Inflight]:
        """Those of `items` whose cache line was written after their reservation."""
        if not items:
            return set()
        try:
            with self._task_file(task).open("rb") as handle:
                handle.seek(min(item.since for item in items))
                data = handle.read()
        except FileNotFoundError:
            return set()
        written = set()
        for line in data[: data.rfind(b"\n") + 1].split(b"\n"):
            try:
                entry = json.loads(line) if line.strip() else None
            except ValueError:
                entry = None
            if isinstance(entry, dict):
                written.add((str(entry.get("cache_key")), str(entry.get("sample_id"))))
        return {item for item in items if (item.cache_key, item.sample_id) in written}

    def _reconcile(self, path: Path, fd: int) -> None:
        """A dead process's hold file: its unanswered requests move to `lost.jsonl` (appended
        before the hold file goes, so a kill in between records them twice, counted once)."""
        data = os.pread(fd, os.fstat(fd).st_size, 0)
        try:
            payload, _ = json.JSONDecoder().raw_decode(data[_HOLD.size :].decode())
            task = str(payload["task"])
            named = {
                Inflight(str(key), str(sample), int(since)): Spend(float(tokens), float(cost))
                for key, sample, since, tokens, cost in payload["inflight"]
            }
        except (ValueError, KeyError, TypeError):
            # A file from before names were kept, or cut short: its total, unnamed.
            task, named = "", {}
            if len(data) >= _HOLD.size:
                named = {Inflight("", "", 0): Spend(*_HOLD.unpack(data[: _HOLD.size]))}
        answered = self._answered(task, [item for item in named if item.cache_key])
        lines = [
            json.dumps(
                {
                    "hold": path.name,
                    "task": task,
                    "cache_key": item.cache_key,
                    "sample_id": item.sample_id,
                    "tokens": spend.tokens,
                    "cost": spend.cost,
                }
            )  # fmt: skip
            + "\n"
            for item, spend in named.items()
            if item not in answered and (spend.tokens > 0 or spend.cost > 0)
        ]
        if lines:
            with (self.folder / LOST_FILE).open("a", encoding="utf-8") as handle:
                handle.write("".join(lines))
                handle.flush()
                os.fsync(handle.fileno())
        path.unlink(missing_ok=True)

    def _others(self) -> Spend:
        """Reservations of the other live processes; a dead one's file is reconciled."""
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
                    self._reconcile(path, fd)  # its owner died
            finally:
                os.close(fd)
        return total

    def try_reserve(
        self, cache_key: str | None = None, sample_id: str = ""
    ) -> Spend | Refusal | None:
        """Under the lock: a reservation (now held), a refusal, or None (wait and ask again).
        A request named by `cache_key` is in the hold file before this returns, so a crash
        while it is in flight leaves its reservation counted (see the module doc)."""
        with self._locked():
            others = self._others()  # first: a dead process's lost requests count as spent
            spent = self.spent_now()
            model = self.ledger.total()
            estimate = self.estimate(self.ledger.task(self.task), model)
            decision = self.decide(spent, others + self.held, estimate)
            if isinstance(decision, Spend):
                self.held = self.held + decision
                if cache_key is not None:
                    since = self.ledger.files.get(Path(self._task_file(self.task)).stem)
                    item = Inflight(cache_key, sample_id, since.offset if since else 0)
                    self.inflight[item] = self.inflight.get(item, Spend()) + decision
                self._write_hold()
            return decision

    async def reserve(self, cache_key: str | None = None, sample_id: str = "") -> Spend | Refusal:
        """Wait until a request may go (its reservation) or never will (a `Refusal`)."""
        if not self.active:
            return Spend()
        self.open()
        delay = WAIT_POLL_S
        while (decision := self.try_reserve(cache_key, sample_id)) is None:
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

    def settle(self, reservation: Spend, cache_key: str | None = None, sample_id: str = "") -> None:
        """Give back a reservation: the request's cache line, if any, is written by now."""
        if not self.active or self.lock_fd < 0:
            return
        with self._locked():
            self.held = self.held - reservation
            if cache_key is not None:
                for item in [
                    i for i in self.inflight if (i.cache_key, i.sample_id) == (cache_key, sample_id)
                ]:
                    del self.inflight[item]
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
