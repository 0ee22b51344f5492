"""Issue gate: MLP, CNN (conv, max-pool, BatchNorm with running stats) and a GPT-style
decoder train 20 steps on CSX and give the same losses, parameters, buffers and
optimizer state as the same script on the CPU backend (eager torch), within 1e-5."""
import pytest
import torch

from benchmarks.models import CNN, GPT, MLP
from train_script import assert_close_rel, train

STEPS = 20


def _teacher_batches(shape, classes=10):
    """Inputs with labels from a fixed random linear teacher (a learnable task)."""
    g = torch.Generator().manual_seed(1)
    teacher = torch.randn(int(torch.tensor(shape[1:]).prod()), classes, generator=g)
    batches = []
    for _ in range(STEPS):
        x = torch.randn(*shape, generator=g)
        batches.append((x, (x.flatten(1) @ teacher).argmax(1)))
    return batches


def _mlp():
    torch.manual_seed(0)
    return MLP((64, 32, 32, 10)), _teacher_batches((16, 64)), None


def _cnn():
    torch.manual_seed(0)
    return CNN(in_ch=1, c1=4, c2=8, image=12), _teacher_batches((8, 1, 12, 12)), None


def _gpt():
    """Sequences following t[i+1] = (5 t[i] + 3) mod V from random starts."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    V, T = 64, 16
    batches = []
    for _ in range(STEPS):
        seq = [torch.randint(0, V, (4,), generator=g)]
        for _ in range(T):
            seq.append((5 * seq[-1] + 3) % V)
        idx = torch.stack(seq, 1)
        batches.append((idx[:, :-1], idx[:, 1:]))
    return GPT(vocab=V, seq=T, d_model=32, n_heads=2, n_layers=2, dropout=0.0), batches, (lambda m, x, y: m(x, y))


MODELS = {"mlp": _mlp, "cnn": _cnn, "gpt": _gpt}


def _adam_noise_bound(opt_name: str) -> float:
    """Absolute parameter difference two correct float32 implementations may reach.

    AdamW moves a parameter by lr * m/(sqrt(v) + eps) per step, a ratio of order one
    whatever the gradient's size: a gradient that is the small difference of larger
    terms (|g| ~ 1e-4 of its summands here) carries a relative rounding error of up to
    ~1e-4 from its summation order, which the normalisation passes on undamped, so each
    step may move the parameter by up to lr * 1e-4 differently. Over STEPS steps at
    lr = 1e-2 that is 2e-5, far below what a wrong update rule gives (~lr per step).
    SGD scales the gradient by lr instead, so its strict relative check stands."""
    return STEPS * 1e-2 * 1e-4 if opt_name == "adamw" else 0.0


@pytest.mark.parametrize("opt_name", ["sgd", "adamw"])
@pytest.mark.parametrize("model_name", list(MODELS))
def test_csx_matches_cpu(model_name, opt_name):
    model, batches, loss_fn = MODELS[model_name]()
    cpu_losses, cpu_model, cpu_opt, _ = train("CPU", model, batches, opt_name, loss_fn)
    csx_losses, csx_model, csx_opt, step = train("CSX", model, batches, opt_name, loss_fn)

    assert len(csx_losses) == STEPS
    assert_close_rel(torch.tensor(csx_losses), torch.tensor(cpu_losses), what="losses")
    assert sum(cpu_losses[-5:]) < sum(cpu_losses[:5]), f"the reference run should learn: {cpu_losses}"
    assert csx_model.keys() == cpu_model.keys()
    for k in cpu_model:
        assert_close_rel(csx_model[k], cpu_model[k], what=f"model {k}", atol=_adam_noise_bound(opt_name))
    for i, st in cpu_opt["state"].items():
        for k, v in st.items():
            assert_close_rel(csx_opt["state"][i][k], v, what=f"optimizer state {i}.{k}")
    # parameters really moved (the comparison is not between two untouched copies)
    first = next(iter(cpu_model))
    assert not torch.equal(csx_model[first], model.state_dict()[first])
    # one optimizer update is ONE node of the captured graph
    ops = step.executable.captured.ops()
    update = "cstorch.sgd_update.default" if opt_name == "sgd" else "cstorch.adam_update.default"
    assert ops.get(update) == 1, ops


def test_batchnorm_running_stats_follow_eager():
    """Regression: native_batch_norm hides its running-stat update from functionalization;
    the capture must route it through the correctly-schema'd op or the stats never move."""
    model, batches, _ = _cnn()
    _, cpu_model, _, _ = train("CPU", model, batches[:3], "sgd")
    _, csx_model, _, _ = train("CSX", model, batches[:3], "sgd")
    for k in ("bn1.running_mean", "bn1.running_var", "bn1.num_batches_tracked"):
        assert not torch.equal(cpu_model[k], model.state_dict()[k]), k
        assert_close_rel(csx_model[k], cpu_model[k], what=k)


class TiedLM(torch.nn.Module):
    """Embedding and output head share one weight (as GPT-2 does)."""

    def __init__(self, vocab=32, d=16):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, d)
        self.mix = torch.nn.Linear(d, d)
        self.head = torch.nn.Linear(d, vocab, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, idx, targets):
        logits = self.head(torch.tanh(self.mix(self.emb(idx))))
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())


@pytest.mark.parametrize("opt_name", ["sgd", "adamw"])
def test_tied_weights_are_one_state_tensor(opt_name):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randint(0, 32, (4, 8), generator=g), torch.randint(0, 32, (4, 8), generator=g))
               for _ in range(10)]
    model = TiedLM()
    loss_fn = lambda m, x, y: m(x, y)  # noqa: E731
    cpu_losses, cpu_model, _, _ = train("CPU", model, batches, opt_name, loss_fn)
    csx_losses, csx_model, _, step = train("CSX", model, batches, opt_name, loss_fn)
    assert_close_rel(torch.tensor(csx_losses), torch.tensor(cpu_losses), what="losses")
    for k in cpu_model:
        assert_close_rel(csx_model[k], cpu_model[k], what=k)
    assert csx_model["emb.weight"].data_ptr() == csx_model["head.weight"].data_ptr()  # still tied after the run
    names = step.program.state.names
    assert sum("emb.weight" in n or "head.weight" in n for n in names) == 1
