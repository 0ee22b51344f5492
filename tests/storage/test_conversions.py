"""Checkpoint conversions: H5 <-> orbax <-> torch pickle, bit-exact, and the CLI.

Acceptance: round trips H5 -> orbax -> H5 and H5 -> torch pickle are bit-exact for
f32, f16, bf16, int64, bool and nested dict/list/tuple state with scalars, strings
and None.
"""
from __future__ import annotations

import os
import pickle
import struct
import subprocess
import sys

import h5py
import ml_dtypes
import numpy as np
import pytest
import torch

import cstorch
from cstorch.checkpoint import from_orbax, info, to_h5, to_orbax, to_torch
from cstorch.checkpoint.__main__ import main
from cstorch.storage import PickledObject

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# -- the state ------------------------------------------------------------------------------------

INT_VIEW = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16,
            torch.float64: torch.int64, torch.bool: torch.uint8}


def _from_bits(bits, np_uint, np_int, dtype):
    return torch.from_numpy(np.array(bits, dtype=np_uint).view(np_int)).view(dtype)


def f32_bits(*bits):
    return _from_bits(bits, np.uint32, np.int32, torch.float32)


def f16_bits(*bits):
    return _from_bits(bits, np.uint16, np.int16, torch.float16)


def bf16_bits(*bits):
    return _from_bits(bits, np.uint16, np.int16, torch.bfloat16)


# quiet NaN with payload, negative NaN with payload, signalling NaN, -0.0, +-inf, smallest and
# largest subnormal, 1.0
F32 = f32_bits(0x7FC00001, 0xFFC12345, 0x7F800001, 0x80000000, 0x7F800000, 0xFF800000, 0x00000001, 0x007FFFFF,
               0x3F800000)
F16 = f16_bits(0x7E01, 0xFE5A, 0x7C01, 0x8000, 0x7C00, 0xFC00, 0x0001, 0x03FF, 0x3C00)
BF16 = bf16_bits(0x7FC1, 0xFFA5, 0x7F81, 0x8000, 0x7F80, 0xFF80, 0x0001, 0x007F, 0x3F80)


def make_state():
    w = f32_bits(*range(0x3F800000, 0x3F800000 + 6)).reshape(2, 3)  # tied weight
    bfw = BF16.reshape(3, 3)
    return {
        "f32": F32.reshape(3, 3),
        "f16": F16.clone(),
        "bf16": bfw,
        "i64": torch.tensor([[2**40 + 7, -(2**62) - 3], [2**63 - 1, -(2**63)], [2**31, -(2**31) - 1]]),
        "bool": torch.tensor([[True, False, True], [False, False, True]]),
        "scalars": {
            "f32": f32_bits(0x7FC0BEEF).reshape(()),
            "f16": f16_bits(0x8000).reshape(()),
            "bf16": bf16_bits(0x0001).reshape(()),
            "i64": torch.tensor(-(2**53) - 1),
            "bool": torch.tensor(True),
        },
        "empty": torch.zeros(0, 3),
        "empty_bf16": torch.zeros(2, 0, dtype=torch.bfloat16),
        "model": {"w": w, "b": torch.zeros(3, dtype=torch.float16)},
        "tied_w": w,
        "tied_bf16": bfw,
        "nested": {
            0: [w, (1, -(2**62), 2.5, -0.0, float("inf"), True, False, None, "héllo ✓ 日本", ""),
                {"deep": [(None,), []]}],
            7: ("x", 3),
            "str": "plain",
        },
        "py": {"nan": float("nan"), "ninf": float("-inf"), "tiny": 5e-324, "big": 2**62 + 1, "t": True,
               "none": None, "lst": [1, 2.0, "three"], "tup": (4,), "empty_dict": {}},
    }


# -- comparisons ----------------------------------------------------------------------------------

def tensor_bits(t: torch.Tensor) -> torch.Tensor:
    t = t.detach()
    return t.view(INT_VIEW[t.dtype]) if t.dtype in INT_VIEW else t


