"""Metrics that read the grade itself (graded gain): one module per metric, found by the registry."""
