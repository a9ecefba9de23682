"""The model's machinery: ONNX Runtime sessions and the LLM's kernels, the forward, the
unmasking loop, the codec, a request's plan and prompt."""
