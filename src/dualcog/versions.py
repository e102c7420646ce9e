"""Versions of each stage's logic; rules pass them as params, so a bump reruns that stage."""

INGEST_VERSION = "ingest-2"
RENDER_VERSION = "render-1"
PARSER_VERSION = "parse-2"
SCORER_VERSION = "score-2"
TABLES_VERSION = "tables-2"
STATS_VERSION = "stats-1"
PLOTS_VERSION = "plots-1"
