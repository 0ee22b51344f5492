"""cstorch.save / cstorch.load against an independent implementation of the
Cerebras H5 checkpoint layout, format 0.5 (see real_layout.py).

Direction 1: a file written by ``real_layout.write_real_layout`` (the layout the
real ``cerebras.pytorch.save`` writes) must load with ``cstorch.load``.
Direction 2: a file written by ``cstorch.save`` must read back with the plain
spec reader ``real_layout.read_real_layout`` and have exactly the specified
structure (root attributes, dataset names/attrs/filters/dtypes).
"""

from __future__ import annotations

import json
import pickle

import h5py
import numpy as np
import pytest
import torch
from torch.utils import _pytree as pytree

import cstorch
from real_layout import (
    CSTORCH_VERSION,
    FORMAT_VERSION,
    LZ4_FILTER_ID,
    RTFX_DTYPES,
    flatten_with_keys,
    leaf_metadata,
    metadata_attr,
    read_real_layout,
    spec_entry,
    wrapped_metadata,
    write_real_layout,
)

# ----------------------------------------------------------------------- fixtures


def _t(gen, shape, dtype):
    if dtype == torch.bool:
        return torch.rand(shape, generator=gen) > 0.5
    if dtype.is_floating_point:
        return torch.randn(shape, generator=gen).to(dtype)
    return torch.randint(-1000 if dtype != torch.uint8 else 0, 1000 if dtype != torch.uint8 else 255,
                         shape, generator=gen).to(dtype)


def make_state():
    """A small model/optimizer-like state.

    Every non-tensor leaf is a distinct Python object (see _assert_only_intended_aliases),
    so that the only aliases are the deliberately tied tensors.
    """
    g = torch.Generator().manual_seed(0)
    w = _t(g, (3, 4), torch.float32)
    b = _t(g, (4,), torch.float32)
    state = {
        "model": {
            "fc.weight": w,
            "fc.bias": b,
            "emb.weight": _t(g, (5, 2), torch.bfloat16),
            "half": _t(g, (2, 3), torch.float16),
            "ids": _t(g, (2, 2, 2), torch.int32),
            "mask": _t(g, (3,), torch.bool),
            "num_batches_tracked": torch.tensor(17, dtype=torch.int64),
            "positions": _t(g, (6,), torch.int64),
            "scale": torch.tensor(1.25, dtype=torch.float32),
            "bf_scalar": torch.tensor(-3.5, dtype=torch.bfloat16),
            "lm_head.weight": w,  # tied to fc.weight
        },
        "optimizer": {
            "state": {
                0: {"step": torch.tensor(3.0), "exp_avg": _t(g, (3, 4), torch.float32)},
                1: {"step": torch.tensor(4.0), "exp_avg": _t(g, (4,), torch.float32)},
            },
            "param_groups": [
                {
                    "lr": 0.001,
                    "betas": (0.9, 0.999),
                    "eps": 1e-8,
                    "weight_decay": 0.01,
                    "amsgrad": False,
                    "foreach": None,
                    "params": [0, 1],
                    "name": "decay",
                }
            ],
        },
        "lr_scheduler": {"last_epoch": 7, "_last_lr": [0.0005], "verbose": True},
        "buffers": [b],  # tied across containers
        "extra": ("tag", 42, [2.5, "x"], {}),
        "empty_list": [],
    }
    return state


def _assert_only_intended_aliases(state):
    keys, leaves, _ = flatten_with_keys(state)
    seen = {}
    for k, leaf in zip(keys, leaves):
        if not isinstance(leaf, torch.Tensor):
            assert id(leaf) not in seen, (
                f"test state has non-tensor leaves {seen.get(id(leaf))!r} and {k!r} that are the "
                "same Python object; keep them distinct so aliasing is unambiguous"
            )
        seen.setdefault(id(leaf), k)


