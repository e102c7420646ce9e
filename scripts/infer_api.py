"""Snakemake adapter: every API run's (run, task) units in one job, each provider's side by
side within its caps (dualcog.inference.by_provider)."""

from collections import Counter
from pathlib import Path

from dualcog.backends import backend_of
from dualcog.config import model_by_name
from dualcog.inference import run_model
from dualcog.inference.by_provider import run_by_provider
from dualcog.inference.outcome import InferenceFailed, record_outcome
from dualcog.media.store import require_prepared
from dualcog.runtime import log, progress_logger, run_step, thread_log
from dualcog.schemas import RESPONSES, read_arrow, rows_of_tasks, write_table


def main(sm):
    config = sm.config  # validated, defaults and routes filled, when the Snakefile was read
    plan = sm.params.plan  # [{run, task, provider, prompts, output}], runs interleaved
    store, cache_dir = Path(sm.params.media_store), Path(sm.params.cache_dir)
    prompts = {path: read_arrow(path) for path in dict.fromkeys(u["prompts"] for u in plan)}
    samples = read_arrow(sm.input.samples)
    by_task = {task: rows_of_tasks(samples, [task]) for task in {u["task"] for u in plan}}
    for path, table in prompts.items():
        if any(backend_of(model_by_name(config, u["run"])).sends_media
               for u in plan if u["prompts"] == path):  # fmt: skip
            keys = [k for ks in table.column("media_keys").to_pylist() for k in ks or ()]
            kinds = [k for ks in table.column("media_kinds").to_pylist() for k in ks or ()]
            require_prepared(store, keys, kinds)
    log.info(
        "%d runs, %d (run, task) units; units at once per provider: %s, in all: %s",
        len({u["run"] for u in plan}), len(plan),
        {p: "no cap" if c is None else c for p, c in sm.params.caps.items()},
        "no cap" if sm.params.total is None else sm.params.total,
    )  # fmt: skip

    def answer(unit):
        # Each unit's lines also go to the log its own job would have written.
        with thread_log(unit["log"]):
            model = model_by_name(config, unit["run"])
            table = prompts[unit["prompts"]]
            log.info("%s on %s: %d requests (backend %s)", unit["run"], unit["task"],
                     len(table), model["backend"])  # fmt: skip
            responses = run_model(
                model, table, by_task[unit["task"]], store, cache_dir, progress=progress_logger()
            )
            statuses = Counter(responses.column("status").to_pylist())
            log.info("status counts: %s", dict(statuses.most_common()))
            outcome = record_outcome(model, unit["task"], responses, sm.params.cache_dir)
            if outcome is not None and outcome.failed:
                log.error("%s", outcome.failure_message())
                raise InferenceFailed(outcome.failure_message())
            write_table(responses, RESPONSES, unit["output"])

    results = run_by_provider(
        plan, lambda u: u["provider"], answer, sm.params.caps, sm.params.total
    )
    failed = []
    for unit, result in zip(plan, results, strict=True):
        if isinstance(result, InferenceFailed):
            log.error("%s on %s: %s", unit["run"], unit["task"], result)
            failed.append(f"{unit['run']}/{unit['task']}: {result}")
        elif isinstance(result, BaseException):
            log.error("%s on %s failed", unit["run"], unit["task"], exc_info=result)
            failed.append(f"{unit['run']}/{unit['task']}: {result}")
    if failed:
        # Every answer received is cached: a rerun sends only what failed.
        raise InferenceFailed("; ".join(failed))


run_step(snakemake, main)  # noqa: F821
