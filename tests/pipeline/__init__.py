"""Tests of the PySpark side (`hangwatch_pipeline`), grouped by behaviour."""
