"""Stage 02: exact / MinHash / semantic dedup, decontamination and the SFT data file."""
