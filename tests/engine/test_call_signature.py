"""`cstorch_jax.call_signature`: a call cut into tensors and frozen leaves, put back."""
import torch

from cstorch_jax.call_signature import TENSOR, CallSignature, OutputLayout


def test_a_call_is_cut_into_its_tensors_and_rebuilt_around_others():
    x, m = torch.ones(2, 3), torch.zeros(2, dtype=torch.bool)
    call = CallSignature.of((x, [4, "s"]), {"mask": m, "p": None})
    assert call.tensors[0] is x and call.tensors[1] is m
    assert call.static == [TENSOR, 4, "s", TENSOR, None]
    assert call.tensor_names == ["argument [0]", "keyword argument ['mask']"]
    y, n = torch.full((2, 3), 2.0), torch.ones(2, dtype=torch.bool)
    args, kwargs = call.rebuild([y, n])
    assert args[0] is y and args[1] == [4, "s"] and kwargs["mask"] is n and kwargs["p"] is None


def test_the_key_tells_calls_one_executable_serves():
    def key(*args, **kwargs):
        return CallSignature.of(args, kwargs).key()

    assert key(torch.ones(2), 3) == key(torch.zeros(2), 3)  # values of tensors do not count
    assert key(torch.ones(2), 3) != key(torch.ones(3), 3)  # shapes do
    assert key(torch.ones(2), 3) != key(torch.ones(2, dtype=torch.float64), 3)  # dtypes do
    assert key(torch.ones(2), 3) != key(torch.ones(2, requires_grad=True), 3)
    assert key(torch.ones(2), 3) != key(torch.ones(2), 4)  # other leaves by value
    assert key(torch.ones(2), 3) != key(torch.ones(2), c=3)  # and the structure


def test_a_result_is_rebuilt_with_new_values_in_its_tensors_places():
    layout, tensors = OutputLayout.of({"loss": torch.tensor(1.0), "n": 7, "parts": (torch.ones(2),)})
    assert len(tensors) == 2
    out = layout.rebuild(["a", "b"])
    assert out == {"loss": "a", "n": 7, "parts": ("b",)}
