"""The assets, one module per stage of the graph; each module's name is its asset group (``trends``: ``metric_trends``)."""
