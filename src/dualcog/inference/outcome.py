"""Did an inference job get its answers? Transient failures fail the job; permanent ones do not.

A request that still fails after its retries is an error row. What happens next depends on
why it failed:

- transient (`timeout`, `connection`, `bad_response`, `rate_limited`, `http_408`, `http_409`,
  `http_429`, `http_5xx`; `dualcog.inference.failures`, which the engine's retries read too):
  the server may answer next time. More than `max_error_rate` (default 0) of a job's
  requests failing so fails the job *after* the response cache holds every answer that came
  back, so the next plain `snakemake` run reruns the job and sends only the failed requests;
- permanent (any other `http_4xx`, e.g. 400/401/403/404/422, content refusals): sending
  again gives the same answer, so they stay `status=error` rows and the job succeeds;
- `budget_exhausted`: not sent, because the model's `cost_limit` or `token_limit` would be
  passed (dualcog.inference.limits). Any such row fails the job, whatever `max_error_rate`
  says, with a message naming the limit, what was spent, what is unsent and what to type.

Each job of a backend that counts failures writes its outcome beside its cache
(`<cache_dir>/<model>/<task>.outcome.json`) so that the run's final summary (`run_summary`,
called from the Snakefile's `onsuccess` and `onerror`) can name every model with failures, the
count of each error type and what to type.
This module is light on purpose: the Snakefile's process imports it.
"""

from __future__ import annotations

import json
import logging
import math
import sys
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dualcog import atomic
from dualcog.backends import backend_of
from dualcog.config import model_tasks
from dualcog.errors import DualCogError
from dualcog.inference.cache import cache_path, model_cache_dir
from dualcog.inference.failures import BUDGET_EXHAUSTED, is_transient
from dualcog.inference.limits import SpendLimit
from dualcog.sharding import job_labels

CAUSE_CHARS = 300  # of an error message quoted in the job log and the run summary
RERUN_HINT = (
    "run the same snakemake command again: the answers received are cached and only the "
    "failed requests are sent"
)


class InferenceFailed(DualCogError):
    """Transient failures beyond `max_error_rate`: the job fails so that a rerun retries them."""


@dataclass
class JobOutcome:
    model: str
    task: str
    requests: int
    ok: int
    errors: dict[str, int] = field(default_factory=dict)  # error_type -> count
    max_error_rate: float = 0.0
    budget: str = ""  # the model's limits and what was spent, when a limit stopped the job
    # error_type -> its most frequent error message (the cause and the URL of a connection
    # failure), so that the job log and the run summary say what failed where.
    causes: dict[str, str] = field(default_factory=dict)

    @property
    def transient(self) -> int:
        return sum(n for kind, n in self.errors.items() if is_transient(kind))

    @property
    def unsent(self) -> int:
        return self.errors.get(BUDGET_EXHAUSTED, 0)

    @property
    def permanent(self) -> int:
        other = (kind for kind in self.errors if kind != BUDGET_EXHAUSTED)
        return sum(self.errors[kind] for kind in other if not is_transient(kind))

    @property
    def allowed(self) -> int:
        return math.floor(self.max_error_rate * self.requests + 1e-9)

    @property
    def failed(self) -> bool:
        return self.transient > self.allowed or self.unsent > 0

    def budget_message(self) -> str:
        return (
            f"{self.model}/{self.task}: spending limit reached ({self.budget or 'see the log'}): "
            f"{self.unsent} of {self.requests} requests not sent (error_type {BUDGET_EXHAUSTED}); "
            f"the answers received are cached. To continue, raise `cost_limit` / `token_limit` "
            f"for model {self.model!r} (or its route) in your config and run the same snakemake "
            "command again: only the requests not yet answered are sent"
        )

    def failure_message(self) -> str:
        if self.unsent:
            return self.budget_message()
        return (
            f"{self.model}/{self.task}: {self.transient} of {self.requests} requests failed "
            f"after retries ({self.counts_text()}){self._causes_text()}; no responses written "
            "for it, the answers "
            f"received are cached: {RERUN_HINT}"
        )

    def _causes_text(self) -> str:
        found = [self.causes[kind] for kind in sorted(self.causes) if is_transient(kind)]
        return "".join(f": {message}" for message in found[:1])

    def counts_text(self) -> str:
        return ", ".join(f"{kind}: {n}" for kind, n in sorted(self.errors.items()))

    def lines(self) -> list[str]:
        """What the job log and the run summary say about this job (empty when all ok)."""
        if not self.errors:
            return []
        head = (
            f"{self.model}/{self.task}: {self.ok}/{self.requests} ok; errors {self.counts_text()}"
        )
        out = [head]
        out.extend(f"  {kind}: {message}" for kind, message in sorted(self.causes.items()))
        if self.unsent:
            out.append(f"  {self.budget_message()}")
        if self.transient > self.allowed:
            out.append(
                f"  {self.transient} transient failures (more than max_error_rate="
                f"{self.max_error_rate:g} allows: {self.allowed}): the job failed; {RERUN_HINT} "
                f"({self.transient + self.permanent} here). To accept them instead, set "
                f"`max_error_rate` for model {self.model!r} in your config."
            )
        elif self.transient:
            out.append(
                f"  {self.transient} transient failures accepted by max_error_rate="
                f"{self.max_error_rate:g}; they are error rows. To retry them: "
                f"snakemake --forcerun infer (cached answers are not sent again)."
            )
        if self.permanent:
            out.append(
                f"  {self.permanent} permanent failures (the server refused these requests; "
                "see error_message in the responses): kept as error rows, the job succeeded. "
                "Fix the request or the model config, then rerun."
            )
        return out


