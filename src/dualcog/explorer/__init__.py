"""Per-sample explorer: HTML pages showing why a model got each sample right or wrong."""
