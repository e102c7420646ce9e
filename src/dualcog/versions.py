"""Versions of each stage's logic; rules pass them as params, so a bump reruns that stage."""

INGEST_VERSION = "ingest-1"
RENDER_VERSION = "render-1"
PARSER_VERSION = "parse-1"
SCORER_VERSION = "score-2"
TABLES_VERSION = "tables-1"
