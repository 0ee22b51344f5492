"""Every user error is a clear exception that says what was wrong and how to fix it."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import cstorch
import cstorch_jax
from cstorch import MaterializationError, StaticGraphError


def _setup(backend="CSX"):
    torch.manual_seed(0)
    b = cstorch.backend(backend)
    model = nn.Linear(4, 3)
    compiled = cstorch.compile(model, b)
    opt = cstorch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return model, compiled, opt


def _loader(batches):
    return cstorch.utils.data.DataLoader(lambda: batches)


def _batches(n=3, batch=2):
    return [(torch.randn(batch, 4), torch.randint(0, 3, (batch,))) for _ in range(n)]


@pytest.mark.parametrize("read", ["item", "print", "if", "float", "fstring", "tolist"])
def test_reading_a_traced_value_in_the_step_points_to_step_closure(read, capsys):
    _, compiled, opt = _setup()

    @cstorch.trace
    def step(x, y):
        loss = F.cross_entropy(compiled(x), y)
        if read == "item":
            loss.item()
        elif read == "print":
            print(loss)
        elif read == "if":
            if loss > 1:
                pass
        elif read == "float":
            float(loss)
        elif read == "fstring":
            f"{loss:.3f}"
        else:
            loss.tolist()
        loss.backward()
        opt.step()
        return loss

    with pytest.raises(MaterializationError, match="step_closure"):
        for x, y in cstorch.utils.data.DataExecutor(_loader(_batches()), num_steps=1):
            step(x, y)


def test_batch_of_another_shape_names_argument_and_both_shapes():
    _, compiled, opt = _setup()

    @cstorch.trace
    def step(x, y):
        loss = F.cross_entropy(compiled(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    batches = _batches(2) + [(torch.randn(5, 4), torch.randint(0, 3, (5,)))]
    seen = []
    with pytest.raises(StaticGraphError) as err:
        for x, y in cstorch.utils.data.DataExecutor(_loader(batches), num_steps=3):
            seen.append(step(x, y))
    msg = str(err.value)
    assert "argument [0]" in msg and "float32[2, 4]" in msg and "float32[5, 4]" in msg
    assert len(seen) == 2  # the earlier steps ran


def test_batch_of_another_dtype_is_refused():
    _, compiled, opt = _setup()

    @cstorch.trace
    def step(x):
        return compiled(x).sum()

    batches = [torch.randn(2, 4), torch.randn(2, 4).to(torch.bfloat16)]
    with pytest.raises(StaticGraphError, match=r"float32\[2, 4\].*bfloat16\[2, 4\]"):
        for x in cstorch.utils.data.DataExecutor(_loader(batches), num_steps=2):
            step(x)


def test_changed_python_argument_is_refused():
    _, compiled, _ = _setup()

    @cstorch.trace
    def step(x, scale):
        return compiled(x).sum() * scale

    with pytest.raises(StaticGraphError, match="scale|argument \\[1\\].*0.5.*2.0"):
        for i, x in enumerate(cstorch.utils.data.DataExecutor(_loader([torch.randn(2, 4)] * 2), num_steps=2)):
            step(x, 0.5 if i == 0 else 2.0)


def test_changed_frozen_hyperparameter_is_refused_but_lr_may_change():
    model, compiled, opt = _setup()

    @cstorch.trace
    def step(x, y):
        loss = F.cross_entropy(compiled(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    for i, (x, y) in enumerate(cstorch.utils.data.DataExecutor(_loader(_batches()), num_steps=3)):
        opt.param_groups[0]["lr"] = 0.1 / (i + 1)  # a tensor input: allowed every step
        step(x, y)
    opt.param_groups[0]["momentum"] = 0.5
    with pytest.raises(StaticGraphError, match="momentum"):
        for x, y in cstorch.utils.data.DataExecutor(_loader(_batches()), num_steps=1):
            step(x, y)


def test_switching_train_eval_mode_is_refused():
    model, compiled, _ = _setup()

    @cstorch.trace
    def step(x):
        return compiled(x).sum()

    with pytest.raises(StaticGraphError, match="training"):
        for i, x in enumerate(cstorch.utils.data.DataExecutor(_loader([torch.randn(2, 4)] * 2), num_steps=2)):
            if i == 1:
                compiled.eval()
            step(x)


def test_second_backend_is_refused():
    cstorch.backend("CSX")
    with pytest.raises(RuntimeError, match="Cannot instantiate multiple backends.*CSX"):
        cstorch.backend("CPU")


def test_invalid_backend_type():
    with pytest.raises(ValueError, match="Invalid Cerebras PyTorch backend type"):
        cstorch.backend("TPU")


def test_traced_step_needs_a_data_executor():
    _, compiled, _ = _setup()
    step = cstorch.trace(lambda x: compiled(x).sum())
    with pytest.raises(RuntimeError, match="DataExecutor"):
        step(torch.randn(2, 4))


def test_unwrapped_dataloader_is_refused():
    cstorch.backend("CSX")
    with pytest.raises(TypeError, match="cstorch.utils.data.DataLoader"):
        cstorch.utils.data.DataExecutor([torch.randn(2, 4)], num_steps=1)


def test_checkpoint_closure_outside_a_run():
    cstorch.backend("CPU")
    save = cstorch.checkpoint_closure(lambda: None)
    with pytest.raises(RuntimeError, match="outside of an execution context"):
        save()


def test_closed_over_tensor_is_a_constant_and_a_closed_over_parameter_gets_a_fix_it_message():
    """A plain tensor from an enclosing scope is compiled in as a constant (see
    tests/engine/test_outside_tensors.py); one that requires grad would never be trained."""
    w, x = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(cstorch_jax.jit(lambda x: x * w)(x), x * w)
    p = torch.nn.Parameter(torch.randn(3))
    with pytest.raises(cstorch.CstorchError, match="register_buffer"):
        cstorch_jax.jit(lambda x: x * p)(x)


@torch.library.custom_op("cstorch_test::unlowered", mutates_args=())
def _unlowered(x: torch.Tensor) -> torch.Tensor:
    """An op with a torch kernel and no cstorch lowering (forward)."""
    return x * 2


@torch.library.custom_op("cstorch_test::unlowered_backward", mutates_args=())
def _unlowered_backward(g: torch.Tensor) -> torch.Tensor:
    """Its gradient: another op without a lowering, so it shows up in the backward pass only."""
    return g * 2


_unlowered.register_fake(lambda x: torch.empty_like(x))
_unlowered_backward.register_fake(lambda g: torch.empty_like(g))
_unlowered.register_autograd(lambda ctx, g: _unlowered_backward(g))


class _Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(3, 3)

    def forward(self, x):
        return _unlowered(self.proj(x))


class _Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(3, 3), _Inner()])

    def forward(self, x):
        return self.blocks[1](self.blocks[0](x))


def test_unsupported_op_names_the_op_and_its_module_path():
    """Forward ops name the module whose forward ran them; backward ops name the module
    whose forward they differentiate. Nothing is compiled, nothing runs."""
    torch.manual_seed(0)
    model = _Outer()
    compiled = cstorch.compile(model, cstorch.backend("CSX"))
    opt = cstorch.optim.SGD(model.parameters(), lr=0.1)

    @cstorch.trace
    def step(x, y):
        loss = F.mse_loss(compiled(x), y)
        loss.backward()
        opt.step()
        return loss

    loader = _loader([(torch.randn(2, 3), torch.randn(2, 3))])
    with pytest.raises(cstorch.UnsupportedOpError) as info:
        for x, y in cstorch.utils.data.DataExecutor(loader, num_steps=1):
            step(x, y)
    msg = str(info.value)
    assert "cstorch_test.unlowered.default, from _Outer.blocks.1\n" in msg, msg
    assert "cstorch_test.unlowered_backward.default, from _Outer.blocks.1 (backward)" in msg, msg


def test_unsupported_op_outside_a_module_says_so():
    with pytest.raises(cstorch.UnsupportedOpError, match="unlowered.default, from the step function itself") as info:
        cstorch_jax.jit(lambda x: _unlowered(x))(torch.ones(3))
    assert info.value.missing_ops == ("cstorch_test.unlowered.default",)


def test_int64_outside_int32_range_is_refused():
    with pytest.raises(cstorch_jax.UnsupportedDTypeError, match="int32 range"):
        cstorch_jax.jit(lambda x: x + 1)(torch.tensor([2**40]))


def test_float64_is_refused():
    with pytest.raises(cstorch_jax.UnsupportedDTypeError, match="float64"):
        cstorch_jax.jit(lambda x: x + 1)(torch.randn(3, dtype=torch.float64))


def test_data_dependent_shapes_are_refused_with_a_fix():
    x, mask = torch.randn(3, 5), torch.rand(5) > 0.5

    def masked_add(a, m):
        a = a.clone()
        a[:, m] += 1.0
        return a

    for fn, args in [(lambda a, m: a[:, m], (x, mask)), (masked_add, (x, mask)),
                     (lambda a: torch.nonzero(a), (x,))]:
        with pytest.raises(cstorch.CstorchError, match="torch.where"):
            cstorch_jax.jit(fn)(*args)
    # the static-shape spelling of the same update works
    got = cstorch_jax.jit(lambda a, m: torch.where(m, a + 1.0, a))(x, mask)
    assert torch.equal(got, masked_add(x, mask))


def test_none_arguments_and_results_of_a_compiled_step():
    """None is a Python value like any other: as an argument it is frozen, as a result
    it comes back as None (it once marked a tensor slot and crashed the replay)."""
    from cstorch._backend import _reset_backend

    _reset_backend()
    b = cstorch.backend("CSX")
    model = torch.nn.Linear(2, 2)
    compiled = cstorch.compile(model, b)

    @cstorch.trace
    def step(x, extra):
        compiled(x)
        return None

    @cstorch.trace
    def pair(x, extra):
        return compiled(x).sum(), None

    loader = cstorch.utils.data.DataLoader(lambda: [torch.ones(1, 2)] * 2)
    for x in cstorch.utils.data.DataExecutor(loader):
        assert step(x, None) is None
        loss, nothing = pair(x, None)
        assert nothing is None and loss.shape == ()
    with pytest.raises(cstorch.StaticGraphError, match=r"argument \[1\] was None when the step was compiled and is now 3"):
        for x in cstorch.utils.data.DataExecutor(loader, num_steps=1):
            pair(x, 3)
    _reset_backend()
