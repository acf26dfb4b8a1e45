"""Worked examples users copy: ``retriever_plugin`` is a retriever of your own behind ``kind: python``."""