def assert_same(got, want, where="root"):
    """Exact structural/value equality; tensors compared through torch ops."""
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor), f"{where}: {type(got)} is not a torch.Tensor"
        assert got.dtype == want.dtype, f"{where}: dtype {got.dtype} != {want.dtype}"
        assert tuple(got.shape) == tuple(want.shape), f"{where}: shape {tuple(got.shape)} != {tuple(want.shape)}"
        assert torch.equal(got, want), f"{where}: values differ\n{got}\n!=\n{want}"
    elif isinstance(want, dict):
        assert type(got) is type(want), f"{where}: {type(got)} != {type(want)}"
        assert [(type(k), k) for k in got] == [(type(k), k) for k in want], (
            f"{where}: keys {list(got)} != {list(want)}"
        )
        for k in want:
            assert_same(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, (list, tuple)):
        assert type(got) is type(want), f"{where}: {type(got)} != {type(want)}"
        assert len(got) == len(want), f"{where}: len {len(got)} != {len(want)}"
        for i, (a, b) in enumerate(zip(got, want)):
            assert_same(a, b, f"{where}.{i}")
    elif want is None:
        assert got is None, f"{where}: {got!r} is not None"
    else:
        assert type(got) is type(want), f"{where}: {type(got)} ({got!r}) != {type(want)} ({want!r})"
        assert got == want, f"{where}: {got!r} != {want!r}"


def _assert_ties(loaded):
    m = loaded["model"]
    assert m["lm_head.weight"] is m["fc.weight"], "tied weight was not re-tied (same object)"
    assert loaded["buffers"][0] is m["fc.bias"], "cross-container tie was not re-tied"
    assert m["fc.weight"] is not m["fc.bias"]


# --------------------------------------------------------- the helper on its own


def test_helper_self_roundtrip(tmp_path):
    """Sanity: the independent writer and reader agree with each other."""
    state = make_state()
    _assert_only_intended_aliases(state)
    path = tmp_path / "self.h5"
    write_real_layout(path, state)
    loaded = read_real_layout(path)
    assert_same(loaded, state)
    _assert_ties(loaded)
    check_structure(path, state)  # the structure checker accepts the reference writer


# --------------------------------------------------- real layout -> cstorch.load


def test_cstorch_load_reads_real_layout(tmp_path):
    state = make_state()
    _assert_only_intended_aliases(state)
    path = tmp_path / "real.h5"
    write_real_layout(path, state)

    loaded = cstorch.load(str(path))

    assert_same(loaded, state)
    _assert_ties(loaded)


def test_cstorch_load_links_to_non_tensor_leaves(tmp_path):
    """Per the spec, *any* leaf that is the same Python object as an earlier one is
    written as a LinkedObject, e.g. the singletons None/False and cached small ints
    of an optimizer state dict.  cstorch.load must resolve such links."""
    state = {
        "a": None,
        "b": None,
        "flags": [False, False, True],
        "params": [0, 1, 0],
        "names": ["adam", "adam"],
    }
    path = tmp_path / "links.h5"
    write_real_layout(path, state)
    with h5py.File(path, "r") as f:  # the writer did produce links here
        m = json.loads(f.attrs["b.__metadata__"])["b.__metadata__"]
        assert m == {"key": "a", "__LINKED__": True, "__TYPE__": "LinkedObject", "__NONE__": True}

    loaded = cstorch.load(str(path))
    assert_same(loaded, state)


@pytest.mark.parametrize("dtype", [torch.float64, torch.int16, torch.uint8])
def test_cstorch_load_other_dtypes(tmp_path, dtype):
    g = torch.Generator().manual_seed(1)
    state = {"t": _t(g, (2, 3), dtype), "s": _t(g, (), dtype)}
    path = tmp_path / "dt.h5"
    write_real_layout(path, state)
    assert_same(cstorch.load(str(path)), state)


def test_cstorch_load_requires_success_marker(tmp_path):
    path = tmp_path / "incomplete.h5"
    write_real_layout(path, {"w": torch.ones(2)})
    with h5py.File(path, "a") as f:
        del f.attrs["__SUCCESS__"]
    with pytest.raises(Exception):
        cstorch.load(str(path))


def test_cstorch_load_rejects_other_version(tmp_path):
    path = tmp_path / "newer.h5"
    write_real_layout(path, {"w": torch.ones(2)})
    with h5py.File(path, "a") as f:
        f.attrs["__version__"] = 0.9
    with pytest.raises(Exception):
        cstorch.load(str(path))


# ------------------------------------------------ cstorch.save -> spec reader


def _attr_str(v):
    return v.decode() if isinstance(v, bytes) else v


def _json_norm(x):
    return json.loads(json.dumps(x))


