"""Tensor factories, numpy conversion, debug names, compiler hints, `device`,
`register_decomposition` and the distributed helpers, against eager torch or the real
semantics; the factories inside compiled steps and in a custom optimizer's state."""
import warnings

import ml_dtypes
import numpy as np
import pytest
import torch
import torch.nn as nn

import cstorch


def _run(kind, step_fn, batches):
    """Outputs of a @cstorch.trace step over `batches` on a fresh backend of `kind`."""
    cstorch.backend(kind)
    step = cstorch.trace(step_fn)
    loader = cstorch.utils.data.DataLoader(lambda: batches)
    return [torch.as_tensor(step(b)).clone() for b in cstorch.utils.data.DataExecutor(loader,
                                                                                      num_steps=len(batches))]


# -- factories -------------------------------------------------------------------------------
def test_factories_equal_torchs():
    x = torch.randn(2, 3)
    assert torch.equal(cstorch.full((2, 2), 1.5), torch.full((2, 2), 1.5))
    assert cstorch.full((1,), 2).dtype == torch.full((1,), 2).dtype == torch.int64
    assert torch.equal(cstorch.ones((3,)), torch.ones(3)) and torch.equal(cstorch.zeros((2,)), torch.zeros(2))
    assert torch.equal(cstorch.ones((2,), dtype=torch.int32), torch.ones(2, dtype=torch.int32))
    assert torch.equal(cstorch.full_like(x, 7.0), torch.full_like(x, 7.0))
    assert torch.equal(cstorch.zeros_like(x, dtype=torch.bfloat16), torch.zeros_like(x, dtype=torch.bfloat16))
    assert torch.equal(cstorch.ones_like(x.int()), torch.ones_like(x.int()))
    assert cstorch.zeros_like(x).device == cstorch.current_torch_device()


@pytest.mark.parametrize("kind", ["CPU", "CSX"])
def test_factories_and_make_constant_inside_a_compiled_step(kind):
    outside = torch.tensor([1.0, 0.0, 1.0])  # neither an input nor state: a constant of the program

    def step(x):
        mask = cstorch.make_constant(outside)
        made_here = cstorch.make_constant(torch.ones(3))
        return (x + cstorch.ones_like(x)) * mask * made_here + cstorch.full((3,), 0.5) + cstorch.zeros((3,))

    batches = [torch.full((3,), float(i)) for i in range(3)]
    got = _run(kind, step, batches)
    want = [(b + 1) * torch.tensor([1.0, 0.0, 1.0]) + 0.5 for b in batches]
    assert all(torch.equal(g, w) for g, w in zip(got, want))
    # without make_constant an outside tensor is baked into the program as a constant too
    # (tests/engine/test_outside_tensors.py covers in-place changes to it after capture)
    from cstorch._backend import _reset_backend

    _reset_backend()
    got = _run(kind, lambda x: x * outside, batches)
    assert all(torch.equal(g, b * outside) for g, b in zip(got, batches))


class MomentumSGD(cstorch.optim.Optimizer):
    """A user optimizer whose state is made with the cstorch factories (the real API's use)."""

    def __init__(self, params, lr=0.1, momentum=0.9):
        super().__init__(params, dict(lr=lr, momentum=momentum))

    def preinitialize(self):
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["buf"] = cstorch.zeros_like(p)
                self.state[p]["count"] = cstorch.full((), 0.0, dtype=torch.float32)

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                state["buf"].mul_(group["momentum"]).add_(p.grad)
                state["count"].add_(1.0)
                p.sub_(group["lr"] * state["buf"])