def assert_tensor_exact(a, b, where):
    assert isinstance(b, torch.Tensor), f"{where}: {type(b).__name__} is not a tensor"
    assert a.dtype == b.dtype, f"{where}: dtype {b.dtype} != {a.dtype}"
    assert tuple(a.shape) == tuple(b.shape), f"{where}: shape {tuple(b.shape)} != {tuple(a.shape)}"
    ab, bb = tensor_bits(a), tensor_bits(b)
    assert torch.equal(ab, bb), f"{where}: bits differ\n{ab}\n{bb}"


def float_bits(x: float) -> bytes:
    return struct.pack("<d", x)


def assert_same(a, b, where="state"):
    """Same nesting, container types, dict keys (with their types and order), exact values."""
    if isinstance(a, torch.Tensor):
        assert_tensor_exact(a, b, where)
        return
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray), f"{where}: {type(b).__name__} is not an ndarray"
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), where
        return
    assert type(a) is type(b), f"{where}: type {type(b).__name__} != {type(a).__name__}"
    if isinstance(a, dict):
        assert [(type(k), k) for k in a] == [(type(k), k) for k in b], f"{where}: keys {list(b)} != {list(a)}"
        for k in a:
            assert_same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), f"{where}: length {len(b)} != {len(a)}"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, float):
        assert float_bits(a) == float_bits(b), f"{where}: {b!r} != {a!r}"
    elif isinstance(a, PickledObject):
        assert a.data == b.data, where
    else:
        assert a == b, f"{where}: {b!r} != {a!r}"


def assert_ties(state):
    w = state["model"]["w"]
    assert state["tied_w"] is w
    assert state["nested"][0][0] is w
    assert state["tied_bf16"] is state["bf16"]


def assert_ties_share_storage(state):
    w = state["model"]["w"]
    for other in (state["tied_w"], state["nested"][0][0]):
        assert other is w or other.data_ptr() == w.data_ptr()
    assert state["tied_bf16"] is state["bf16"] or state["tied_bf16"].data_ptr() == state["bf16"].data_ptr()


def _attr_value(v):
    if isinstance(v, np.ndarray):
        if v.dtype == object:  # variable-length strings: compare the values, not the pointers
            return ("ndarray", "O", v.shape, [x.decode() if isinstance(x, bytes) else x for x in v.ravel().tolist()])
        return ("ndarray", v.dtype.str, v.shape, v.tobytes())
    if isinstance(v, np.void):
        return ("void", v.dtype.str, v.tobytes())
    if isinstance(v, np.generic):
        return (type(v).__name__, v.tobytes())
    if isinstance(v, bytes):
        return ("bytes", v)
    return (type(v).__name__, v)


def h5_snapshot(path):
    """Everything of an H5 file that the format defines, comparable with ==."""
    with h5py.File(path, "r") as f:
        root = {k: _attr_value(f.attrs[k]) for k in f.attrs}
        datasets = {}
        for name, ds in f.items():
            assert isinstance(ds, h5py.Dataset), name
            if ds.shape is None:  # h5py.Empty (a pickled object)
                data = None
            else:
                data = np.asarray(ds[()]).tobytes()
            datasets[name] = {
                "dtype": ds.dtype.str, "shape": ds.shape, "data": data, "compression": ds.compression,
                "compression_opts": ds.compression_opts,
                "filters": sorted(ds._filters) if hasattr(ds, "_filters") else None,
                "attrs": {k: _attr_value(ds.attrs[k]) for k in ds.attrs},
            }
    return root, datasets


def assert_same_h5(p1, p2):
    root1, ds1 = h5_snapshot(p1)
    root2, ds2 = h5_snapshot(p2)
    assert sorted(root1) == sorted(root2)
    for k in root1:
        assert root1[k] == root2[k], f"root attribute {k!r} differs:\n{root1[k]}\n{root2[k]}"
    assert sorted(ds1) == sorted(ds2)
    for k in ds1:
        assert ds1[k] == ds2[k], f"dataset {k!r} differs:\n{ds1[k]}\n{ds2[k]}"


