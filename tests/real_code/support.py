"""What the real-code tests share: loading a vendored file as a module, a small model and
seeded data for the Trainer runs, and the parameter comparison CSX vs CPU."""
from __future__ import annotations

import importlib.util
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import cstorch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def load_vendored(relpath: str):
    """Import `tests/real_code/<relpath>` as a module of its own file name (unmodified)."""
    name = os.path.splitext(os.path.basename(relpath))[0]
    spec = importlib.util.spec_from_file_location(f"real_code_{name}", os.path.join(HERE, relpath))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class Classifier(nn.Module):
    """forward((x, y)) -> cross-entropy; `layers.N.` names like Model Zoo models."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(6, 16), nn.Linear(16, 3)])

    def forward(self, batch):
        x, y = batch
        return F.cross_entropy(self.layers[1](torch.relu(self.layers[0](x))), y)


def classifier_loader(n: int = 32, batch_size: int = 8, seed: int = 0) -> cstorch.utils.data.DataLoader:
    g = torch.Generator().manual_seed(seed)
    x, y = torch.randn(n, 6, generator=g), torch.randint(0, 3, (n,), generator=g)

    def input_fn():
        return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=batch_size,
                                           drop_last=True)

    return cstorch.utils.data.DataLoader(input_fn)


def sgd(model):
    return cstorch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


def assert_close_relative(csx: dict, cpu: dict, rtol: float = 1e-5) -> None:
    """Every tensor of `csx` equals `cpu`'s within `rtol` of the tensor's largest value."""
    assert csx.keys() == cpu.keys()
    for name in csx:
        a, b = torch.as_tensor(csx[name]).double(), torch.as_tensor(cpu[name]).double()
        scale = max(b.abs().max().item(), 1e-12)
        err = (a - b).abs().max().item() / scale
        assert err <= rtol, f"{name}: CSX and CPU differ by {err:.3g} (relative)"
