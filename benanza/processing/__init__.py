"""Model processing: ONNX graph -> shape inference, constant folding, batch rebinding -> layers and fusion candidates."""
