"""Fine-tuning on one corpus: training pairs mined from the corpus alone (BM25 hard negatives), the bi-encoder's
and the cross-encoder's training loops, and the fine-tuned models the dense and rerank kinds name."""
