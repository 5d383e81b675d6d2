"""The development model's pipeline: a tool-retrieval fine-tuning of a model2vec model (README.md)."""
