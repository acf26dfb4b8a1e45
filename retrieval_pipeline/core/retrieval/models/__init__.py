"""Models behind the dense and rerank kinds: where a model comes from (sources, split packages), the encoders and
scorers, the ONNX int8 backend, devices, and the embedding cache."""
