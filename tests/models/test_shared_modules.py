"""A module, parameter or buffer reachable under several names behaves on CSX as on the CPU
backend (issues 26 and 29): GPT-2's and Llama's `ln_f` is also `transformer_decoder.norm`,
T5 shares one embedding between encoder and decoder. Before the fix, a submodule registered
under two names kept the *traced* (fake) parameters after a CSX step: `state_dict()` returned
FakeTensors and `cstorch.save` failed."""
import pytest
import torch
import torch.nn.functional as F

import cstorch
from cstorch._backend import _reset_backend

STEPS = 4


class Decoder(torch.nn.Module):
    def __init__(self, norm: torch.nn.Module, embedding: torch.nn.Embedding):
        super().__init__()
        self.embed = embedding  # the embedding is shared with the parent
        self.lin = torch.nn.Linear(6, 6)
        self.norm = norm  # the same LayerNorm object as the parent's ln_f
        self.bn = torch.nn.BatchNorm1d(6)


class AliasedNet(torch.nn.Module):
    """ln_f == dec.norm (a module under two names), embed == dec.embed, head.weight is
    embed.weight (a tied parameter held by two modules), and a BatchNorm under two names
    (its running-stat buffers reached twice)."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(10, 6)
        self.ln_f = torch.nn.LayerNorm(6)
        self.dec = Decoder(self.ln_f, self.embed)
        self.bn_alias = self.dec.bn
        self.head = torch.nn.Linear(6, 10, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens):
        h = self.dec.embed(tokens).mean(1)
        h = self.bn_alias(torch.tanh(self.dec.lin(h)))
        return self.head(self.ln_f(h))


def _batches():
    g = torch.Generator().manual_seed(3)
    return [(torch.randint(0, 10, (4, 3), generator=g), torch.randint(0, 10, (4,), generator=g))
            for _ in range(STEPS)]


def train(backend_type, edit=None):
    """STEPS Adam steps; `edit(model)` (if given) runs on the host after step 1."""
    _reset_backend()
    torch.manual_seed(0)
    backend = cstorch.backend(backend_type)
    model = AliasedNet()
    compiled = cstorch.compile(model, backend)
    opt = cstorch.optim.Adam(model.parameters(), lr=0.05)

    @cstorch.trace
    def step(tokens, labels):
        loss = F.cross_entropy(compiled(tokens), labels)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    loader = cstorch.utils.data.DataLoader(_batches)
    for i, batch in enumerate(cstorch.utils.data.DataExecutor(loader, num_steps=STEPS)):
        step(*batch)
        if i == 1 and edit is not None:
            edit(model)
    return model, opt


def _plain(sd):
    return {k: v.detach().clone() for k, v in sd.items()}


@pytest.mark.parametrize("edit", [None, "alias_name"], ids=["no_edit", "host_edit_through_alias"])
def test_aliased_modules_and_tensors_match_the_cpu_backend(edit):
    def through_alias(model):  # an in-place host edit reaching ln_f's weight by its other name
        with torch.no_grad():
            model.dec.norm.weight.mul_(0.5)

    fn = through_alias if edit else None
    csx_model, _ = train("CSX", fn)
    csx = csx_model.state_dict()
    for k, v in csx.items():
        assert type(v) is torch.Tensor or type(v) is torch.nn.Parameter, (k, type(v))
    assert csx_model.ln_f is csx_model.dec.norm and csx_model.head.weight is csx_model.embed.weight
    cpu = train("CPU", fn)[0].state_dict()
    assert csx.keys() == cpu.keys()
    for k in cpu:
        torch.testing.assert_close(csx[k], cpu[k], rtol=1e-5, atol=1e-6, msg=k)
    # the aliases still name one tensor (nothing was untied by the step)
    assert csx["ln_f.weight"].data_ptr() == csx["dec.norm.weight"].data_ptr()
    assert csx["dec.bn.running_mean"].data_ptr() == csx["bn_alias.running_mean"].data_ptr()


def test_aliased_model_saves_and_loads_back(tmp_path):
    model, opt = train("CSX")
    path = tmp_path / "aliased.mdl"
    cstorch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, path)
    loaded = cstorch.load(path)
    expected = _plain(model.state_dict())
    assert loaded["model"].keys() == expected.keys()
    for k, v in expected.items():
        torch.testing.assert_close(torch.as_tensor(loaded["model"][k]), v, rtol=0, atol=0, msg=k)
    # loading it into a fresh model restores every name, aliases included
    fresh = AliasedNet()
    fresh.load_state_dict({k: torch.as_tensor(v) for k, v in loaded["model"].items()})
    for k, v in fresh.state_dict().items():
        torch.testing.assert_close(v, expected[k], rtol=0, atol=0, msg=k)
