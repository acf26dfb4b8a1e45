"""LLM providers for the pipeline: remote OpenAI-compatible endpoints and a local llama.cpp server."""
