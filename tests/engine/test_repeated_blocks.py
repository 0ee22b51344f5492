"""Repeated layers traced once (`cstorch_jax.repeated_blocks`): a model's identical blocks
become calls of one traced forward and backward, and training gives the parameters the
unrolled capture gives, bit for bit (`performance.trace_repeated_layers = False` is the
unrolled path), and those of eager torch on the CPU backend within rounding. With their
state held stacked (`performance.stack_repeated_layers_from`, `cstorch_jax.stacked_state`)
the runs of layers compute as scans and the optimizer updates each kind of parameter at
once: the parameters and optimizer state are again those of the calls, bit for bit."""
from __future__ import annotations

import logging
import math
import operator

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import cstorch
from cstorch._backend import _reset_backend
from benchmarks.models import GPT
from cstorch_jax.repeated_blocks import MIN_REPEATS, repeated_children
from train_script import assert_close_rel, train

INVOKE = torch.ops.higher_order.invoke_subgraph


def _calls(step) -> tuple[int, int]:
    """(invoke_subgraph nodes in the step's captured graph, distinct graphs they call)."""
    gm = step.program.executable.captured.module
    calls = [n for n in gm.graph.nodes if n.op == "call_function" and n.target is INVOKE]
    return len(calls), len({id(operator.attrgetter(n.args[0].target)(gm)) for n in calls})


def _train(model, batches, loss_fn, repeated: bool, opt="adamw", stack_from: int = 0, with_optimizer=False):
    with cstorch.backends.csx.performance:
        cstorch.backends.csx.performance.trace_repeated_layers = repeated
        cstorch.backends.csx.performance.stack_repeated_layers_from = stack_from
        losses, state, opt_state, step = train("CSX", model, batches, opt, loss_fn=loss_fn)
    return (losses, state, step, opt_state) if with_optimizer else (losses, state, step)


def _check_stacked(model, batches, loss_fn, opt, stacks: int, rel: float = 0.0):
    """Trained with the repeated layers' state stacked (`stacks` stacked arrays: each kind
    of parameter and of its optimizer state of every run; 0: no run can be), the losses,
    parameters and optimizer state equal those of the repeated layers' calls: bit for bit
    when `rel` is 0, else within `rel` of each tensor's scale (a scan's body is compiled as
    a loop body, where XLA:CPU may fuse a product and a sum into one multiply-add that the
    calls compute apart: a last-bit difference, `cstorch_jax.step_loop`)."""
    losses, state, _, opt_state = _train(model, batches, loss_fn, True, opt, with_optimizer=True)
    s_losses, s_state, s_step, s_opt_state = _train(model, batches, loss_fn, True, opt, stack_from=MIN_REPEATS,
                                                    with_optimizer=True)
    stacking = s_step.program.executable.stacking
    assert (len(stacking.stacks) if stacking is not None else 0) == stacks
    pairs = [("losses", torch.tensor(s_losses), torch.tensor(losses))]
    pairs += [(name, s_state[name], want) for name, want in state.items()]
    assert s_opt_state["state"].keys() == opt_state["state"].keys()
    pairs += [(f"optimizer state {i}.{f}", s_opt_state["state"][i][f], want)
              for i, fields in opt_state["state"].items() for f, want in fields.items()]
    for what, got, want in pairs:
        if rel == 0.0:
            assert torch.equal(got, want), f"{what} differs from the calls' step"
        assert_close_rel(got, want, rel=rel, what=what)


