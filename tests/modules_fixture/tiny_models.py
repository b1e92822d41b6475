"""Small native PyTorch modules for the ``benanza torch`` tests (``package.module:factory`` specs:
the tests put this folder on PYTHONPATH)."""
import torch
from torch import nn


class Block(nn.Module):
    """Conv -> BatchNorm -> ReLU, and a second branch with a convolution of the same shape."""

    def __init__(self, c: int):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(c)
        self.relu = nn.ReLU()
        self.side = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x):
        # the side branch runs first: execution order differs from a plain walk of the modules
        s = self.side(x)
        return self.relu(self.bn(self.conv(x))) + s


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.block1 = Block(8)
        self.block2 = Block(8)
        self.head = nn.Linear(8, 10)

    def forward(self, x):
        y = self.block2(self.block1(self.stem(x)))
        return self.head(y.mean(dim=(2, 3)))


def build():
    torch.manual_seed(0)
    return Net().eval()


def example_inputs(batch: int):
    return (torch.randn(batch, 3, 16, 16),)
