"""Per-option evidence into a verdict on the question, and the cache of verdicts."""
