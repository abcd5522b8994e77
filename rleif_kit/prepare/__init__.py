"""Stage 00: the base model, the data step (everything later stages read, built from the user's raw GSM8k / MATH /
open-domain data) and the endpoint check, in ``run_prepare``."""