def check_structure(path, state):
    """Assert that ``path`` has exactly the format-0.5 structure for ``state``."""
    keys, leaves, _ = flatten_with_keys(state)

    expected_meta = {}
    expected_datasets = {}
    first_key_by_id = {}
    for k, leaf in zip(keys, leaves):
        alias_of = first_key_by_id.get(id(leaf))
        if alias_of is None:
            first_key_by_id[id(leaf)] = k
        meta = leaf_metadata(leaf, alias_of=alias_of)
        expected_meta[k] = _json_norm(wrapped_metadata(k, leaf, meta))
        if alias_of is None and meta["__TYPE__"] in ("TorchTensorSerializer", "ObjectSerializer"):
            expected_datasets[k] = leaf

    with h5py.File(path, "r") as f:
        # --- root attributes
        expected_attrs = {"__spec__", "__version__", "__cstorch_version__", "__SUCCESS__"}
        expected_attrs |= {metadata_attr(k) for k in keys}
        assert set(f.attrs) == expected_attrs, (
            f"extra root attrs {sorted(set(f.attrs) - expected_attrs)}, "
            f"missing {sorted(expected_attrs - set(f.attrs))}"
        )

        success = f.attrs["__SUCCESS__"]
        assert isinstance(success, (bool, np.bool_)) and bool(success) is True

        version = f.attrs["__version__"]
        assert isinstance(version, (float, np.floating)), type(version)
        assert float(version) == FORMAT_VERSION

        cs_version = _attr_str(f.attrs["__cstorch_version__"])
        assert isinstance(cs_version, str) and cs_version == CSTORCH_VERSION

        raw_spec = _attr_str(f.attrs["__spec__"])
        assert json.loads(raw_spec) == _json_norm(spec_entry(state))
        # byte-exact: the real library writes json.dumps(..., indent=4)
        assert raw_spec == json.dumps(spec_entry(state), indent=4)

        for k in keys:
            raw = _attr_str(f.attrs[metadata_attr(k)])
            got = json.loads(raw)
            assert got == expected_meta[k], f"{k}: metadata\n{got}\n!=\n{expected_meta[k]}"
            assert raw == json.dumps(expected_meta[k], indent=4), f"{k}: metadata not json.dumps(indent=4)"

        # --- datasets: flat at the root, one per tensor (first occurrence) / object
        assert set(f.keys()) == set(expected_datasets), (
            f"extra datasets {sorted(set(f.keys()) - set(expected_datasets))}, "
            f"missing {sorted(set(expected_datasets) - set(f.keys()))}"
        )
        for k, leaf in expected_datasets.items():
            ds = f[k]
            assert isinstance(ds, h5py.Dataset), f"{k} is a {type(ds)}"
            if isinstance(leaf, torch.Tensor):
                _check_tensor_dataset(k, ds, leaf)
            else:
                _check_object_dataset(k, ds, leaf)


def _check_tensor_dataset(k, ds, t):
    want_np = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).detach().cpu().numpy()
    assert ds.shape == tuple(t.shape), f"{k}: shape {ds.shape} != {tuple(t.shape)}"
    assert ds.dtype == want_np.dtype, f"{k}: h5 dtype {ds.dtype} != {want_np.dtype}"
    if t.dtype == torch.bfloat16:
        assert ds.dtype == np.int16
    np.testing.assert_array_equal(np.asarray(ds[()]), want_np, err_msg=k)

    if t.ndim >= 1:
        assert str(LZ4_FILTER_ID) in ds._filters, f"{k}: filters {ds._filters}"
        assert ds.id.get_create_plist().get_filter(0)[0] == LZ4_FILTER_ID
        assert ds.chunks is not None
    else:
        assert ds._filters == {}, f"{k}: 0-d dataset has filters {ds._filters}"
        assert ds.compression is None

    attrs = dict(ds.attrs)
    assert set(attrs) == {
        "__TORCH__", "shapes", "dtypes", "rtfx_dtypes", "__TYPE__", "compressed", "__NUMPY__",
    }, f"{k}: dataset attrs {sorted(attrs)}"
    assert bool(attrs["__TORCH__"]) is True, f"{k}: __TORCH__ {attrs['__TORCH__']!r}"
    assert bool(attrs["__NUMPY__"]) is True, f"{k}: __NUMPY__ {attrs['__NUMPY__']!r}"
    assert bool(attrs["compressed"]) is False, f"{k}: compressed {attrs['compressed']!r}"
    assert _attr_str(attrs["__TYPE__"]) == "TorchTensorSerializer", f"{k}: __TYPE__ {attrs['__TYPE__']!r}"
    assert np.asarray(attrs["shapes"]).tolist() == [list(t.shape)], f"{k}: shapes {attrs['shapes']!r}"
    dtypes = [_attr_str(x) for x in np.asarray(attrs["dtypes"]).tolist()]
    assert dtypes == [str(t.dtype)], f"{k}: dtypes {dtypes}"
    rtfx = np.asarray(attrs["rtfx_dtypes"]).tolist()
    assert rtfx == [RTFX_DTYPES[t.dtype]], f"{k}: rtfx_dtypes {rtfx}"