def assess(
    model: Mapping[str, Any],
    task: str,
    statuses: Iterable[str],
    error_types: Iterable[str | None],
    error_messages: Iterable[str | None] | None = None,
) -> JobOutcome:
    """The outcome of one job from its response rows' `status`, `error_type` and (when given)
    `error_message` columns."""
    statuses = list(statuses)
    kinds = [str(kind or "unknown") for kind in error_types]
    messages = list(error_messages) if error_messages is not None else [None] * len(kinds)
    failed = [
        (kind, message)
        for status, kind, message in zip(statuses, kinds, messages, strict=True)
        if status == "error"
    ]
    counts: Counter[str] = Counter(kind for kind, _ in failed)
    by_kind: dict[str, Counter[str]] = {}
    for kind, message in failed:
        if message and kind != BUDGET_EXHAUSTED:  # a limit's rows: budget_message says it
            by_kind.setdefault(kind, Counter())[message] += 1
    causes = {kind: _shorten(found.most_common(1)[0][0]) for kind, found in by_kind.items()}
    return JobOutcome(
        model=str(model["name"]),
        task=task,
        requests=len(statuses),
        ok=sum(status == "ok" for status in statuses),
        errors=dict(counts),
        max_error_rate=float(model.get("max_error_rate") or 0.0),
        causes=causes,
    )


def _shorten(message: str, limit: int = CAUSE_CHARS) -> str:
    message = " ".join(message.split())  # one line in a log
    return message if len(message) <= limit else message[: limit - 1] + "…"


def _column(responses: Any, name: str) -> list:
    values = responses[name]  # an Arrow column (whose items are Arrow scalars) or a Series
    return values.to_pylist() if hasattr(values, "to_pylist") else list(values)


def _names(responses: Any) -> list[str]:
    names = getattr(responses, "column_names", None)  # an Arrow table; else a pandas frame
    return list(names if names is not None else responses.columns)


def record_outcome(
    model: Mapping[str, Any], task: str, responses: Any, cache_dir: Path | str
) -> JobOutcome | None:
    """For a job of a backend that counts failures: assess its responses (an Arrow table or a
    pandas frame), write the outcome beside the cache and log what failed. The caller raises
    `InferenceFailed` when `outcome.failed`, before writing its output, so that a plain rerun
    retries the failed requests."""

    if not backend_of(model).counts_failures:
        return None

    messages = _column(responses, "error_message") if "error_message" in _names(responses) else None
    outcome = assess(
        model, task, _column(responses, "status"), _column(responses, "error_type"), messages
    )
    if outcome.unsent:
        outcome.budget = SpendLimit(
            model, model_cache_dir(cache_dir, str(model["name"])), task
        ).state_text()
    write_outcome(cache_dir, outcome)
    for line in outcome.lines():
        logging.getLogger("dualcog").warning("%s", line)
    return outcome


def outcome_path(cache_dir: Path | str, model: str, task: str) -> Path:

    return cache_path(cache_dir, model, task).with_suffix(".outcome.json")


def write_outcome(cache_dir: Path | str, outcome: JobOutcome) -> None:
    atomic.write_text(outcome_path(cache_dir, outcome.model, outcome.task),
                      json.dumps(asdict(outcome), indent=1))  # fmt: skip


def read_outcome(path: Path) -> JobOutcome | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return JobOutcome(**data)
    except (OSError, ValueError, TypeError):
        return None


def run_summary(config: Mapping[str, Any]) -> list[str]:
    """Lines naming every (model, task) of the config whose last job had failures."""

    lines: list[str] = []
    for model in config.get("models", []):
        if not backend_of(model).counts_failures:
            continue
        for task in model_tasks(config, model):
            for label in job_labels(model, task):  # the task, or each of its shards
                path = outcome_path(config["cache_dir"], model["name"], label)
                outcome = read_outcome(path) if path.is_file() else None
                if outcome is not None:
                    lines.extend(outcome.lines())
    if lines:
        lines.insert(0, "inference summary (models with failed requests):")
    return lines


def print_run_summary(config: Mapping[str, Any], stream: Any = None) -> None:
    """`run_summary` to stderr; the Snakefile calls it from `onsuccess` and `onerror`."""

    for line in run_summary(config):
        print(line, file=stream or sys.stderr)
