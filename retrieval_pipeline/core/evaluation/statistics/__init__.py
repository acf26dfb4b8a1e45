"""Uncertainty and significance over queries: bootstrap CIs and randomisation tests (:mod:`.stats`), the significance
table against the baseline (:mod:`.significance`), every retriever against every other (:mod:`.pairwise`)."""
