"""`torch.compiler.nested_compile_region` in a captured step: the marked function runs
inline, as in eager torch (the capture used to end in a RecursionError)."""
from __future__ import annotations

import importlib

import torch

from train_script import assert_close_rel, train


class _Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    @torch.compiler.nested_compile_region
    def forward(self, x):
        return x + torch.tanh(self.lin(x))


class _Stack(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(_Block() for _ in range(3))
        self.head = torch.nn.Linear(8, 3)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def test_marked_blocks_train_on_csx_as_on_cpu():
    torch.manual_seed(0)
    model = _Stack()
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(4, 8, generator=g), torch.randint(0, 3, (4,), generator=g)) for _ in range(3)]
    csx_losses, csx_model, _, _ = train("CSX", model, batches, "adamw")
    cpu_losses, cpu_model, _, _ = train("CPU", model, batches, "adamw")
    assert_close_rel(csx_losses, cpu_losses, rel=1e-5, what="losses")
    for name, want in cpu_model.items():
        assert_close_rel(csx_model[name], want, rel=1e-5, what=name)
    # and the marker is torch's own again once the capture is over
    marker = importlib.import_module("torch._higher_order_ops.invoke_subgraph").invoke_subgraph_placeholder
    assert marker.__module__ == "torch._higher_order_ops.invoke_subgraph"
