"""Arrow schema of the confidence-interval tables (pyarrow only, cheap to import)."""

import pyarrow as pa

CONFIDENCE_INTERVALS = pa.schema(
    [
        ("model", pa.string()),
        ("task", pa.string()),
        ("parse", pa.string()),
        ("stratum", pa.string()),
        ("metric", pa.string()),
        ("value", pa.float64()),  # the metric as in metrics.parquet
        ("ci_low", pa.float64()),  # percentile interval of the replicates
        ("ci_high", pa.float64()),
        ("n_clusters", pa.int64()),  # clusters holding part of the metric's population
        ("n_boot", pa.int64()),  # replicates in which the metric is defined
        ("seed", pa.int64()),
        ("level", pa.float64()),
    ]
)