def _check_parity(model, batches, loss_fn, layers_called: int, graphs: int, opt="adamw", eager_rel=2e-4,
                  unrolled_rel=0.0):
    """Train with repeated layers traced once and unrolled: the same losses and
    parameters (bit for bit when `unrolled_rel` is 0: the same ops on the same values; XLA
    may order a sum differently inside a block it sees alone, a last-bit difference);
    `layers_called` block calls (forward and backward: two nodes each) through `graphs`
    distinct graphs; eager torch agrees within `eager_rel`."""
    losses, state, step = _train(model, batches, loss_fn, True, opt)
    assert _calls(step) == (2 * layers_called, graphs)
    unrolled_losses, unrolled, unrolled_step = _train(model, batches, loss_fn, False, opt)
    assert _calls(unrolled_step) == (0, 0)
    if unrolled_rel == 0.0:
        assert losses == unrolled_losses
        for name, want in unrolled.items():
            assert torch.equal(state[name], want), f"{name} differs from the unrolled step's"
    assert_close_rel(losses, unrolled_losses, rel=unrolled_rel, what="losses")
    for name, want in unrolled.items():
        assert_close_rel(state[name], want, rel=unrolled_rel, what=name)
    _matches_eager(model, batches, loss_fn, opt, losses, state, rel=eager_rel)


def _matches_eager(model, batches, loss_fn, opt, losses, state, rel: float):
    """Eager torch (the CPU backend) trained from the same weights on the same batches ends
    with the same losses and parameters as `losses` and `state`, within `rel`."""
    cpu_losses, cpu, _, _ = train("CPU", model, batches, opt, loss_fn=loss_fn)
    assert_close_rel(losses, cpu_losses, rel=rel, what="losses")
    for name, want in cpu.items():
        assert_close_rel(state[name], want, rel=rel, what=name)


def _block_parameters(model) -> int:
    """How many parameters one repeated layer of `model` has."""
    return len(list(repeated_children([model])[0].parameters()))


def _lm_batches(vocab: int, seq: int, n: int = 3):
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, vocab, (n, 2, seq + 1), generator=g)
    return [(t[:, :-1].contiguous(), t[:, 1:].contiguous()) for t in tokens]


def _lm_loss(model, idx, targets):
    logits = model(idx)
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))


# -- the GPT stack, with and without dropout ----------------------------------------------------------------------
@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_gpt_stack_trains_as_unrolled(dropout):
    torch.manual_seed(0)
    model = GPT(vocab=64, seq=16, d_model=32, n_heads=4, n_layers=MIN_REPEATS, dropout=dropout)
    loss_fn = (lambda m, idx, targets: m(idx, targets))
    # every block parameter with its exp_avg, exp_avg_sq and step: 4 stacks each
    # (AdamW divides by the root of the squared gradient's average: a last-bit difference in
    # a small gradient grows; 5.5e-5 of the largest value measured after 3 steps)
    _check_stacked(model, _lm_batches(64, 16), loss_fn, "adamw", stacks=4 * _block_parameters(model), rel=1e-4)
    if dropout == 0.0:
        _check_parity(model, _lm_batches(64, 16), loss_fn, layers_called=MIN_REPEATS, graphs=2)
        return
    # dropout draws on CSX from the step's key, not torch's generator: the masks are the
    # unrolled step's (each layer its own), which eager torch cannot be compared with
    losses, state, step = _train(model, _lm_batches(64, 16), loss_fn, True)
    assert _calls(step) == (2 * MIN_REPEATS, 2)
    # the report shows each graph once, with its calls
    blocks = step.report.summary().as_dict()["repeated layers (graph: calls x ops)"]
    assert [part.split(": ")[1].split(" x ")[0] for part in blocks.split(", ")] == [str(MIN_REPEATS)] * 2
    unrolled_losses, unrolled, _ = _train(model, _lm_batches(64, 16), loss_fn, False)
    assert losses == unrolled_losses
    for name, want in unrolled.items():
        assert torch.equal(state[name], want), name


# -- a Llama-style block: RMSNorm, RoPE, grouped-query attention, SwiGLU --------------------------------------------
class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


def _rotate(x, cos, sin):
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


