"""One `explorer` job's work in a fresh interpreter, as scripts/explorer.py does it (less the
stamp): read the run's tables, build the records, write the page and chunks. Revisions before
explorer-5 read pandas frames and classify the responses themselves; this follows either.

Run by explorer_scale.py with PYTHONPATH set to the `src/` of the revision measured, so
imports count as they do in a Snakemake job. Prints the process CPU of each phase as JSON.

Usage: python _explorer_job.py INPUTS.json OUT_DIR
"""

import time

_START = time.process_time()

import inspect  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import dualcog.explorer.records as records_module  # noqa: E402
from dualcog.explorer.page import write_explorer  # noqa: E402
from dualcog.explorer.records import MediaIndex, sample_records  # noqa: E402
from dualcog.schemas import read_arrow  # noqa: E402


def _records(inputs: dict) -> list:
    """Read the tables and build the records as the revision's scripts/explorer.py does."""
    if hasattr(MediaIndex, "from_table"):  # explorer-5: Arrow, no pandas, outcome classes read
        import pyarrow as pa

        from dualcog.explorer.records import RESPONSE_COLUMNS, SAMPLE_COLUMNS

        responses = pa.concat_tables(
            [read_arrow(p, columns=list(RESPONSE_COLUMNS)) for p in inputs["responses"]]
        )
        samples = read_arrow(inputs["samples"], columns=list(SAMPLE_COLUMNS))
        columns = {}
        if hasattr(records_module, "FIELD_COLUMNS"):  # explorer-7: only the columns read
            columns = {"parsed": [*records_module.PARSED_COLUMNS, "parse"],
                       "scores": [*records_module.SCORE_COLUMNS, "parse"]}  # fmt: skip
        parsed, scores, media, outcomes = (
            read_arrow(inputs[n], columns=columns.get(n))
            for n in ("parsed", "scores", "media", "outcomes")
        )
        MARKS["read"] = time.process_time()
        index = MediaIndex.from_table(media)
        return sample_records(samples, parsed, scores, responses, index, outcomes)
    import pandas as pd  # earlier revisions: pandas frames, responses classified here

    responses = pd.concat([read_arrow(p).to_pandas() for p in inputs["responses"]],
                          ignore_index=True)  # fmt: skip
    tables = [read_arrow(inputs[n]).to_pandas() for n in ("samples", "parsed", "scores", "media")]
    MARKS["read"] = time.process_time()
    samples, parsed, scores, media = tables
    index = MediaIndex.from_frame(media)
    if "outcomes" in inspect.signature(sample_records).parameters:  # e426011: frames, classes read
        outcomes = read_arrow(inputs["outcomes"]).to_pandas()
        return sample_records(samples, parsed, scores, responses, index, outcomes)
    return sample_records(samples, parsed, scores, responses, index)


MARKS: dict[str, float] = {}


def main() -> None:
    inputs = json.loads(Path(sys.argv[1]).read_text())
    out = Path(sys.argv[2])
    MARKS["imports"] = time.process_time()
    records = _records(inputs)
    MARKS["records"] = time.process_time()
    model = inputs["model"]
    files = write_explorer(model, records, out / f"{model}.html", out / "data" / model,
                           all_models=inputs["all_models"], stamp=None)  # fmt: skip
    MARKS["write"] = time.process_time()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    phases, last = {}, _START
    for name, mark in MARKS.items():
        phases[name] = mark - last
        last = mark
    print(json.dumps({"phases": phases, "process_cpu": usage.ru_utime + usage.ru_stime,
                      "sizes": files.sizes(), "page": str(files.page)}))  # fmt: skip


if __name__ == "__main__":
    main()
