"""Snakemake adapter: one model run's raw responses -> strict/compatible/legacy parses, each
sample's request outcome class (read by the explorer and the tables), and the response rows
without their texts (the usage table's, the mode check's and the run summary's facts)."""

import json

import pyarrow as pa
import pyarrow.parquet as pq

from dualcog.outcomes import (
    OUTCOME_COLUMNS,
    request_outcomes,
    response_facts_table,
    text_flags,
)
from dualcog.parsing import parse_run
from dualcog.parsing.sources import STATUS_FIELDS
from dualcog.runtime import log, run_step
from dualcog.schemas import (
    PARSED,
    REQUEST_OUTCOMES,
    RESPONSE_FACTS,
    read_arrow,
    rows_of_tasks,
    write_table,
)

# The columns the parser reads: the samples' nested media / gold columns and the responses'
# bookkeeping are never converted. Arrow in and out.
SAMPLE_COLUMNS = ["sample_id", "task", "options"]
RESPONSE_COLUMNS = ["sample_id", "task", "raw_text", *STATUS_FIELDS]


def _present(path, wanted):
    """The `wanted` columns the file has, in its order (older files may lack some)."""
    return [name for name in pq.read_schema(path).names if name in wanted]


def main(sm):
    wanted = set(RESPONSE_COLUMNS) | set(OUTCOME_COLUMNS) | set(RESPONSE_FACTS.names)
    wanted |= {"reasoning_text"}  # for the facts' has_reasoning flag
    table = pa.concat_tables(
        [read_arrow(p, columns=_present(p, wanted)) for p in sm.input.responses]
    )
    responses = table.select([c for c in RESPONSE_COLUMNS if c in table.column_names])
    samples = read_arrow(sm.input.samples, columns=SAMPLE_COLUMNS)
    answered = set(responses.column("task").to_pylist())
    samples = rows_of_tasks(samples, answered)
    parsed, run = parse_run(samples, responses, sm.params.bbox_scale)
    run = {"model": sm.wildcards.model, **run}
    log.info("run scale: %s; stages: %s", run.get("scale"), run["stage_counts"])
    write_table(parsed, PARSED, sm.output.parsed)
    flags = text_flags(table)  # read by both files below: computed once
    write_table(request_outcomes(table, parsed, flags), REQUEST_OUTCOMES, sm.output.outcomes)
    write_table(response_facts_table(table, flags), RESPONSE_FACTS, sm.output.facts)
    with open(sm.output.run, "w", encoding="utf-8") as handle:
        json.dump(run, handle, indent=2, sort_keys=True, default=str)


run_step(snakemake, main)  # noqa: F821
