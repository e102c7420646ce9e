"""Versions of each stage's logic; rules pass them as params, so a bump reruns that stage."""

PROTOCOL_REVISION = "2.3"  # revision of the evaluation contract implemented (docs/protocol.md)

INGEST_VERSION = "ingest-3"
RENDER_VERSION = "render-2"
# parse 3: the run file counts the audit's stages; a facts file beside the outcome classes
PARSER_VERSION = "parse-3"
SCORER_VERSION = "score-2"
# tables 3: usage table, outcome shares in the audit; 4: cached tokens, refusal texts
TABLES_VERSION = "tables-4"
STATS_VERSION = "stats-1"
# plots 2: the PNG's tight crop for the SVG too (its page differs by fractions of a point)
PLOTS_VERSION = "plots-2"
EXPLORER_VERSION = "explorer-8"  # 3: request-outcome filter; 4: thumbnails from the sources;
# 5: a refusal text makes a sample refused, bilinear thumbnails, outcome classes read from
# the parse step; 6: chunks carry records, the page draws the cards; 7: the samples' cards
# written once (explorer_samples), a model's chunks carry only its records; 8: video grids
# decoded without H.264's deblocking filter on non-key frames
