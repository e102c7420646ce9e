"""One `explorer` job's work in a fresh interpreter, as scripts/explorer.py does it (less the
stamp): read the run's tables, build the records, write the page and chunks.

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

import pandas as pd  # noqa: E402

from dualcog.explorer import records as explorer_records  # noqa: E402
from dualcog.explorer.page import write_explorer  # noqa: E402
from dualcog.explorer.records import MediaIndex, sample_records  # noqa: E402
from dualcog.schemas import read_arrow, read_frame  # noqa: E402


def main() -> None:
    inputs = json.loads(Path(sys.argv[1]).read_text())
    out = Path(sys.argv[2])
    marks = {"imports": time.process_time()}
    # Since explorer-5 the job reads only the response columns a card shows.
    columns = getattr(explorer_records, "RESPONSE_COLUMNS", None)
    responses = pd.concat(
        [read_arrow(p, columns=list(columns) if columns else None).to_pandas()
         for p in inputs["responses"]],
        ignore_index=True,
    )  # fmt: skip
    tables = [read_frame(inputs[name]) for name in ("samples", "parsed", "scores", "media")]
    marks["read"] = time.process_time()
    samples, parsed, scores, media = tables
    index = MediaIndex.from_frame(media)
    if "outcomes" in inspect.signature(sample_records).parameters:  # since explorer-5
        outcomes = read_frame(inputs["outcomes"])
        records = sample_records(samples, parsed, scores, responses, index, outcomes)
    else:  # an older revision classifies the responses itself
        records = sample_records(samples, parsed, scores, responses, index)
    marks["records"] = time.process_time()
    model = inputs["model"]
    files = write_explorer(model, records, out / f"{model}.html", out / "data" / model,
                           all_models=inputs["all_models"], stamp=None)  # fmt: skip
    marks["write"] = time.process_time()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    phases, last = {}, _START
    for name, mark in marks.items():
        phases[name] = mark - last
        last = mark
    print(json.dumps({"phases": phases, "process_cpu": usage.ru_utime + usage.ru_stime,
                      "sizes": files.sizes(), "page": str(files.page)}))  # fmt: skip


if __name__ == "__main__":
    main()
