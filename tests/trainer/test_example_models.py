"""The models and data processors of examples/configs (digits.py, gpt.py), in eager torch.

Processors: fixed-shape batches, the same batch sequence from every loader built with
the same arguments, different sequences for different seeds. Models: the loss is the
cross-entropy of the model's own logits, its gradient matches finite differences, and
the metrics update only in eval mode.
"""
from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from cstorch.metrics import Metric

CONFIGS = Path(__file__).resolve().parents[2] / "examples" / "configs"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"example_configs_{name}", CONFIGS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


digits = _load("digits")
gpt = _load("gpt")


@pytest.fixture(autouse=True)
def empty_metric_registry():
    """The models' metrics register process-wide: leave none behind."""
    Metric.registry.clear()
    yield
    Metric.registry.clear()


def _batches(processor) -> list:
    return list(processor.create_dataloader())


def _same(a: list, b: list) -> bool:
    def flat(batch):
        return list(batch) if isinstance(batch, (list, tuple)) else [batch]

    return len(a) == len(b) and all(
        all(torch.equal(x, y) for x, y in zip(flat(p), flat(q), strict=True)) for p, q in zip(a, b)
    )


# ---------------------------------------------------------------------------------------------------- digits


def test_digits_batches_have_fixed_shapes():
    train = _batches(digits.DigitsDataProcessor(batch_size=64, split="train"))
    val = _batches(digits.DigitsDataProcessor(batch_size=64, split="val", shuffle=False))
    assert (len(train), len(val)) == (1437 // 64, 360 // 64)  # fixed 80/20 split, partial batch dropped
    for images, labels in train + val:
        assert images.shape == (64, 1, 28, 28) and images.dtype == torch.float32
        assert labels.shape == (64,) and labels.dtype == torch.int64
    x, y = digits.load_digit_splits()["train"]
    assert abs(x.mean().item()) < 1e-4 and abs(x.std().item() - 1) < 1e-4  # normalised with train statistics
    _, y_val = digits.load_digit_splits()["val"]
    per_class, val_per_class = torch.bincount(y, minlength=10), torch.bincount(y_val, minlength=10)
    assert ((per_class - 4 * val_per_class).abs() <= 5).all()  # stratified: 80/20 within every class


def test_digits_order_is_deterministic_per_seed():
    make = lambda seed: digits.DigitsDataProcessor(batch_size=32, split="train", seed=seed)  # noqa: E731
    p = make(0)
    assert _same(_batches(p), _batches(p))
    assert _same(_batches(p), _batches(make(0)))
    assert not _same(_batches(p), _batches(make(1)))
    unshuffled = _batches(digits.DigitsDataProcessor(batch_size=32, split="val", shuffle=False, seed=5))
    x, _ = digits.load_digit_splits()["val"]
    assert torch.equal(unshuffled[0][0], x[:32])


def test_digits_processor_rejects_bad_arguments():
    with pytest.raises(ValueError, match="drop_last"):
        digits.DigitsDataProcessor(batch_size=8, drop_last=False)
    with pytest.raises(ValueError, match="split"):
        digits.DigitsDataProcessor(batch_size=8, split="test")
    with pytest.raises(ValueError, match="larger than"):
        digits.DigitsDataProcessor(batch_size=1000, split="val")


def test_digits_loss_is_cross_entropy_of_its_logits():
    torch.manual_seed(0)
    model = digits.DigitsClassifier(hidden_sizes=[32, 16], dropout=0.0)
    assert [tuple(m.weight.shape) for m in model.modules() if isinstance(m, torch.nn.Linear)] == [
        (32, 784), (16, 32), (10, 16)]
    images, labels = next(iter(digits.DigitsDataProcessor(batch_size=16).create_dataloader()))
    loss = model((images, labels))
    assert loss.dim() == 0 and torch.isfinite(loss)
    assert torch.allclose(loss, F.cross_entropy(model.logits(images), labels))
    loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


def test_digits_accuracy_updates_only_in_eval_mode():
    torch.manual_seed(0)
    model = digits.DigitsClassifier(hidden_sizes=[64])
    assert model.accuracy.name == "eval/accuracy"
    images, labels = next(iter(digits.DigitsDataProcessor(batch_size=64, split="val", shuffle=False)
                                .create_dataloader()))
    model.train()
    model((images, labels))
    assert model.accuracy.num_updates == 0
    model.eval()
    with torch.no_grad():
        model((images, labels))
        expected = (model.logits(images).argmax(-1) == labels).float().mean().item()
    assert model.accuracy.num_updates == 1
    assert float(model.accuracy) == pytest.approx(expected, abs=1e-6)


# ---------------------------------------------------------------------------------------------------- gpt


def _tokens(**kw):
    args = dict(batch_size=8, seq_len=16, vocab_size=32, num_sequences=64)
    return gpt.TokenDataProcessor(**{**args, **kw})


def test_token_batches_have_fixed_shapes():
    batches = _batches(_tokens(num_sequences=60))
    assert len(batches) == 60 // 8
    for batch in batches:
        assert batch.shape == (8, 17) and batch.dtype == torch.int64
        assert 0 <= batch.min() and batch.max() < 32


def test_token_order_is_deterministic_per_seed():
    p = _tokens(seed=3)
    assert _same(_batches(p), _batches(p))
    assert _same(_batches(p), _batches(_tokens(seed=3)))
    assert not _same(_batches(p), _batches(_tokens(seed=4)))
    assert torch.equal(_batches(_tokens(shuffle=False))[0], _tokens().tokens[:8])


def test_train_and_val_share_the_chain_but_not_the_sequences():
    train, val = _tokens(split="train"), _tokens(split="val")
    assert (train.transition_matrix == val.transition_matrix).all()
    assert not torch.equal(train.tokens, val.tokens)
    assert not (train.transition_matrix == _tokens(chain_seed=1).transition_matrix).all()


def test_tokens_follow_the_markov_chain():
    p = _tokens(num_sequences=1024, successors=3)
    matrix = torch.from_numpy(p.transition_matrix)
    assert torch.allclose(matrix.sum(1), torch.ones(32, dtype=torch.float64))
    assert ((matrix > 0).sum(1) == 3).all()
    prev, nxt = p.tokens[:, :-1].reshape(-1), p.tokens[:, 1:].reshape(-1)
    assert (matrix[prev, nxt] > 0).all()  # every sampled transition is one of the chain's
    # the data's empirical transition frequencies approach the chain's probabilities
    counts = torch.zeros(32, 32, dtype=torch.float64).index_put_((prev, nxt), torch.ones(len(prev),
                                                                 dtype=torch.float64), accumulate=True)
    n = counts.sum(1, keepdim=True)
    seen = n.squeeze(1) > 0
    empirical = counts[seen] / n[seen]
    sigma = (matrix[seen] * (1 - matrix[seen]) / n[seen]).sqrt()
    assert ((empirical - matrix[seen]).abs() <= 5 * sigma + 1e-12).all()
    assert p.bayes_loss() < p.uniform_loss() - 2  # room for the loss to fall far below log(vocab)


def test_token_processor_rejects_bad_arguments():
    with pytest.raises(ValueError, match="num_sequences"):
        _tokens(num_sequences=4)
    with pytest.raises(ValueError, match="drop_last"):
        _tokens(drop_last=False)
    with pytest.raises(ValueError, match="split"):
        _tokens(split="test")


def _gpt_model(**kw):
    torch.manual_seed(0)
    args = dict(vocab_size=32, seq_len=16, d_model=16, num_heads=2, num_layers=2, dropout=0.0)
    return gpt.GPTLanguageModel(**{**args, **kw})


def test_gpt_loss_is_next_token_cross_entropy():
    model = _gpt_model()
    assert model.head.weight is model.tok.weight  # tied by default
    batch = next(iter(_tokens().create_dataloader()))
    loss = model(batch)
    assert loss.dim() == 0 and torch.isfinite(loss)
    assert abs(loss.item() - math.log(32)) < 0.3  # small initial weights: close to uniform
    logits = model.logits(batch[:, :-1])
    assert logits.shape == (8, 16, 32)
    assert torch.allclose(loss, F.cross_entropy(logits.reshape(-1, 32), batch[:, 1:].reshape(-1)))
    with pytest.raises(ValueError, match="seq_len"):
        model(torch.zeros(2, 18, dtype=torch.int64))


def test_gpt_is_causal():
    model = _gpt_model().eval()
    tokens = _tokens().tokens[:4, :16]
    changed = tokens.clone()
    changed[:, 10] = (changed[:, 10] + 1) % 32
    with torch.no_grad():
        a, b = model.logits(tokens), model.logits(changed)
    assert torch.allclose(a[:, :10], b[:, :10], atol=1e-6)  # earlier positions never see token 10
    assert not torch.allclose(a[:, 10:], b[:, 10:], atol=1e-3)


# a value-projection weight, the tied embedding/head (both uses add up), an MLP bias, a position
@pytest.mark.parametrize("name,index", [("blocks.0.qkv.weight", (37, 3)), ("tok.weight", (7, 2)),
                                        ("blocks.1.mlp.0.bias", (4,)), ("pos.weight", (3, 1))])
def test_gpt_gradient_matches_finite_differences(name, index):
    model = _gpt_model().double()
    batch = _tokens(batch_size=4).tokens[:4]
    param = dict(model.named_parameters())[name]
    model.zero_grad()
    model(batch).backward()
    analytic = param.grad[index].item()
    eps = 1e-6
    with torch.no_grad():
        original = param[index].item()
        param[index] = original + eps
        plus = model(batch).item()
        param[index] = original - eps
        minus = model(batch).item()
        param[index] = original
    numeric = (plus - minus) / (2 * eps)
    assert abs(analytic) > 1e-5, "pick a parameter entry the loss depends on"
    assert numeric == pytest.approx(analytic, rel=1e-5, abs=1e-9)


def test_gpt_perplexity_updates_only_in_eval_mode():
    model = _gpt_model()
    batch = _tokens().tokens[:8]
    model.train()
    model(batch)
    assert model.perplexity.num_updates == 0
    model.eval()
    with torch.no_grad():
        loss = model(batch)
    assert model.perplexity.num_updates == 1
    assert float(model.perplexity) == pytest.approx(math.exp(loss.item()), rel=1e-5)


def test_untied_head_and_dropout_options():
    model = _gpt_model(tie_embeddings=False, dropout=0.1)
    assert model.head.weight is not model.tok.weight
    batch = _tokens().tokens[:8]
    model.train()
    torch.manual_seed(1)
    a = model(batch)
    torch.manual_seed(2)
    b = model(batch)
    assert not torch.equal(a, b)  # dropout is active in train mode
    model.eval()
    assert torch.equal(model(batch), model(batch))
    with pytest.raises(ValueError, match="divisible"):
        _gpt_model(d_model=15, num_heads=2)