def dir_snapshot(d):
    out = {}
    for base, _, files in os.walk(d):
        for name in files:
            p = os.path.join(base, name)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, d)] = fh.read()
    return out


# -- fixtures -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """One H5 checkpoint of make_state(), its orbax copy, the H5 back from orbax and its torch pickle."""
    d = tmp_path_factory.mktemp("conv")
    paths = {"h5": d / "a.h5", "orbax": d / "orbax", "h5b": d / "b.h5", "torch": d / "t.pt"}
    cstorch.save(make_state(), paths["h5"])
    to_orbax(paths["h5"], paths["orbax"])
    from_orbax(paths["orbax"], paths["h5b"])
    to_torch(paths["h5"], paths["torch"])
    return paths


# -- 1/2: H5 -> orbax -> H5 -----------------------------------------------------------------------

def test_h5_save_load_is_bit_exact(converted):
    state = cstorch.load(converted["h5"])
    assert_same(make_state(), state)
    assert_ties(state)


def test_h5_orbax_h5_files_are_identical(converted):
    assert_same_h5(converted["h5"], converted["h5b"])
    # sanity: the snapshot does look at what matters
    root, ds = h5_snapshot(converted["h5"])
    assert "__spec__" in root and "__version__" in root and "__SUCCESS__" in root
    assert "bf16.__metadata__" in root and "tied_w.__metadata__" in root and "py.nan.__metadata__" in root
    assert ds["bf16"]["dtype"] == np.dtype(np.int16).str and ds["i64"]["dtype"] == np.dtype(np.int64).str


def test_h5_orbax_h5_loads_the_same_state(converted):
    a = cstorch.load(converted["h5"])
    b = cstorch.load(converted["h5b"])
    assert_same(a, b)
    assert_same(make_state(), b)
    assert_ties(b)
    assert type(b["nested"][0][1]) is tuple and type(b["nested"][7]) is tuple
    assert list(b["nested"]) == [0, 7, "str"]


# -- 3: cstorch.load of the orbax directory --------------------------------------------------------

def test_load_orbax_directory(converted):
    state = cstorch.load(converted["orbax"])
    assert_same(make_state(), state)
    assert_ties(state)


# -- 4: the orbax directory from plain orbax / JAX -------------------------------------------------

def test_orbax_directory_restores_with_plain_orbax(converted):
    import orbax.checkpoint as ocp

    ckptr = ocp.Checkpointer(ocp.CompositeCheckpointHandler())
    meta = ckptr.restore(str(converted["orbax"]), ocp.args.Composite(metadata=ocp.args.JsonRestore()))["metadata"]
    names = meta["array_names"]
    assert {"bf16", "f32", "i64", "bool", "scalars.bf16", "model.w"} <= set(names)
    assert "tied_w" not in names and "empty" not in names  # links and zero-size arrays live in the metadata
    restore = {n: ocp.RestoreArgs(restore_type=np.ndarray) for n in names}
    arrays = ckptr.restore(str(converted["orbax"]),
                           ocp.args.Composite(arrays=ocp.args.PyTreeRestore(restore_args=restore)))["arrays"]
    bf = np.asarray(arrays["bf16"])
    assert bf.dtype == ml_dtypes.bfloat16 and bf.shape == (3, 3)
    assert bf.view(np.uint16).ravel().tolist() == BF16.view(torch.int16).numpy().view(np.uint16).tolist()
    assert np.asarray(arrays["scalars.bf16"]).dtype == ml_dtypes.bfloat16
    assert np.asarray(arrays["scalars.bf16"]).view(np.uint16) == 0x0001
    f32 = np.asarray(arrays["f32"])
    assert f32.dtype == np.float32 and f32.view(np.uint32).ravel().tolist() == \
        F32.view(torch.int32).numpy().view(np.uint32).tolist()
    i64 = np.asarray(arrays["i64"])
    assert i64.dtype == np.int64 and i64[1].tolist() == [2**63 - 1, -(2**63)]
    assert np.asarray(arrays["bool"]).dtype == np.bool_


