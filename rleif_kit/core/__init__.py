"""Below everything: config and its sections, settings and keys, artifact paths, records, JSONL, run set-up, distributed, launch, plots, reward math."""
