"""The part of the Trainer that third-party Model Zoo callbacks lean on, used the way
such callbacks use it, each result checked against eager torch or a hand count:

- `setup(trainer)` sees the built `trainer.model` (names, sizes, `requires_grad`) and
  `trainer.log_metrics(name=value)` there logs at step 0: a pandas DataFrame reaches the
  loggers as it is and TensorBoard as a GitHub Markdown table, an int as a float;
- `on_save_checkpoint(trainer, state_dict)` may rewrite `__metadata__`, which is what the
  file then holds; `on_load_checkpoint(trainer, state_dict)` of a trainer that autoloads
  the latest checkpoint gets it back, may pop it, and may set attributes on the trainer;
  a callback that never calls `Callback.__init__` is fine;
- `on_before_forward(trainer, model, batch, args, kwargs)` adds keyword arguments to the
  model's call, `on_after_forward(trainer, model, outputs, batch)` sees the outputs dict,
  and a `@cstorch.step_closure` method of the callback gets each step's logits and batch
  tensors as host tensors (dtypes kept), in training and in validation.

Each runs on CSX (the compiled step) and on the CPU backend (eager)."""
from __future__ import annotations

import copy
import re

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from tensorboard.backend.event_processing import event_accumulator

import cstorch
from cstorch.trainer import Trainer
from cstorch.trainer.callbacks import Callback, Checkpoint, Logger, TensorBoardLogger, TrainingLoop

DEVICES = ["CSX", "CPU"]


# -- a model with a frozen parameter and `layers.<i>.` names -----------------------------------
class Scorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(5, 12), nn.Linear(12, 4)])
        self.temperature = nn.Parameter(torch.tensor(2.0), requires_grad=False)

    def forward(self, batch):
        x, y = batch
        return F.cross_entropy(self.layers[1](torch.tanh(self.layers[0](x))) / self.temperature, y)


BATCHES, BATCH = 4, 6


def scorer_batches(seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    x, y = torch.randn(BATCHES * BATCH, 5, generator=g), torch.randint(0, 4, (BATCHES * BATCH,), generator=g)
    return [(x[i:i + BATCH], y[i:i + BATCH]) for i in range(0, len(x), BATCH)]


def scorer_loader():
    batches = scorer_batches()
    return cstorch.utils.data.DataLoader(lambda: torch.utils.data.DataLoader(batches, batch_size=None))


def trainable_sgd(model):
    return cstorch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.2, momentum=0.5)


class Collect(Logger):
    def __init__(self):
        self.logged = []

    def log_metrics(self, metrics, step):
        self.logged.append((step, dict(metrics)))


# -- 1. setup(trainer) and log_metrics with a DataFrame -----------------------------------------
class ParameterTable(Callback):
    """Counts `trainer.model`'s parameters at setup, grouping names by regex rewrites."""

    def __init__(self, rewrites):
        self.rewrites = [(re.compile(pattern), replacement) for pattern, replacement in rewrites]

    def setup(self, trainer):
        import pandas as pd

        self.total = self.trainable = 0
        groups: dict[str, int] = {}
        for name, param in trainer.model.named_parameters():
            self.total += param.numel()
            if not param.requires_grad:
                continue
            self.trainable += param.numel()
            for pattern, replacement in self.rewrites:
                name = pattern.sub(replacement, name, count=1)
            groups[name] = groups.get(name, 0) + param.numel()
        share = [100.0 * n / self.total for n in groups.values()]
        self.table = pd.DataFrame({"group": list(groups), "count": list(groups.values()), "share": share})
        trainer.log_metrics(parameter_groups=self.table, trainable_parameters=self.trainable)


