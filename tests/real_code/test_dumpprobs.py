"""`DumpProbs`, a Trainer callback from rahuls-cerebras/modelzoo (see dumpprobs/README.md),
runs unmodified inside cstorch's Trainer on CSX and on the CPU backend.

It asks the model for logits through `on_before_forward`'s kwargs, then hands the logits,
input ids and attention mask of every step to a method decorated with
`@cstorch.step_closure`, which writes the per-token log-probabilities of the input ids
to `ref_rollouts.npz` in the working directory."""
import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import cstorch
from cstorch.trainer import Trainer
from cstorch.trainer.callbacks import TrainingLoop

from .support import assert_close_relative, load_vendored

dumpprobs = load_vendored("dumpprobs/dumpprobs.py")
VOCAB, LENGTH, SAMPLES = 11, 5, 16


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, 8)
        self.head = nn.Linear(8, VOCAB)

    def forward(self, batch, output_logits=False):
        logits = self.head(torch.tanh(self.embedding(batch["input_ids"])))
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), batch["labels"][:, 1:].reshape(-1).long())
        return {"loss": loss, "logits": logits} if output_logits else loss


def _data():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, VOCAB, (SAMPLES, LENGTH), generator=g, dtype=torch.int32)
    mask = (torch.rand(SAMPLES, LENGTH, generator=g) > 0.2).to(torch.int32)
    return ids, mask


def _loader():
    ids, mask = _data()

    def input_fn():
        rows = [{"input_ids": ids[i], "attention_mask": mask[i], "labels": ids[i]} for i in range(SAMPLES)]
        return torch.utils.data.DataLoader(rows, batch_size=4)

    return cstorch.utils.data.DataLoader(input_fn)


def _run(tmp_path, monkeypatch, device):
    workdir = tmp_path / device
    workdir.mkdir()
    monkeypatch.chdir(workdir)  # the callback writes to the working directory
    callback = dumpprobs.DumpProbs()
    trainer = Trainer(device=device, model_dir=str(workdir / "model"), model=TinyLM, seed=1,
                      optimizer=lambda m: cstorch.optim.SGD(m.parameters(), lr=0.5),
                      loop=TrainingLoop(max_steps=2), callbacks=[callback], loggers=[])
    trainer.fit(_loader())
    assert len(callback.results) == 2 * 4  # the training steps' samples, one row each
    callback.results.clear()
    trainer.validate(_loader())
    cstorch._backend._reset_backend()
    return np.load(workdir / "ref_rollouts.npz")["first"], trainer.model


@pytest.mark.slow
def test_dumpprobs_writes_the_log_probs_of_the_trained_model_csx_equals_cpu(tmp_path, monkeypatch):
    ids, mask = _data()
    trained = {}
    for device in ("CSX", "CPU"):
        rollouts, model = _run(tmp_path, monkeypatch, device)
        with torch.no_grad():  # closed form: log-softmax of the final model's logits at the input ids
            logits = model({"input_ids": ids, "labels": ids}, output_logits=True)["logits"]
            expected = torch.log_softmax(logits, -1).gather(-1, ids.long().unsqueeze(-1)).squeeze(-1) * mask
        assert rollouts.shape == (SAMPLES, LENGTH)
        np.testing.assert_allclose(rollouts, expected.numpy(), rtol=1e-5, atol=1e-6)
        trained[device] = {k: v.detach().clone() for k, v in model.state_dict().items()}
    assert_close_relative(trained["CSX"], trained["CPU"])