def _check_object_dataset(k, ds, obj):
    assert ds.shape is None, f"{k}: object dataset should be h5py.Empty, shape {ds.shape}"
    assert isinstance(ds[()], h5py.Empty)
    assert _attr_str(ds.attrs["__TYPE__"]) == "ObjectSerializer"
    raw = ds.attrs["__BYTES__"]
    assert isinstance(raw, np.void), type(raw)
    assert pickle.loads(raw.tobytes()) == obj


def test_cstorch_save_matches_spec(tmp_path):
    state = make_state()
    _assert_only_intended_aliases(state)
    path = tmp_path / "cs.h5"

    cstorch.save(state, str(path))

    loaded = read_real_layout(path)
    assert_same(loaded, state)
    _assert_ties(loaded)
    check_structure(path, state)


def test_cstorch_save_then_load(tmp_path):
    state = make_state()
    path = tmp_path / "cs_rt.h5"
    cstorch.save(state, str(path))
    loaded = cstorch.load(str(path))
    assert_same(loaded, state)
    _assert_ties(loaded)


# ----------------------------------------------------------------- pickled objects

UNPICKLED = [0]


class Payload:
    """A plain picklable object (a pytree leaf); counts how often it is unpickled."""

    def __init__(self, data):
        self.data = data

    def __eq__(self, other):
        return type(other) is Payload and other.data == self.data

    def __setstate__(self, state):
        UNPICKLED[0] += 1
        self.__dict__.update(state)


def _payload():
    return Payload({"vocab": ["a", "b"], "n": 3, "nested": (1.5, None)})


def test_real_layout_object_not_unpickled_by_default(tmp_path):
    obj = _payload()
    state = {"w": torch.arange(3, dtype=torch.float32), "o": obj}
    path = tmp_path / "obj.h5"
    write_real_layout(path, state)

    before = UNPICKLED[0]
    loaded = cstorch.load(str(path))
    assert UNPICKLED[0] == before, "cstorch.load unpickled an object without allow_pickle=True"
    placeholder = loaded["o"]
    assert not isinstance(placeholder, Payload)
    assert hasattr(placeholder, "unpickle")
    assert_same(loaded["w"], state["w"])

    assert placeholder.unpickle() == obj  # explicit opt-in on the placeholder


def test_real_layout_object_allow_pickle(tmp_path):
    obj = _payload()
    state = {"w": torch.arange(3, dtype=torch.float32), "o": obj}
    path = tmp_path / "obj.h5"
    write_real_layout(path, state)
    check_structure(path, state)  # the reference writer's object layout

    loaded = cstorch.load(str(path), allow_pickle=True)
    assert isinstance(loaded["o"], Payload)
    assert loaded["o"] == obj
    assert_same(loaded["w"], state["w"])


def test_cstorch_save_object_requires_allow_pickle(tmp_path):
    obj = _payload()
    with pytest.raises(TypeError):
        cstorch.save({"o": obj}, str(tmp_path / "refused.h5"))

    path = tmp_path / "obj_cs.h5"
    state = {"w": torch.ones(2, 2), "o": obj}
    cstorch.save(state, str(path), allow_pickle=True)

    check_structure(path, state)
    loaded = read_real_layout(path)
    assert loaded["o"] == obj
    assert_same(loaded["w"], state["w"])
    assert cstorch.load(str(path), allow_pickle=True)["o"] == obj
