"""Stage 00's data step: everything later stages read, built from the user's raw GSM8k / MATH / open-domain data."""
