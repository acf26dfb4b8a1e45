"""A retriever plug-in example: copy this folder, change the class, register it in retrievers.yaml."""
