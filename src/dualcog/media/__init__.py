"""Media of the benchmark: the content-addressed store of prepared images and videos
(`store`) and bad media reported by manifest, sample and field (`problems`)."""
