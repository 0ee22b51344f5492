"""Round-trip tests for cstorch.utils.tensorboard."""

import numpy as np
import pytest
import torch

pytest.importorskip("tensorboard")

import cstorch.utils.tensorboard as cstb  # noqa: E402
from tensorboard.backend.event_processing import event_accumulator as ea  # noqa: E402
from tensorboard.util import tensor_util  # noqa: E402

SCALARS = {1: 0.5, 3: 1.25, 7: -2.0}  # exactly representable in float32
TENSOR_A = torch.arange(6, dtype=torch.float32).reshape(2, 3) / 4
TENSOR_B = torch.tensor([[1, -2], [3, 4]], dtype=torch.int32)


def _write(log_dir):
    w = cstb.SummaryWriter(log_dir=str(log_dir), base_step=5)
    assert isinstance(w, torch.utils.tensorboard.SummaryWriter)
    for step, v in SCALARS.items():
        w.add_scalar("loss", v, global_step=step)
    w.add_scalar("lr", 0.25)  # no step -> base_step (5)
    w.add_tensor("weights", TENSOR_A, 2)
    w.add_tensor("weights", TENSOR_A * 2, 4)
    w.add_tensor("ints", TENSOR_B)  # no step -> base_step (5)
    w.add_text("note", "string tensors are not listed", 1)
    w.flush()
    w.close()


@pytest.fixture
def log_dir(tmp_path):
    d = tmp_path / "run"
    _write(d)
    return d


def test_reader_roundtrip(log_dir):
    r = cstb.SummaryReader(str(log_dir))
    assert r.scalar_names() == ["loss", "lr"]
    assert r.tensor_names() == ["ints", "weights"]
    assert r.read_scalar("loss") == sorted(SCALARS.items())
    assert r.read_scalar("loss", 3) == 1.25
    assert r.read_scalar("lr") == [(5, 0.25)]

    weights = r.read_tensor("weights")
    assert [s for s, _ in weights] == [2, 4]
    assert torch.equal(weights[0][1], TENSOR_A)
    assert torch.equal(weights[1][1], TENSOR_A * 2)
    ints = r.read_tensor("ints", 5)
    assert ints.dtype == torch.int32 and torch.equal(ints, TENSOR_B)

    assert r.Scalars() == {"loss": sorted(SCALARS.items()), "lr": [(5, 0.25)]}
    tensors = r.Tensors()
    assert sorted(tensors) == ["ints", "weights"]
    assert tensors["ints"][0][0] == 5


def test_independent_event_accumulator(log_dir):
    acc = ea.EventAccumulator(str(log_dir), size_guidance={ea.SCALARS: 0, ea.TENSORS: 0})
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("loss")] == sorted(SCALARS.items())
    assert [(e.step, e.value) for e in acc.Scalars("lr")] == [(5, 0.25)]
    ev = acc.Tensors("weights")
    assert [e.step for e in ev] == [2, 4]
    np.testing.assert_array_equal(tensor_util.make_ndarray(ev[0].tensor_proto), TENSOR_A.numpy())
    (ints,) = acc.Tensors("ints")
    assert ints.step == 5
    arr = tensor_util.make_ndarray(ints.tensor_proto)
    assert arr.dtype == np.int32
    np.testing.assert_array_equal(arr, TENSOR_B.numpy())
    assert acc.SummaryMetadata("weights").plugin_data.plugin_name == "tensors"


def test_recursive_and_list_of_dirs(tmp_path):
    _write(tmp_path / "a" / "nested")
    w = cstb.SummaryWriter(log_dir=str(tmp_path / "b"))  # default base_step=1
    w.add_scalar("loss", 9.0)
    w.close()
    r = cstb.SummaryReader([tmp_path / "a", str(tmp_path / "b")])
    # step 1 was written in both runs; "b" was written later, so it wins.
    assert r.read_scalar("loss") == [(1, 9.0), (3, 1.25), (7, -2.0)]
    assert cstb.SummaryReader(tmp_path).read_scalar("lr") == [(5, 0.25)]


def test_filter(log_dir):
    r = cstb.SummaryReader(log_dir, filter=lambda tag: tag in ("lr", "ints"))
    assert r.scalar_names() == ["lr"]
    assert r.tensor_names() == ["ints"]
    with pytest.raises(KeyError, match="loss"):
        r.read_scalar("loss")


def test_missing_step_raises_keyerror(log_dir):
    r = cstb.SummaryReader(log_dir)
    with pytest.raises(KeyError, match=r"'loss'.*step 2.*\[1, 3, 7\]"):
        r.read_scalar("loss", 2)
    with pytest.raises(KeyError, match="weights"):
        r.read_tensor("weights", 3)


def test_add_tensor_rejects_non_tensor(tmp_path):
    w = cstb.SummaryWriter(log_dir=str(tmp_path))
    try:
        with pytest.raises(TypeError, match="'tensor'"):
            w.add_tensor("x", np.zeros(3), 1)
        with pytest.raises(TypeError, match="'tensor'"):
            w.add_tensor("x", [1.0, 2.0], 1)
    finally:
        w.close()


def test_missing_dir_raises(tmp_path):
    missing = tmp_path / "does_not_exist"
    with pytest.raises(FileNotFoundError, match="does_not_exist"):
        cstb.SummaryReader(missing)
    with pytest.raises(FileNotFoundError, match="does_not_exist"):
        cstb.SummaryReader([tmp_path, missing])