def test_orbax_directory_restores_as_jax_arrays(converted):
    import jax
    import jax.numpy as jnp
    import orbax.checkpoint as ocp

    ckptr = ocp.Checkpointer(ocp.CompositeCheckpointHandler())
    sharding = jax.sharding.SingleDeviceSharding(jax.devices("cpu")[0])
    restore = {"bf16": ocp.ArrayRestoreArgs(sharding=sharding)}
    arrays = ckptr.restore(str(converted["orbax"]),
                           ocp.args.Composite(arrays=ocp.args.PyTreeRestore(
                               item={"bf16": 0}, restore_args=restore, partial_restore=True)))["arrays"]
    a = arrays["bf16"]
    assert isinstance(a, jax.Array) and a.dtype == jnp.bfloat16
    assert np.asarray(a).view(np.uint16).ravel().tolist() == BF16.view(torch.int16).numpy().view(np.uint16).tolist()


# -- 5: H5 -> torch pickle ------------------------------------------------------------------------

def _assert_plain_tensors(x, where="state"):
    if isinstance(x, torch.Tensor):
        assert type(x) is torch.Tensor, f"{where}: {type(x).__name__}"
    elif isinstance(x, dict):
        for k, v in x.items():
            _assert_plain_tensors(v, f"{where}[{k!r}]")
    elif isinstance(x, (list, tuple)):
        for i, v in enumerate(x):
            _assert_plain_tensors(v, f"{where}[{i}]")


def test_to_torch_is_bit_exact_and_weights_only(converted):
    state = torch.load(converted["torch"], weights_only=True)
    assert_same(make_state(), state)
    _assert_plain_tensors(state)
    assert_ties_share_storage(state)


def test_to_torch_from_orbax_directory(converted, tmp_path):
    to_torch(converted["orbax"], tmp_path / "t.pt")
    state = torch.load(tmp_path / "t.pt", weights_only=True)
    assert_same(make_state(), state)
    _assert_plain_tensors(state)
    assert_ties_share_storage(state)


def test_torch_save_of_loaded_state_is_plain(converted, tmp_path):
    torch.save(cstorch.load(converted["h5"]), tmp_path / "u.pt")
    state = torch.load(tmp_path / "u.pt", weights_only=True)
    assert_same(make_state(), state)
    _assert_plain_tensors(state)
    assert_ties_share_storage(state)


def test_torch_pickle_back_to_h5_is_identical(converted, tmp_path):
    to_h5(converted["torch"], tmp_path / "c.h5")
    assert_same_h5(converted["h5"], tmp_path / "c.h5")


# -- 6: pickled objects ---------------------------------------------------------------------------

UNPICKLED: list = []


class Recorder:
    """Records every unpickling of itself."""

    def __init__(self, tag):
        self.tag = tag

    def __getstate__(self):
        return {"tag": self.tag}

    def __setstate__(self, state):
        UNPICKLED.append(state["tag"])
        self.__dict__.update(state)


