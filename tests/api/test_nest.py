"""`cstorch.utils.nest`: scopes, visits and maps of nested structures, compared with the
structures written out by hand; the mapping used inside a compiled step."""
from collections import OrderedDict, UserDict, namedtuple

import pytest
import torch
from torch.utils._pytree import tree_flatten

import cstorch
from cstorch.utils import nest

Pair = namedtuple("Pair", "left right")


def _data():
    return {"a": torch.ones(2), "b": [torch.zeros(1), 3, (torch.full((1,), 2.0), "s")], "c": Pair(torch.ones(1), None)}


def test_recurse_spec_gives_each_leafs_scope_in_leaf_order():
    data = _data()
    leaves, spec = tree_flatten(data)
    scopes = list(nest.recurse_spec(spec))
    assert scopes == [["a"], ["b", "0"], ["b", "1"], ["b", "2", "0"], ["b", "2", "1"], ["c", "0"], ["c", "1"]]
    assert len(scopes) == len(leaves)
    assert list(nest.recurse_spec(tree_flatten(OrderedDict(x=1, y=[2]))[1], ["root"])) == \
        [["root", "x"], ["root", "y", "0"]]
    assert list(nest.recurse_spec(tree_flatten({})[1])) == []


def test_visit_structure_and_the_tensor_visitors():
    data = _data()
    got = [(".".join(s), t.tolist()) for s, t in nest.visit_torch_tensors(data)]
    assert got == [("a", [1.0, 1.0]), ("b.0", [0.0]), ("b.2.0", [2.0]), ("c.0", [1.0])]
    ints = list(nest.visit_structure(data, lambda x: isinstance(x, int), scope=["top"]))
    assert ints == [(["top", "b", "1"], 3)]
    with pytest.raises(ValueError, match="Unknown data structure"):
        list(nest.visit_torch_tensors(data, strict=True))
    assert [s for s, _ in nest.visit_device_tensors(data, "cpu")] == [["a"], ["b", "0"], ["b", "2", "0"], ["c", "0"]]
    assert list(nest.visit_device_tensors(data, "cuda")) == []
    assert [s for s, _ in nest.visit_torch_tensors(UserDict(k=torch.ones(1)))] == [["k"]]


def test_lazy_tensors_are_the_tensors_of_a_csx_backend():
    data = {"x": torch.ones(1)}
    assert list(nest.visit_lazy_tensors(data)) == []
    cstorch.backend("CSX")
    assert [s for s, _ in nest.visit_lazy_tensors(data)] == [["x"]]
    assert nest.map_lazy_tensors(lambda s, t: t * 2, data)["x"].item() == 2.0


def test_map_structure_rebuilds_the_structure():
    data = _data()
    out = nest.map_torch_tensors(lambda scope, t: t + len(scope), data)
    assert out["a"].tolist() == [2.0, 2.0] and out["b"][2][0].tolist() == [5.0]
    assert isinstance(out["c"], Pair) and out["c"].left.tolist() == [3.0] and out["b"][1] == 3
    named = nest.map_structure(lambda scope, x: ".".join(scope), {"p": [1, 2]}, lambda x: isinstance(x, int))
    assert named == {"p": ["p.0", "p.1"]}


class Box:
    def __init__(self, **items):
        self.items = items


def visit_box(box):
    for k, v in box.items.items():
        yield [f"box_{k}"], v


def test_registered_visit_functions_and_their_serialization():
    nest.register_visit_fn(Box)(visit_box)
    try:
        assert nest.find_visit_fn(Box(a=1)) is visit_box
        assert [s for s, _ in nest.visit_torch_tensors([Box(w=torch.ones(1))])] == [["0", "box_w"]]
        with pytest.raises(TypeError, match="Expected a type"):
            nest.register_visit_fn("not a type")(visit_box)
        serialized = nest.serialize_visit_fns()
        nest.unregister_visit_fn(Box)
        assert nest.find_visit_fn(Box()) is None
        nest.deserialize_visit_fns(serialized)
        assert nest.find_visit_fn(Box()) is visit_box
        with pytest.warns(UserWarning, match="Overwriting"):
            nest.register_visit_fn(Box)(lambda b: iter([1]))
        with pytest.raises(TypeError, match="Expected visit function to return a list or tuple"):
            list(nest.visit_torch_tensors(Box()))
    finally:
        nest.unregister_visit_fn(Box)


def test_diff_names_differing_keys_and_values():
    assert list(nest.diff({"a": 1, "b": [2]}, {"a": 1, "b": [2]})) == []
    (keys,) = nest.diff({"a": 1}, {"b": 1})
    assert "['a']" in keys and "['b']" in keys
    assert list(nest.diff({"a": torch.ones(2)}, {"a": torch.zeros(2)})) == \
        ["Found mismatching values for a: tensor([1., 1.]) != tensor([0., 0.])"]


@pytest.mark.parametrize("kind", ["CPU", "CSX"])
def test_map_torch_tensors_inside_a_compiled_step(kind):
    cstorch.backend(kind)

    @cstorch.trace
    def step(batch):
        scaled = nest.map_torch_tensors(lambda scope, t: t * (2.0 if scope[0] == "x" else 3.0), batch)
        return sum(t.sum() for _, t in nest.visit_torch_tensors(scaled))

    batches = [{"x": torch.full((2,), float(i)), "y": [torch.ones(2)]} for i in range(3)]
    loader = cstorch.utils.data.DataLoader(lambda: batches)
    got = [float(step(b)) for b in cstorch.utils.data.DataExecutor(loader, num_steps=3)]
    assert got == [4.0 * i + 6.0 for i in range(3)]
