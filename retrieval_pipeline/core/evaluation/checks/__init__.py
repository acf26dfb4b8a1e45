"""The checks of an evaluation: each metric's threshold and the drift rule (:mod:`.thresholds`), and the regression
test against the blessed evaluation (:mod:`.regression`). ``defs/checks.py`` shows them as Dagster asset checks."""