def test_pickled_objects_are_carried_without_unpickling(tmp_path):
    UNPICKLED.clear()
    obj = Recorder("r1")
    state = {"w": torch.ones(2), "extra": {"obj": obj}, "again": [obj]}
    expected = pickle.dumps(obj)
    cstorch.save(state, tmp_path / "a.h5", allow_pickle=True)
    to_orbax(tmp_path / "a.h5", tmp_path / "o")
    from_orbax(tmp_path / "o", tmp_path / "b.h5")
    assert UNPICKLED == []
    assert_same_h5(tmp_path / "a.h5", tmp_path / "b.h5")
    with h5py.File(tmp_path / "b.h5", "r") as f:
        assert f["extra.obj"].attrs["__BYTES__"].tobytes() == expected
    for p in (tmp_path / "b.h5", tmp_path / "o"):
        loaded = cstorch.load(p)
        assert isinstance(loaded["extra"]["obj"], PickledObject)
        assert loaded["extra"]["obj"].data == expected
        # a non-tensor object stored twice is pickled twice (identity is kept only for tensors/arrays)
        assert isinstance(loaded["again"][0], PickledObject) and loaded["again"][0].data == expected
    info(tmp_path / "o")  # describing the objects must not unpickle them either
    assert UNPICKLED == []

    with pytest.raises(ValueError, match="extra.obj"):
        to_torch(tmp_path / "b.h5", tmp_path / "t.pt")
    with pytest.raises(ValueError, match="extra.obj"):
        to_torch(tmp_path / "o", tmp_path / "t.pt")
    assert not (tmp_path / "t.pt").exists()
    assert UNPICKLED == []

    to_torch(tmp_path / "o", tmp_path / "t.pt", allow_pickle=True)
    back = torch.load(tmp_path / "t.pt", weights_only=False)
    assert type(back["extra"]["obj"]) is Recorder and back["extra"]["obj"].tag == "r1"
    assert type(back["again"][0]) is Recorder and back["again"][0].tag == "r1"
    assert torch.equal(back["w"], torch.ones(2))


def test_torch_pickle_with_objects_back_to_h5_with_allow_pickle(tmp_path):
    cstorch.save({"w": torch.ones(2), "obj": Recorder("back")}, tmp_path / "a.h5", allow_pickle=True)
    to_torch(tmp_path / "a.h5", tmp_path / "a.pt", allow_pickle=True)
    to_h5(tmp_path / "a.pt", tmp_path / "b.h5", allow_pickle=True)
    back = cstorch.load(tmp_path / "b.h5", allow_pickle=True)
    assert type(back["obj"]) is Recorder and back["obj"].tag == "back"


def test_numpy_arrays_convert_exactly(tmp_path):
    state = {"f32": np.array([[1.5, -0.0], [np.inf, 2**-149]], np.float32),
             "bf16": np.array([1, -2, 0], ml_dtypes.bfloat16), "i64": np.array([2**62, -3]),
             "empty": np.zeros((0, 2), np.int32), "t": torch.tensor([1, 2], dtype=torch.int16)}
    state["bf16"].view(np.uint16)[2] = 0x7FC3  # NaN with payload
    cstorch.save(state, tmp_path / "a.h5")
    to_orbax(tmp_path / "a.h5", tmp_path / "o")
    from_orbax(tmp_path / "o", tmp_path / "b.h5")
    assert_same_h5(tmp_path / "a.h5", tmp_path / "b.h5")
    for p in (tmp_path / "a.h5", tmp_path / "o", tmp_path / "b.h5"):
        assert_same(state, cstorch.load(p))
    to_torch(tmp_path / "o", tmp_path / "t.pt")
    # numpy arrays pickle as numpy objects: not readable with weights_only=True
    assert_same(state, torch.load(tmp_path / "t.pt", weights_only=False))


# -- 7: refusals ----------------------------------------------------------------------------------

def test_conversions_refuse_existing_destinations(converted, tmp_path):
    existing_file = tmp_path / "exists.bin"
    existing_file.write_bytes(b"precious")
    existing_dir = tmp_path / "exists_dir"
    existing_dir.mkdir()
    (existing_dir / "keep.txt").write_text("precious")
    pt = tmp_path / "src.pt"
    torch.save({"a": torch.ones(2)}, pt)
    calls = [
        lambda dst: to_orbax(converted["h5"], dst),
        lambda dst: from_orbax(converted["orbax"], dst),
        lambda dst: to_torch(converted["h5"], dst),
        lambda dst: to_torch(converted["orbax"], dst),
        lambda dst: to_h5(converted["orbax"], dst),
        lambda dst: to_h5(pt, dst),
        lambda dst: to_h5(converted["h5"], dst),
        lambda dst: cstorch.save({"a": torch.ones(1)}, dst),
    ]
    before = sorted(os.listdir(tmp_path))
    for i, call in enumerate(calls):
        for dst in (existing_file, existing_dir):
            with pytest.raises(FileExistsError):
                call(dst)
            assert existing_file.read_bytes() == b"precious", i
            assert dir_snapshot(existing_dir) == {"keep.txt": b"precious"}, i
    assert sorted(os.listdir(tmp_path)) == before  # no temporary files left behind