class LlamaLayer(nn.Module):
    def __init__(self, d: int, heads: int, kv_heads: int):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, d // heads
        self.attn_norm, self.mlp_norm = RMSNorm(d), RMSNorm(d)
        self.q = nn.Linear(d, d, bias=False)
        self.kv = nn.Linear(d, 2 * kv_heads * self.head_dim, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.gate, self.up = nn.Linear(d, 2 * d, bias=False), nn.Linear(d, 2 * d, bias=False)
        self.down = nn.Linear(2 * d, d, bias=False)

    def forward(self, x, cos, sin):
        B, T, D = x.shape
        h = self.attn_norm(x)
        q = self.q(h).view(B, T, self.heads, self.head_dim).transpose(1, 2)
        k, v = self.kv(h).view(B, T, 2, self.kv_heads, self.head_dim).unbind(2)
        k, v = k.transpose(1, 2), v.transpose(1, 2)
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        repeat = self.heads // self.kv_heads
        k, v = k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(att.transpose(1, 2).reshape(B, T, D))
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    def __init__(self, vocab=64, d=32, heads=4, kv_heads=2, layers=MIN_REPEATS, seq=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(LlamaLayer(d, heads, kv_heads) for _ in range(layers))
        self.norm = RMSNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        head_dim = d // heads
        inv = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
        angles = torch.outer(torch.arange(seq).float(), inv)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, idx):
        x = self.embed(idx)
        for layer in self.layers:
            x = layer(x, self.cos, self.sin)
        return self.head(self.norm(x))


def test_llama_style_block_with_rope_and_gqa_trains_as_unrolled():
    torch.manual_seed(0)
    model = Llama()
    # every block parameter with its momentum buffer
    _check_stacked(model, _lm_batches(64, 16), _lm_loss, "sgd", stacks=2 * _block_parameters(model), rel=2e-6)
    _check_parity(model, _lm_batches(64, 16), _lm_loss, layers_called=MIN_REPEATS, graphs=2, opt="sgd",
                  unrolled_rel=1e-6)


# -- a T5-style encoder-decoder: the first layer of each stack holds the relative position bias -------------------
class T5Attention(nn.Module):
    def __init__(self, d: int, heads: int, relative_bias: bool, causal: bool):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.bias = nn.Embedding(8, heads) if relative_bias else None

    def position_bias(self, T: int, S: int):
        rel = torch.arange(S)[None, :] - torch.arange(T)[:, None]
        bucket = rel.clamp(-4, 3) + 4
        return self.bias(bucket).permute(2, 0, 1).unsqueeze(0)

    def forward(self, x, kv, bias):
        B, T, D = x.shape
        S = kv.shape[1]
        q = self.q(x).view(B, T, self.heads, -1).transpose(1, 2)
        k = self.k(kv).view(B, S, self.heads, -1).transpose(1, 2)
        v = self.v(kv).view(B, S, self.heads, -1).transpose(1, 2)
        if bias is None:
            bias = self.position_bias(T, S) if self.bias is not None else torch.zeros(1, self.heads, T, S)
        scores = q @ k.transpose(-1, -2) + bias
        if self.causal:
            scores = scores.masked_fill(torch.ones(T, S, dtype=torch.bool).triu(1), float("-inf"))
        out = scores.softmax(-1) @ v
        return self.o(out.transpose(1, 2).reshape(B, T, D)), bias


class T5Layer(nn.Module):
    def __init__(self, d: int, heads: int, first: bool, decoder: bool):
        super().__init__()
        self.self_norm = RMSNorm(d)
        self.self_attn = T5Attention(d, heads, relative_bias=first, causal=decoder)
        self.cross_norm = RMSNorm(d) if decoder else None
        self.cross_attn = T5Attention(d, heads, relative_bias=False, causal=False) if decoder else None
        self.ff_norm = RMSNorm(d)
        self.wi, self.wo = nn.Linear(d, 2 * d, bias=False), nn.Linear(2 * d, d, bias=False)

    def forward(self, x, bias=None, memory=None):
        h = self.self_norm(x)
        attn, bias = self.self_attn(h, h, bias)
        x = x + attn
        if self.cross_attn is not None:
            x = x + self.cross_attn(self.cross_norm(x), memory, None)[0]
        return x + self.wo(F.relu(self.wi(self.ff_norm(x)))), bias


class T5(nn.Module):
    def __init__(self, vocab=64, d=32, heads=4, layers=MIN_REPEATS + 1):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.encoder = nn.ModuleList(T5Layer(d, heads, first=i == 0, decoder=False) for i in range(layers))
        self.decoder = nn.ModuleList(T5Layer(d, heads, first=i == 0, decoder=True) for i in range(layers))
        self.enc_norm, self.dec_norm = RMSNorm(d), RMSNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, src, tgt):
        x, bias = self.embed(src), None
        for layer in self.encoder:
            x, bias = layer(x, bias)
        memory = self.enc_norm(x)
        y, bias = self.embed(tgt), None
        for layer in self.decoder:
            y, bias = layer(y, bias, memory=memory)
        return self.head(self.dec_norm(y))


