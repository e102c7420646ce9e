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

# The bootstrap's replicate weights (`dualcog.stats.clusters.replicate_weights`), drawn once
# per workflow run: one row per replicate, how often each cluster is drawn (clusters in
# `Clusters.ids` order). The schema metadata holds the modality group sizes and the seed.
REPLICATE_WEIGHTS = pa.schema([("counts", pa.list_(pa.uint16()))])