def _train_custom(kind):
    cstorch.backend(kind)
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    compiled = cstorch.compile(model)
    opt = MomentumSGD(model.parameters())

    @cstorch.trace
    def step(x):
        loss = compiled(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    data = [torch.randn(4, 3) for _ in range(4)]
    for x in cstorch.utils.data.DataExecutor(cstorch.utils.data.DataLoader(lambda: data), num_steps=4):
        step(x)
    return {k: v.clone() for k, v in model.state_dict().items()}, float(opt.state[model.weight]["count"])


def test_optimizer_state_from_factories_trains_alike_on_csx_and_cpu():
    from cstorch._backend import _reset_backend

    cpu, cpu_count = _train_custom("CPU")
    _reset_backend()
    csx, csx_count = _train_custom("CSX")
    assert cpu_count == csx_count == 4.0
    for k in cpu:
        torch.testing.assert_close(csx[k], cpu[k], rtol=1e-5, atol=1e-6)


def test_tensor_follows_the_real_rules():
    with pytest.warns(UserWarning, match="without a backend initialized"):
        t = cstorch.tensor([1.0, 2.0])
    assert torch.equal(t, torch.tensor([1.0, 2.0]))
    same = torch.ones(2)
    with pytest.warns(UserWarning):
        assert cstorch.tensor(same) is same
    cstorch.backend("CSX")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert torch.equal(cstorch.tensor([[1, 2]], dtype=torch.int32), torch.tensor([[1, 2]], dtype=torch.int32))

    @cstorch.trace
    def step(x):
        return x + cstorch.tensor(1.0)

    loader = cstorch.utils.data.DataLoader(lambda: [torch.ones(1)])
    with pytest.raises(RuntimeError, match="Cannot construct a stateful tensor while tracing"):
        for x in cstorch.utils.data.DataExecutor(loader, num_steps=1):
            step(x)


def test_numpy_conversions_keep_bfloat16_bits():
    t = torch.tensor([1.5, -2.25, 3.0e38], dtype=torch.bfloat16)
    a = cstorch.to_numpy(t)
    assert a.dtype == ml_dtypes.bfloat16 and a.view(np.int16).tolist() == t.view(torch.int16).tolist()
    back = cstorch.from_numpy(a)
    assert back.dtype == torch.bfloat16 and torch.equal(back, t)
    f = np.arange(3, dtype=np.float32)
    shared = cstorch.from_numpy(f)
    f[0] = 9.0
    assert shared[0] == 9.0  # shares memory, as torch.from_numpy
    frozen = np.arange(2.0)
    frozen.setflags(write=False)
    assert torch.equal(cstorch.from_numpy(frozen), torch.tensor([0.0, 1.0], dtype=torch.float64))
    assert cstorch.to_numpy(f) is not None and cstorch.to_numpy(f) is f and cstorch.from_numpy(shared) is shared


# -- debug names and compiler hints -----------------------------------------------------------
def test_debug_names():
    model = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.ReLU(), nn.Linear(2, 1)))
    assert cstorch.get_debug_name(model[1][0]) == "ReLU"
    cstorch.add_debug_name(model)
    assert [cstorch.get_debug_name(m) for m in model.modules()] == ["Sequential", "0", "1", "1.0", "1.1"]
    cstorch.add_debug_name(model, "net")
    assert cstorch.get_debug_name(model[1][1]) == "net.1.1"
    from cstorch.debug import current_debug_scope, current_name_scope

    with cstorch.name_scope("outer"):
        with cstorch.name_scope("inner"):
            assert current_name_scope() == "outer.inner"
        with cstorch.name_scope("raw", raw=True):
            assert current_name_scope() == "raw"
    assert current_name_scope() is None
    cstorch.set_debug_scope("fwd")
    assert current_debug_scope() == "fwd"
    cstorch.set_debug_scope(None)
    assert current_debug_scope() is None


@pytest.mark.parametrize("kind", ["CPU", "CSX"])
def test_name_scope_in_a_compiled_step_changes_nothing(kind):
    def step(x):
        with cstorch.name_scope("block"):
            y = x * 3
        return y + 1

    assert [g.tolist() for g in _run(kind, step, [torch.ones(2)] * 2)] == [[4.0, 4.0]] * 2


def test_pol_and_device_annotation_validate_and_change_nothing():
    with pytest.raises(ValueError, match=r"POL must be None or an integer in range \[0, 3\) but got forward level 3"):
        cstorch.pol(level=3)
    with pytest.raises(ValueError, match="backward level -1"):
        cstorch.pol(bwd_level=-1)
    with pytest.raises(TypeError, match="Expected `device` to be one of"):
        cstorch.device_annotation("gpu")

    def f(x):
        return x + 1

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert cstorch.pol(level=2)(f) is f and cstorch.device_annotation("wafer")(f) is f
    assert cstorch.current_pol() == cstorch.backends.csx.precision.optimization_level == 1


def test_device_is_the_backends_torch_device():
    assert cstorch.device("CSX") == torch.device("cpu") == cstorch.device("cpu")
    cstorch.backend("CSX")
    assert cstorch.device("CSX") == cstorch.backend().torch_device
    with cstorch.device("CSX"):
        assert torch.empty(1).device.type == "cpu"
    with pytest.raises(ValueError, match="Invalid Cerebras PyTorch backend type"):
        cstorch.device("TPU")


def test_register_decomposition_replaces_an_op_in_compiled_steps():
    from cstorch.compiler_hints import remove_decomposition

    aten = torch.ops.aten
    with pytest.raises(ValueError, match="Registering decompositions for device GPU is not supported"):
        cstorch.register_decomposition(aten.gelu, device="GPU")
    with pytest.raises(RuntimeError, match="Decomposition for aten.detach is not supported"):
        cstorch.register_decomposition(aten.detach)

    @cstorch.register_decomposition(aten.gelu)
    def cubic_gelu(x, approximate="none"):  # a deliberately different formula, to see that it is used
        return x * x * x

    try:
        with pytest.raises(RuntimeError, match="already been registered"):
            cstorch.register_decomposition(aten.gelu.default)(cubic_gelu)
        x = [torch.tensor([1.0, 2.0, -1.0])]
        assert _run("CSX", torch.nn.functional.gelu, x)[0].tolist() == [1.0, 8.0, -1.0]
    finally:
        remove_decomposition(aten.gelu)
    from cstorch._backend import _reset_backend

    _reset_backend()
    torch.testing.assert_close(_run("CSX", torch.nn.functional.gelu, x)[0], torch.nn.functional.gelu(x[0]))


def test_distributed_helpers():
    d = cstorch.distributed
    assert d.is_receiver() and d.num_receivers() == 1 and d.is_master_ordinal(local=True)
    with pytest.raises(TypeError, match="Expected effective batch size to be an integer"):
        d.get_streaming_batch_size(2.0)
    with pytest.raises(ValueError, match="Expected effective batch size to be a positive integer"):
        d.get_streaming_batch_size(-4)
    seen = []

    def input_fn():
        seen.append((d.is_streamer(), d.is_receiver()))
        return [torch.ones(1)]

    cstorch.backend("CPU")
    for _ in cstorch.utils.data.DataExecutor(cstorch.utils.data.DataLoader(input_fn), num_steps=1):
        pass
    assert seen == [(True, False)]
