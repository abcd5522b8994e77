"""Below everything: the config (one module), settings and keys, artifact paths, records, JSONL, run set-up,
distributed, launch, plots, metrics, the reward formula's parser."""