@pytest.mark.parametrize("device", DEVICES)
def test_setup_hook_counts_the_model_and_logs_a_dataframe(tmp_path, device):
    pytest.importorskip("pandas")
    pytest.importorskip("tabulate")
    table, collect = ParameterTable([(r"layers\.\d+\.", "layers.*.")]), Collect()
    trainer = Trainer(device=device, model_dir=str(tmp_path), model=Scorer, optimizer=trainable_sgd, seed=0,
                      loop=TrainingLoop(max_steps=1), callbacks=[table], loggers=[collect, TensorBoardLogger()])
    trainer.fit(scorer_loader())

    # by hand: Linear(5, 12) + Linear(12, 4) trainable, one frozen scalar
    assert (table.total, table.trainable) == (5 * 12 + 12 + 12 * 4 + 4 + 1, 5 * 12 + 12 + 12 * 4 + 4)
    assert table.table["group"].tolist() == ["layers.*.weight", "layers.*.bias"]
    assert table.table["count"].tolist() == [5 * 12 + 12 * 4, 12 + 4]
    [(step, logged)] = [(s, m) for s, m in collect.logged if "parameter_groups" in m]
    assert step == 0
    assert logged["parameter_groups"] is table.table  # DataFrames reach the loggers as they are
    assert logged["trainable_parameters"] == 124.0 and isinstance(logged["trainable_parameters"], float)

    events = event_accumulator.EventAccumulator(str(trainer.summary_dir), size_guidance={"tensors": 0, "scalars": 0})
    events.Reload()
    [text] = events.Tensors("parameter_groups/text_summary")
    assert text.step == 0
    assert text.tensor_proto.string_val[0].decode() == table.table.to_markdown(tablefmt="github")
    assert [(e.step, e.value) for e in events.Scalars("trainable_parameters")] == [(0, 124.0)]


# -- 2. on_save_checkpoint / on_load_checkpoint with __metadata__ -------------------------------
class RunRecord(Callback):
    """Writes the run's config into every checkpoint's `__metadata__`; on load, pops it
    and keeps it as `trainer.metadata`. (No `super().__init__()`, on purpose.)"""

    def __init__(self, config):
        self.config = config
        self.seen_on_load = None

    def on_save_checkpoint(self, trainer, state_dict):
        assert state_dict["global_step"] in (2, 4)  # the checkpoint's own step, not the loop's
        state_dict["__metadata__"] = [{"version": cstorch.__version__, "model_name": type(trainer.model).__name__,
                                       "params": self.config}]

    def on_load_checkpoint(self, trainer, state_dict):
        self.seen_on_load = sorted(state_dict)
        trainer.metadata = state_dict.pop("__metadata__", None)


def eager_scorer_training(model, steps):
    """The same steps in plain torch: torch.optim.SGD on the trainable parameters."""
    model = copy.deepcopy(model)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.2, momentum=0.5)
    for x, y in scorer_batches()[:steps]:
        opt.zero_grad()
        model((x, y)).backward()
        opt.step()
    return model.state_dict()


def assert_state_close(got, want, rtol=1e-5):
    assert list(got) == list(want)
    for name in want:
        a, b = torch.as_tensor(got[name]).double(), want[name].double()
        scale = max(b.abs().max().item(), 1e-12)
        assert (a - b).abs().max().item() <= rtol * scale, name


@pytest.mark.parametrize("device", DEVICES)
def test_checkpoint_hooks_write_and_read_back_metadata(tmp_path, device):
    config = {"trainer": {"init": {"seed": 3, "device": device}}, "tags": ["a", "b"]}
    torch.manual_seed(5)
    model = Scorer()
    initial = copy.deepcopy(model)
    record = RunRecord(config)
    trainer = Trainer(device=device, model_dir=str(tmp_path), model=model, optimizer=trainable_sgd, seed=3,
                      loop=TrainingLoop(max_steps=4), checkpoint=Checkpoint(steps=2), callbacks=[record], loggers=[])
    trainer.fit(scorer_loader())
    assert record.seen_on_load is None and not hasattr(trainer, "metadata")  # nothing to load on a fresh dir

    expected = [{"version": cstorch.__version__, "model_name": "Scorer", "params": config}]
    saved = trainer.checkpoint.checkpoints()
    assert [step for step, _ in saved] == [2, 4]
    for step, path in saved:
        state = cstorch.load(str(path))
        assert state["__metadata__"] == expected and int(state["global_step"]) == step
        assert_state_close(state["model"], eager_scorer_training(initial, step))
    cstorch._backend._reset_backend()

    # a new trainer on the same model_dir autoloads step 4 and hands its state to the callback
    again = RunRecord({"other": True})
    resumed = Trainer(device=device, model_dir=str(tmp_path), model=copy.deepcopy(initial), optimizer=trainable_sgd,
                      seed=3, loop=TrainingLoop(max_steps=4), checkpoint=Checkpoint(steps=2), callbacks=[again],
                      loggers=[])
    resumed.fit(scorer_loader())
    assert resumed.metadata == expected  # the file's, not the new callback's config
    assert "__metadata__" in again.seen_on_load and "model" in again.seen_on_load
    assert resumed.global_step == 4
    assert_state_close(resumed.model.state_dict(), eager_scorer_training(initial, 4))


