"""One model run's responses -> its parses, request outcomes, response facts, per-sample
scores, metrics and the metrics' cluster-bootstrap intervals, in Arrow.

Parsing and scoring a run take a fraction of a CPU second; a job each would cost more in
start-up than in work. So one job per run does both (rule `score`, and for runs answered one
job per run, the job that answers them too: docs/decisions.md, "Uncertainty"), through
`evaluate_run`.
The files stay separate artifacts (`ScoredRunPaths`): the explorer, the tables and the
collectors read them as before.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dualcog.outcomes import OUTCOME_COLUMNS, request_outcomes, response_facts_table, text_flags
from dualcog.parsing import parse_run_table
from dualcog.parsing.sources import STATUS_FIELDS
from dualcog.schemas import (
    METRICS,
    PARSED,
    REQUEST_OUTCOMES,
    RESPONSE_FACTS,
    read_arrow,
    write_table,
)
from dualcog.scoring import SCORED_SAMPLE_COLUMNS, SCORES, model_metrics_table, score_tables
from dualcog.stats import (
    CONFIDENCE_INTERVALS,
    BootstrapSettings,
    build_clusters,
    model_intervals_table,
    weights_from_table,
)
from dualcog.stats.clusters import CLUSTER_COLUMNS

log = logging.getLogger(__name__)

# What the parser reads of a response row: the texts and their status.
PARSED_RESPONSE_COLUMNS = ["sample_id", "task", "raw_text", *STATUS_FIELDS]
# What parsing, scoring and the clusters read of the samples: not their prompts and media
# lists (most of the file's bytes).
SAMPLE_COLUMNS = list(dict.fromkeys(["sample_id", "task", "options", *SCORED_SAMPLE_COLUMNS,
                                     *CLUSTER_COLUMNS]))  # fmt: skip
# Every response column a scored run reads: the parser's, the outcome classes' and the
# facts' (the texts' reasoning flag included).
RESPONSE_COLUMNS = list(dict.fromkeys([*PARSED_RESPONSE_COLUMNS, *OUTCOME_COLUMNS,
                                       *RESPONSE_FACTS.names, "reasoning_text"]))  # fmt: skip


@dataclass(frozen=True)
class ScoredRunPaths:
    """Where a scored run's artifacts go (the `score` rule's outputs)."""

    parsed: str
    run: str
    outcomes: str
    facts: str
    scores: str
    metrics: str
    intervals: str

    @classmethod
    def of(cls, outputs: Any) -> ScoredRunPaths:
        """The paths of a job's named outputs (Snakemake's `output`, or any object with
        these attributes)."""
        return cls(**{field.name: str(getattr(outputs, field.name)) for field in fields(cls)})


@dataclass(frozen=True)
class ScoredRun:
    parsed: pa.Table  # PARSED
    run: dict[str, Any]  # the run's scale record and parse-stage counts
    outcomes: pa.Table  # REQUEST_OUTCOMES
    facts: pa.Table  # RESPONSE_FACTS
    scores: pa.Table  # SCORES
    metrics: pa.Table  # METRICS
    intervals: pa.Table  # CONFIDENCE_INTERVALS


def read_responses(paths: Sequence[str | Path]) -> pa.Table:
    """A run's RESPONSES files, the columns a scored run reads (older files may lack some)."""
    wanted = set(RESPONSE_COLUMNS)
    return pa.concat_tables(
        [read_arrow(p, columns=[n for n in pq.read_schema(p).names if n in wanted]) for p in paths]
    )


def evaluate_run(
    model: str,
    responses: pa.Table,
    samples: pa.Table,
    pairs: pa.Table,
    weights: pa.Table,
    bootstrap: Mapping[str, Any],
    bbox_scale: str | None = None,
) -> ScoredRun:
    """Parse, classify and score one run's responses against the whole benchmark's `samples`
    (its SAMPLE_COLUMNS at least): metrics on the tasks the run answered, bootstrap clusters
    of the whole benchmark (every run draws the same replicates from `weights`)."""
    answered = pc.unique(responses.column("task"))
    run_samples = samples.filter(pc.is_in(samples.column("task"), value_set=answered))
    parser_input = responses.select(
        [c for c in PARSED_RESPONSE_COLUMNS if c in responses.column_names]
    )
    parsed, run = parse_run_table(
        run_samples.select(["sample_id", "task", "options"]), parser_input, bbox_scale
    )
    flags = text_flags(responses)  # read by both the outcomes and the facts: computed once
    outcomes = request_outcomes(responses, parsed, flags)
    facts = response_facts_table(responses, flags)

    scores, metrics, intervals = score_parsed(model, parsed, samples, pairs, weights, bootstrap)
    return ScoredRun(parsed, {"model": model, **run}, outcomes, facts, scores, metrics, intervals)


def score_parsed(
    model: str,
    parsed: pa.Table,
    samples: pa.Table,
    pairs: pa.Table,
    weights: pa.Table,
    bootstrap: Mapping[str, Any],
) -> tuple[pa.Table, pa.Table, pa.Table]:
    """A run's PARSED rows -> its SCORES, METRICS and CONFIDENCE_INTERVALS: metrics on the
    tasks parsed, bootstrap clusters of the whole benchmark's `samples`."""
    run_samples = samples.filter(
        pc.is_in(samples.column("task"), value_set=pc.unique(parsed.column("task")))
    )
    scores = score_tables(run_samples, parsed)
    tasks = pc.unique(run_samples.column("task")).to_pylist()
    metrics = model_metrics_table(model, tasks, scores, pairs)
    settings = BootstrapSettings.from_config(bootstrap)
    clusters = build_clusters(samples.select(CLUSTER_COLUMNS))
    replicates = weights_from_table(weights, clusters, settings.replicates, settings.seed)
    intervals = model_intervals_table(model, scores, metrics, clusters, settings, pairs, replicates)
    return scores, metrics, intervals


def write_scored_run(scored: ScoredRun, paths: ScoredRunPaths) -> None:
    log.info("run scale: %s; stages: %s", scored.run.get("scale"), scored.run["stage_counts"])
    log.info("%d metric rows, %d intervals", scored.metrics.num_rows, scored.intervals.num_rows)
    write_table(scored.parsed, PARSED, paths.parsed)
    write_table(scored.outcomes, REQUEST_OUTCOMES, paths.outcomes)
    write_table(scored.facts, RESPONSE_FACTS, paths.facts)
    write_table(scored.scores, SCORES, paths.scores)
    write_table(scored.metrics, METRICS, paths.metrics)
    write_table(scored.intervals, CONFIDENCE_INTERVALS, paths.intervals)
    with open(paths.run, "w", encoding="utf-8") as handle:
        json.dump(scored.run, handle, indent=2, sort_keys=True, default=str)
