"""Proposed corrections for Ambiguous and Incorrect verdicts, each re-verified."""