def test_t5_style_encoder_decoder_trains_as_unrolled():
    torch.manual_seed(0)
    model = T5()
    # the first layers differ (they hold the bias): each stack's other layers share one block
    assert len(repeated_children([model])) == 2 * MIN_REPEATS
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randint(0, 64, (2, 12), generator=g), torch.randint(0, 64, (2, 10), generator=g))
               for _ in range(3)]

    def loss_fn(m, src, tgt):
        logits = m(src, tgt[:, :-1])
        return F.cross_entropy(logits.reshape(-1, 64), tgt[:, 1:].reshape(-1))

    # encoder and decoder: a forward and a backward graph each; each run of layers stacked
    # (the first layers, which hold the bias, stay apart): its parameters and momentum buffers
    per_run = [len(list(m.parameters())) for m in repeated_children([model])[::MIN_REPEATS]]
    _check_stacked(model, batches, loss_fn, "sgd", stacks=2 * sum(per_run), rel=2e-6)
    _check_parity(model, batches, loss_fn, layers_called=2 * MIN_REPEATS, graphs=4, opt="sgd", unrolled_rel=1e-6)


# -- a stack with one odd layer out --------------------------------------------------------------------------------
class Residual(nn.Module):
    def __init__(self, d: int, hidden: int, scale: float = 1.0):
        super().__init__()
        self.scale = scale
        self.norm = nn.LayerNorm(d)
        self.up, self.down = nn.Linear(d, hidden), nn.Linear(hidden, d)

    def forward(self, x):
        return x + self.scale * self.down(F.gelu(self.up(self.norm(x))))


class Odd(nn.Module):
    """MIN_REPEATS identical layers, one wider, one with another attribute value."""

    def __init__(self, d=16):
        super().__init__()
        layers = [Residual(d, 32) for _ in range(MIN_REPEATS)]
        layers.insert(1, Residual(d, 48))
        layers.insert(3, Residual(d, 32, scale=0.5))
        self.layers = nn.Sequential(*layers)
        self.head = nn.Linear(d, 5)

    def forward(self, x):
        return self.head(self.layers(x))


def test_odd_layers_out_are_traced_on_their_own():
    torch.manual_seed(0)
    model = Odd()
    # only the identical layers are traced apart; the other two run unrolled
    assert [i for i, m in enumerate(model.layers) if m in repeated_children([model])] == [0, 2, 4, 5]
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(4, 16, generator=g), torch.randint(0, 5, (4,), generator=g)) for _ in range(3)]
    # the first takes the batch, which needs no gradient, the others a tensor that does:
    # two traces of the block (a forward and a backward graph each)
    loss_fn = (lambda m, x, y: F.cross_entropy(m(x), y))
    _check_parity(model, batches, loss_fn, layers_called=MIN_REPEATS, graphs=4, opt="sgd")
    # the odd layers break the run: no chain of calls of one graph, nothing stacked
    _check_stacked(model, batches, loss_fn, "sgd", stacks=0)


def test_fewer_layers_than_min_repeats_are_not_traced_apart():
    assert repeated_children([GPT(vocab=16, seq=4, d_model=8, n_heads=2, n_layers=MIN_REPEATS - 1)]) == []
    # torch.nn's own layers are cheap to trace: never traced apart
    assert repeated_children([nn.Sequential(*(nn.Linear(4, 4) for _ in range(2 * MIN_REPEATS)))]) == []


