"""Runs the porting guide's examples (guide_training.py, guide_evaluation.py) with their
fill-ins, and the model, data and eager-torch reference they are checked against."""
from __future__ import annotations

import gc
import os
import pathlib

import torch

import cstorch.legacy18
from cstorch._backend import _reset_backend

HERE = pathlib.Path(__file__).parent
FEATURES, CLASSES, BATCH_SIZE = 8, 4, 8
LEARNING_RATE = {"scheduler": "Linear", "initial_learning_rate": 0.05, "end_learning_rate": 0.01, "total_iters": 50}


class Classifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(FEATURES, 16), torch.nn.Tanh(), torch.nn.Linear(16, CLASSES))

    def forward(self, x):
        return self.body(x)


def dataset(batches: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batches * BATCH_SIZE, FEATURES, generator=g)
    return x, (x[:, :CLASSES].argmax(-1) + (torch.rand(len(x), generator=g) < 0.2).long()) % CLASSES


TRAIN = dataset(300, seed=1)
EVAL = dataset(100, seed=2)


def _loader(data, batch_size: int, first_batch: int = 0):
    x, y = data
    start = first_batch * batch_size
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x[start:], y[start:]), batch_size=batch_size,
                                       shuffle=False, drop_last=True)


def train_dataloader_fn(batch_size: int, first_batch: int = 0):
    """The training batches in order, from batch `first_batch` on."""
    return _loader(TRAIN, batch_size, first_batch)


def eval_dataloader_fn(batch_size: int):
    return _loader(EVAL, batch_size)


#: the names guide_training.py / guide_evaluation.py take from the test
FILL_INS = {
    "MGMT_ADDRESS": "localhost:9000",
    "MODEL_DIR": "./",
    "Classifier": Classifier,
    "LEARNING_RATE": LEARNING_RATE,
    "loss_scale": "dynamic",
    "checkpoint_path": None,
    "train_dataloader_fn": train_dataloader_fn,
    "eval_dataloader_fn": eval_dataloader_fn,
    "BATCH_SIZE": BATCH_SIZE,
}


def run_example(name: str, device: str, workdir, **fill) -> dict:
    """Run example `name` as a fresh 1.8 script (new configuration and backend) in
    `workdir` on "CSX" (as written: backend="wse_ws") or "CPU" (backend="cpu"); returns
    its global namespace."""
    _reset_backend()
    cstorch.legacy18._reset()
    gc.collect()
    source = (HERE / name).read_text()
    if device == "CPU":
        assert source.count('backend="wse_ws"') == 1
        source = source.replace('backend="wse_ws"', 'backend="cpu"')
    namespace = {"__name__": "__guide__", **FILL_INS, **fill}
    os.makedirs(workdir, exist_ok=True)
    cwd = os.getcwd()
    os.chdir(workdir)
    torch.manual_seed(0)  # the model's initial weights
    try:
        exec(compile(source, str(HERE / name), "exec"), namespace)
    finally:
        os.chdir(cwd)
    return namespace


def parameters(model: torch.nn.Module) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def eager_training(steps: int) -> list[dict]:
    """The training example in eager torch: SGD(momentum 0.9) at the scheduler's first
    rate (the example never steps the scheduler), gradients clipped to norm 1 (the
    dynamic loss scale, 2**15 throughout, scales exactly). Parameters after each step."""
    torch.manual_seed(0)
    model = Classifier()
    opt = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE["initial_learning_rate"], momentum=0.9)
    history = []
    for x, y in list(train_dataloader_fn(BATCH_SIZE))[:steps]:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        history.append(parameters(model))
    return history