# -- 8: CLI ---------------------------------------------------------------------------------------

def test_cli_info_lists_every_key(converted, capsys):
    assert main(["info", str(converted["h5"])]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert "h5 checkpoint" in lines[0] and "0.5" in lines[0]
    by_key = {line.split()[0]: line for line in lines[1:]}
    _, entries = info(converted["h5"])
    assert set(by_key) == {e.key for e in entries}
    expect = {"f32": "float32[3, 3]", "f16": "float16[9]", "bf16": "bfloat16[3, 3]", "i64": "int64[3, 2]",
              "bool": "bool[2, 3]", "scalars.bf16": "bfloat16[]", "empty": "float32[0, 3]",
              "empty_bf16": "bfloat16[2, 0]", "tied_w": "-> model.w", "nested.0.1.8": "'héllo ✓ 日本'",
              "py.big": str(2**62 + 1), "py.none": "None"}
    for key, text in expect.items():
        assert text in by_key[key], (key, by_key[key])


def test_cli_info_of_orbax_directory(converted, capsys):
    assert main(["info", str(converted["orbax"])]) == 0
    out = capsys.readouterr().out
    assert "orbax checkpoint" in out and "bfloat16[3, 3]" in out and "-> model.w" in out


def test_cli_convert_round_trip(converted, tmp_path, capsys):
    o, b, t, c = tmp_path / "o", tmp_path / "b.h5", tmp_path / "t.pt", tmp_path / "c.h5"
    assert main(["convert", str(converted["h5"]), str(o), "--to", "orbax"]) == 0
    assert main(["convert", str(o), str(b), "--to", "h5"]) == 0
    assert main(["convert", str(b), str(t), "--to", "torch"]) == 0
    assert main(["convert", str(t), str(c), "--to", "h5"]) == 0
    out = capsys.readouterr().out
    assert out.count("wrote ") == 4
    assert_same_h5(converted["h5"], b)
    assert_same_h5(converted["h5"], c)
    assert_same(make_state(), torch.load(t, weights_only=True))


def test_cli_errors_return_1(converted, tmp_path, capsys):
    missing = tmp_path / "missing.h5"
    assert main(["info", str(missing)]) == 1
    err = capsys.readouterr().err
    assert "error:" in err and "missing.h5" in err

    assert main(["convert", str(missing), str(tmp_path / "x"), "--to", "orbax"]) == 1
    assert "error:" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()

    dst = tmp_path / "exists.pt"
    dst.write_bytes(b"keep")
    for to in ("torch", "h5", "orbax"):
        assert main(["convert", str(converted["h5"]), str(dst), "--to", to]) == 1, to
        err = capsys.readouterr().err
        assert "error:" in err and "exists" in err, (to, err)
        assert dst.read_bytes() == b"keep"

    cstorch.save({"o": Recorder("cli")}, tmp_path / "obj.h5", allow_pickle=True)
    assert main(["convert", str(tmp_path / "obj.h5"), str(tmp_path / "obj.pt"), "--to", "torch"]) == 1
    err = capsys.readouterr().err
    assert "error:" in err and "'o'" in err and "--allow-pickle" in err
    assert main(["convert", str(tmp_path / "obj.h5"), str(tmp_path / "obj.pt"), "--to", "torch",
                 "--allow-pickle"]) == 0


def test_cli_module_entry_point(converted):
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-m", "cstorch.checkpoint", "info", str(converted["h5"])],
                       capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "bfloat16[3, 3]" in r.stdout and "tied_w" in r.stdout and "-> model.w" in r.stdout