# -- a block that cannot be traced apart runs unrolled, and says why ----------------------------------------------
class ReadsOutside(nn.Module):
    """Reads a tensor that is neither its own nor an argument (its parent's buffer)."""

    def __init__(self, owner, d: int):
        super().__init__()
        self.lin = nn.Linear(d, d)
        self._owner = [owner]  # a plain list: not a submodule

    def forward(self, x):
        return x + torch.tanh(self.lin(x)) * self._owner[0].gain


class OutsideStack(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.register_buffer("gain", torch.full((d,), 0.5))
        self.layers = nn.ModuleList(ReadsOutside(self, d) for _ in range(MIN_REPEATS))
        self.head = nn.Linear(d, 3)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def test_block_reading_outside_tensors_runs_unrolled_with_a_debug_log(caplog):
    torch.manual_seed(0)
    model = OutsideStack()
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(4, 8, generator=g), torch.randint(0, 3, (4,), generator=g)) for _ in range(2)]
    loss_fn = (lambda m, x, y: F.cross_entropy(m(x), y))
    with caplog.at_level(logging.DEBUG, logger="cstorch"):
        losses, state, step = _train(model, batches, loss_fn, True, "sgd")
    assert _calls(step) == (0, 0)
    assert any("ReadsOutside runs unrolled" in r.getMessage() for r in caplog.records)
    _matches_eager(model, batches, loss_fn, "sgd", losses, state, rel=1e-5)


# -- layers that hold helper objects, or take plain arguments ---------------------------------------------------
class Init:
    """An initializer-like helper (as the Model Zoo's layers hold): callable, plain settings."""

    def __init__(self, std: float):
        self.std = std

    def __call__(self, t):
        with torch.no_grad():
            return t.normal_(0.0, self.std)


class Settings:
    def __init__(self, std: float, act: str):
        self.init, self.act = Init(std), act


class Configured(nn.Module):
    def __init__(self, d: int, settings: Settings):
        super().__init__()
        self.settings = settings
        self.lin = nn.Linear(d, d)
        settings.init(self.lin.weight)

    def forward(self, x, scale=None):
        h = self.lin(x)
        h = torch.tanh(h) if self.settings.act == "tanh" else torch.relu(h)
        return x + (h if scale is None else h * scale)


class ConfiguredStack(nn.Module):
    """Every layer holds its own Settings object; `scales[i]` (a plain float) goes to layer i."""

    def __init__(self, acts, scales=None, d=8):
        super().__init__()
        self.layers = nn.ModuleList(Configured(d, Settings(0.3, act)) for act in acts)
        self.scales = scales
        self.inp, self.head = nn.Linear(d, d), nn.Linear(d, 3)

    def forward(self, x):
        x = self.inp(x)  # every layer takes a tensor that needs a gradient: one key for all
        for i, layer in enumerate(self.layers):
            x = layer(x) if self.scales is None else layer(x, scale=self.scales[i])
        return self.head(x)


def _configured_batches():
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(4, 8, generator=g), torch.randint(0, 3, (4,), generator=g)) for _ in range(3)]


def _ce(m, x, y):
    return F.cross_entropy(m(x), y)


def test_layers_holding_equal_helper_objects_are_traced_once():
    torch.manual_seed(0)
    model = ConfiguredStack(["tanh"] * MIN_REPEATS)
    assert repeated_children([model]) == list(model.layers)
    _check_parity(model, _configured_batches(), _ce, layers_called=MIN_REPEATS, graphs=2, opt="sgd", eager_rel=1e-5)


def test_layers_whose_helpers_differ_trace_apart_by_helper():
    torch.manual_seed(0)
    # tanh and relu layers alternate: two groups, each of its own graphs (a mix-up would compute the wrong activation)
    model = ConfiguredStack(["tanh", "relu"] * MIN_REPEATS)
    assert set(repeated_children([model])) == set(model.layers)
    _check_parity(model, _configured_batches(), _ce, layers_called=2 * MIN_REPEATS, graphs=4, opt="sgd",
                  eager_rel=1e-5)
    # a helper's state counts too: one layer whose initializer differs leaves too few alike
    odd = ConfiguredStack(["tanh"] * MIN_REPEATS)
    odd.layers[1].settings.init.std = 0.5
    assert repeated_children([odd]) == []


