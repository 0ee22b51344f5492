"""`DeviceState.arrays`: the device copies of state tensors, uploaded in one transfer when a
run first uses them and again after a host write; a tensor that changed its shape or was
written over newer device values is refused before anything is uploaded."""
import numpy as np
import pytest
import torch

from cstorch_jax import StaticGraphError, TensorSpec
from cstorch_jax.errors import CstorchError
from cstorch_jax.placement import SingleDevice
from cstorch_jax.runtime import DeviceState


class CountingPlacement(SingleDevice):
    """One device; records the names of every `state_arrays` transfer."""

    def __init__(self):
        self.transfers = []

    def state_arrays(self, tensors, names):
        self.transfers.append(list(names))
        return super().state_arrays(tensors, names)


def _state(n=5):
    tensors = [torch.randn(3, i + 1) for i in range(n)]
    return tensors, [TensorSpec.of(t) for t in tensors], [f"w{i}" for i in range(n)]


def test_first_use_uploads_every_tensor_in_one_transfer_and_a_host_write_again():
    placement = CountingPlacement()
    ds = DeviceState(placement=placement)
    tensors, specs, names = _state()
    arrays = ds.arrays(tensors, specs, names)
    assert placement.transfers == [names]
    for t, a in zip(tensors, arrays):
        np.testing.assert_array_equal(np.asarray(a), t.numpy())
    assert ds.arrays(tensors, specs, names) == arrays and len(placement.transfers) == 1  # held: no transfer
    with torch.no_grad():
        tensors[2].mul_(2.0)  # a host write between steps
    again = ds.arrays(tensors, specs, names)
    assert placement.transfers[1:] == [["w2"]]
    np.testing.assert_array_equal(np.asarray(again[2]), tensors[2].numpy())
    assert [a for i, a in enumerate(again) if i != 2] == [a for i, a in enumerate(arrays) if i != 2]


def test_a_tensor_whose_shape_changed_is_refused_before_anything_is_uploaded():
    placement = CountingPlacement()
    ds = DeviceState(placement=placement)
    tensors, specs, names = _state()
    tensors[3] = torch.randn(2, 2)
    with pytest.raises(StaticGraphError, match="state tensor w3 was compiled as .* cannot change the shape"):
        ds.arrays(tensors, specs, names)
    assert placement.transfers == [] and ds.tensors == []


def test_a_host_write_over_newer_device_values_is_refused():
    ds = DeviceState(placement=CountingPlacement())
    tensors, specs, names = _state(2)
    arrays = ds.arrays(tensors, specs, names)
    ds.update(tensors[:1], [arrays[0] + 1])  # a step changed w0 on the device
    with torch.no_grad():
        tensors[0].zero_()  # and the host writes w0 without syncing first
    with pytest.raises(CstorchError, match="state tensor w0 was written on the host while the device held newer"):
        ds.arrays(tensors, specs, names)
