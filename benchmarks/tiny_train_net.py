"""A tiny CNN for the training join's recorded test trace (``benchmarks/record_train_trace.py
--spec benchmarks.tiny_train_net:build --input-shape 3x16x16 --device cpu``): Conv -> BatchNorm ->
ReLU -> global average pool -> Flatten -> Linear, 10 classes."""
import torch


def build() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                               torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 10))