def test_layers_called_with_a_different_plain_argument_each_run_unrolled(caplog):
    torch.manual_seed(0)
    # each layer gets its own plain value (as the Model Zoo passes a layer index): one trace could not stand for
    # the others, so all run unrolled, and the debug log says why
    model = ConfiguredStack(["tanh"] * MIN_REPEATS, scales=[0.5 * (i + 1) for i in range(MIN_REPEATS)])
    with caplog.at_level(logging.DEBUG, logger="cstorch"):
        losses, state, step = _train(model, _configured_batches(), _ce, True, "sgd")
    assert _calls(step) == (0, 0)
    assert any("Configured runs unrolled" in r.getMessage() and "plain (non-tensor) argument" in r.getMessage()
               for r in caplog.records)
    _matches_eager(model, _configured_batches(), _ce, "sgd", losses, state, rel=1e-5)


def test_layers_called_with_the_same_plain_argument_are_traced_from_the_second_call():
    torch.manual_seed(0)
    # the first call runs unrolled; the second passes the same value, and it and the rest call one traced graph
    model = ConfiguredStack(["tanh"] * MIN_REPEATS, scales=[0.5] * MIN_REPEATS)
    _check_parity(model, _configured_batches(), _ce, layers_called=MIN_REPEATS - 1, graphs=2, opt="sgd",
                  eager_rel=1e-5)


# -- no gradients: the forward graph alone ------------------------------------------------------------------------
def test_evaluation_step_calls_the_forward_graph_only():
    torch.manual_seed(0)
    model = Llama().eval()
    idx = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(3))
    results = {}
    for repeated in (True, False):
        _reset_backend()
        with cstorch.backends.csx.performance:
            cstorch.backends.csx.performance.trace_repeated_layers = repeated
            compiled = cstorch.compile(model, cstorch.backend("CSX"))
            seen = []

            @cstorch.trace
            @torch.no_grad()
            def eval_step(idx):
                return compiled(idx)

            @cstorch.step_closure
            def record(logits):
                seen.append(logits.clone())

            loader = cstorch.utils.data.DataLoader(lambda: [(idx,)])
            for (batch,) in cstorch.utils.data.DataExecutor(loader, num_steps=1):
                record(eval_step(batch))
        results[repeated] = (seen[0], _calls(eval_step))
    assert results[True][1] == (MIN_REPEATS, 1)
    assert torch.equal(results[True][0], results[False][0])
    with torch.no_grad():
        assert_close_rel(results[True][0], model(idx), rel=1e-5, what="logits")


# -- an op without a lowering inside a repeated layer is reported with the layer's path ----------------------------
@torch.library.custom_op("cstorch_test::unlowered_in_block", mutates_args=())
def _unlowered(x: torch.Tensor) -> torch.Tensor:
    """An op with a torch kernel and no cstorch lowering."""
    return x * 2


_unlowered.register_fake(lambda x: torch.empty_like(x))
_unlowered.register_autograd(lambda ctx, g: g * 2)


class Unlowered(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.lin = nn.Linear(d, d)

    def forward(self, x):
        return x + _unlowered(self.lin(x))


class UnloweredStack(nn.Module):
    def __init__(self, d=4):
        super().__init__()
        self.lin = nn.Linear(d, d)
        self.layers = nn.ModuleList(Unlowered(d) for _ in range(MIN_REPEATS))

    def forward(self, x):
        x = self.lin(x)
        for layer in self.layers:
            x = layer(x)
        return x


def test_missing_lowering_in_a_repeated_layer_names_the_layer():
    model = UnloweredStack()
    batches = [(torch.randn(2, 4), torch.randn(2, 4))]
    with pytest.raises(cstorch.UnsupportedOpError) as info:
        _train(model, batches, lambda m, x, y: F.mse_loss(m(x), y), True, "sgd")
    assert "cstorch_test.unlowered_in_block.default, from UnloweredStack.layers.0\n" in str(info.value), str(info.value)