# -- 3. forward kwargs, outputs and a step-closure method -------------------------------------
VOCAB, LENGTH, ROWS, ROWS_PER_BATCH = 9, 6, 12, 3


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 8)
        self.out = nn.Linear(8, VOCAB)

    def forward(self, batch, return_logits=False):
        logits = self.out(torch.tanh(self.embed(batch["ids"])))
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), batch["ids"][:, 1:].reshape(-1).long())
        return {"loss": loss, "logits": logits} if return_logits else loss


def lm_rows():
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(0, VOCAB, (ROWS, LENGTH), generator=g, dtype=torch.int32)
    mask = (torch.rand(ROWS, LENGTH, generator=g) > 0.3).to(torch.int32)
    return ids, mask


def lm_loader():
    ids, mask = lm_rows()
    samples = [{"ids": ids[i], "mask": mask[i]} for i in range(ROWS)]
    return cstorch.utils.data.DataLoader(lambda: torch.utils.data.DataLoader(samples, batch_size=ROWS_PER_BATCH))


class TokenLogProbs(Callback):
    """Asks the model for its logits and keeps, per step, the masked log-probability of
    each input token (computed on the host, in a step closure)."""

    def __init__(self):
        self.steps: list[torch.Tensor] = []
        self.dtypes = set()

    def on_before_forward(self, trainer, model, batch, args, kwargs):
        kwargs["return_logits"] = True

    def on_after_forward(self, trainer, model, outputs, batch):
        self.collect(logits=outputs["logits"].to(torch.float32), ids=batch["ids"], mask=batch["mask"])

    @cstorch.step_closure
    def collect(self, logits, ids, mask):
        self.dtypes.add((type(logits), logits.dtype, ids.dtype, mask.dtype))
        picked = torch.log_softmax(logits, dim=-1).gather(-1, ids.to(torch.int64)[..., None])[..., 0]
        self.steps.append(picked * mask)


def eager_log_probs(model, ids, mask):
    with torch.no_grad():
        logits = model({"ids": ids}, return_logits=True)["logits"]
    return torch.log_softmax(logits, -1).gather(-1, ids.long()[..., None])[..., 0] * mask


@pytest.mark.parametrize("device", DEVICES)
def test_forward_hooks_and_a_step_closure_method_see_each_steps_logits(tmp_path, device):
    ids, mask = lm_rows()
    torch.manual_seed(7)
    model = TinyLM()
    reference = copy.deepcopy(model)
    probe = TokenLogProbs()
    trainer = Trainer(device=device, model_dir=str(tmp_path), model=model, seed=1,
                      optimizer=lambda m: cstorch.optim.SGD(m.parameters(), lr=0.5),
                      loop=TrainingLoop(max_steps=2), callbacks=[probe], loggers=[])
    trainer.fit(lm_loader())

    # training: step k's logits are those of the weights before its update (eager SGD)
    opt = torch.optim.SGD(reference.parameters(), lr=0.5)
    assert len(probe.steps) == 2
    for k in range(2):
        rows = slice(k * ROWS_PER_BATCH, (k + 1) * ROWS_PER_BATCH)
        torch.testing.assert_close(probe.steps[k], eager_log_probs(reference, ids[rows], mask[rows]),
                                   rtol=1e-5, atol=1e-6)
        opt.zero_grad()
        reference({"ids": ids[rows]}).backward()
        opt.step()
    assert probe.dtypes == {(torch.Tensor, torch.float32, torch.int32, torch.int32)}

    # validation of every batch with the trained weights
    probe.steps.clear()
    trainer.validate(lm_loader())
    assert len(probe.steps) == ROWS // ROWS_PER_BATCH
    torch.testing.assert_close(torch.cat(probe.steps), eager_log_probs(reference, ids, mask), rtol=1e-5, atol=1e-6)
    assert (torch.cat(probe.steps)[mask == 0] == 0).all() and (torch.cat(probe.steps)[mask == 1] < 0).all()
