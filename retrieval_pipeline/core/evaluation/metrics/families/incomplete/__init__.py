"""Metrics for incomplete judgements, that tell judged from unjudged documents: one module per metric, found by the registry."""
