"""Tests of the probing engine and the `hangwatch probe` command, grouped by behaviour."""
