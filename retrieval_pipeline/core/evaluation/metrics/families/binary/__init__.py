"""Metrics that read relevance as yes or no (``grade >= 1``): one module per metric, found by the registry."""
