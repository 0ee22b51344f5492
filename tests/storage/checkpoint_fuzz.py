"""Seeded mutations of valid H5 checkpoints, loaded in worker processes under a watchdog.

Case `i` of seed `s` is fully determined by `(s, i)`: it takes one of a few valid base
checkpoints written by `cstorch.save`, applies one mutation of one family (raw bytes, root
or dataset attributes, metadata JSON, links, shapes, dtypes, the tree structure) and
loads the result with `cstorch.load`, materialising every tensor. Two oracles:

- "strict" (the file as `cstorch.save` wrote it, checksums included): the load returns
  exactly the original values (dtypes, shapes, bits, Python types, tied tensors) or raises
  `cstorch.InvalidCheckpointError` naming the file;
- "robust" (the checksum block wiped first, as in a file of the Cerebras release; every
  family but raw bytes, which only the checksum block guards against HDF5's own parser):
  the load returns something or raises `InvalidCheckpointError`; values are not
  compared, since a well-formed edit of metadata without a checksum is undetectable.

In both, no other exception, no crash and no hang: a worker arms `faulthandler` with a
timeout per case, so a hang kills it with a traceback and the driver records the case.

    python tests/storage/checkpoint_fuzz.py --cases 10000 --seed 0     # a run, 2 workers
    python tests/storage/checkpoint_fuzz.py --case 1234 --seed 0       # one case, verbosely
"""
from __future__ import annotations

import argparse
import faulthandler
import json
import os
import pickle
import random
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback

import h5py
import ml_dtypes
import numpy as np
import torch

import cstorch
from cstorch.storage import PickledObject
from cstorch.storage.checksums import MAGIC
from cstorch_jax import LazyTensor

FAMILIES = ("bytes", "attributes", "datasets", "metadata", "links", "shapes", "dtypes", "structure")
JSON_POOL = [None, 0, -1, 1, 1.5, 2 ** 70, True, False, "", "x", "torch.float32", [], {}, [[1]], [3], {"a": 1},
             "LinkedObject", "TorchTensorSerializer", float("inf")]
DTYPE_NAMES = ["torch.float32", "torch.float16", "torch.bfloat16", "torch.float64", "torch.int64", "torch.int32",
               "torch.int16", "torch.int8", "torch.uint8", "torch.bool", "torch.complex64", "torch.float8_e4m3fn",
               "float32", "torch.quint8"]


# -- the base checkpoints -------------------------------------------------------------------
def base_states() -> list[dict]:
    g = torch.Generator().manual_seed(0)
    w = torch.randn(4, 3, generator=g)
    rich = {
        "model": {"w": w, "b": torch.randn(3, generator=g), "tied": w,
                  "bf16": torch.randn(2, 3, generator=g).bfloat16(), "half": torch.randn(5, generator=g).half(),
                  "i64": torch.tensor([2 ** 40, -5]), "i32": torch.tensor([[1, -2], [3, 2 ** 31 - 1]], dtype=torch.int32),
                  "u8": torch.tensor([0, 255], dtype=torch.uint8), "i8": torch.tensor([-128, 7], dtype=torch.int8),
                  "mask": torch.tensor([True, False, True]), "c64": torch.tensor([1 + 2j], dtype=torch.complex64),
                  "scalar": torch.tensor(1.5), "bf16_scalar": torch.tensor(-3.5, dtype=torch.bfloat16),
                  "empty": torch.zeros(0, 2)},
        "optimizer": {"state": {0: {"step": torch.tensor(3), "exp_avg": torch.randn(4, 3, generator=g)}},
                      "param_groups": [{"lr": 0.1, "betas": (0.9, 0.999), "name": "g0", "tags": None,
                                        "amsgrad": False, "params": [0]}]},
        "array": np.arange(5, dtype=np.int32), "array_bf16": np.array([1, -2], ml_dtypes.bfloat16),
        "obj": PickledObject("obj", pickle.dumps({"a": (1, 2)})),
        "text": "héllo ✓", "step": 7, "nan": float("nan"), "neg_zero": -0.0, "big": 2 ** 62 + 1,
    }
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.ones(2, 3)).sum().backward()
    opt.step()
    trained = {"model": model.state_dict(), "optimizer": opt.state_dict(), "global_step": 1}
    return [rich, trained]


def write_bases(directory: str) -> list[tuple[dict, bytes, dict]]:
    """(state, file bytes, {key: metadata}) of every base checkpoint."""
    out = []
    for i, state in enumerate(base_states()):
        path = os.path.join(directory, f"base{i}.mdl")
        if os.path.exists(path):
            os.remove(path)
        cstorch.save(state, path)
        with open(path, "rb") as f:
            out.append((state, f.read(), _entries(path)))
    return out


# -- comparing ------------------------------------------------------------------------------
def _bits(t: torch.Tensor) -> bytes:
    return t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def difference(orig, got, where="state"):
    """None when `got` is exactly `orig` (types, dtypes, shapes, bits), else where they differ."""
    if isinstance(orig, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            return f"{where}: {type(got).__name__} instead of a tensor"
        if got.dtype != orig.dtype or got.shape != orig.shape or _bits(got) != _bits(orig):
            return f"{where}: {got.dtype}{list(got.shape)} differs from {orig.dtype}{list(orig.shape)} or its values"
        return None
    if type(got) is not type(orig):
        return f"{where}: {type(got).__name__} instead of {type(orig).__name__}"
    if isinstance(orig, dict):
        if list(orig) != list(got):
            return f"{where}: keys {list(got)} instead of {list(orig)}"
        return next((d for k in orig if (d := difference(orig[k], got[k], f"{where}.{k}"))), None)
    if isinstance(orig, (list, tuple)):
        if len(orig) != len(got):
            return f"{where}: {len(got)} items instead of {len(orig)}"
        return next((d for i, (a, b) in enumerate(zip(orig, got)) if (d := difference(a, b, f"{where}.{i}"))), None)
    if isinstance(orig, np.ndarray):
        same = got.dtype == orig.dtype and got.shape == orig.shape and got.tobytes() == orig.tobytes()
        return None if same else f"{where}: array differs"
    if isinstance(orig, PickledObject):
        return None if got.data == orig.data else f"{where}: pickled bytes differ"
    if isinstance(orig, float):
        return None if struct.pack("<d", orig) == struct.pack("<d", got) else f"{where}: {got!r} != {orig!r}"
    return None if got == orig else f"{where}: {got!r} != {orig!r}"


def _leaves(x):
    if isinstance(x, dict):
        return [leaf for v in x.values() for leaf in _leaves(v)]
    if isinstance(x, (list, tuple)):
        return [leaf for v in x for leaf in _leaves(v)]
    return [x]


def tie_pattern(state) -> list[int]:
    """For every tensor leaf, the index of the first leaf that is the same object."""
    tensors = [t for t in _leaves(state) if isinstance(t, (torch.Tensor, np.ndarray, PickledObject))]
    return [next(j for j, u in enumerate(tensors) if u is t) for t in tensors]


def materialise_tied(state):
    """`materialise`, keeping the objects that are the same the same."""
    memo = {}

    def walk(x):
        if isinstance(x, dict):
            return type(x)((k, walk(v)) for k, v in x.items())
        if isinstance(x, tuple):
            return tuple(walk(v) for v in x)
        if isinstance(x, list):
            return [walk(v) for v in x]
        if isinstance(x, LazyTensor):
            if id(x) not in memo:
                memo[id(x)] = x.materialize()
            return memo[id(x)]
        return x

    return walk(state)


# -- mutations ------------------------------------------------------------------------------
def _entries(path):
    """{key: metadata} of the file's root metadata attributes that parse."""
    out = {}
    with h5py.File(path, "r") as f:
        for name, value in f.attrs.items():
            if name.endswith(".__metadata__"):
                key = name[: -len(".__metadata__")]
                out[key] = json.loads(value)[name]
    return out


def _set_meta(path, metas: dict) -> None:
    """Replace the metadata of the entries {key: metadata}."""
    with h5py.File(path, "r+") as f:
        for key, meta in metas.items():
            name = f"{key}.__metadata__"
            doc = json.loads(f.attrs[name])
            doc[name] = meta
            f.attrs[name] = json.dumps(doc, indent=4)


def _rand_value(rng):
    return rng.choice(JSON_POOL)


def _garble(rng, text: str) -> str:
    op = rng.randrange(6)
    i = rng.randrange(len(text) + 1)
    if op == 0:
        return text[:i] + rng.choice('{}[]",:0a\\ -.e') + text[i:]
    if op == 1:
        return text[:i] + text[i + rng.randint(1, 8):]
    if op == 2:
        return text[:i] + chr(rng.randrange(32, 127)) + text[i + 1:]
    if op == 3:
        return text[:i]
    if op == 4:
        return rng.choice(["", "null", "[]", "{}", "[1, 2]", '"x"', "0", json.dumps({"__objects__": []})])
    j = rng.randrange(len(text) + 1)
    return text[:min(i, j)] + text[max(i, j):] + text[min(i, j):max(i, j)]


def mutate_bytes(rng, path, ub_size):
    data = bytearray(open(path, "rb").read())
    op = rng.randrange(7)
    region = rng.random()
    lo = 0 if region < 0.15 else ub_size  # now and then inside the checksum block
    pos = rng.randrange(lo, len(data))
    if op == 0:
        n = rng.randint(1, 8)
        for _ in range(n):
            p = rng.randrange(lo, len(data))
            data[p] ^= 1 << rng.randrange(8)
        desc = f"flip {n} bits"
    elif op == 1:
        n = rng.randint(1, 256)
        data[pos:pos + n] = bytes(rng.randrange(256) for _ in range(min(n, len(data) - pos)))
        desc = f"random bytes at {pos}+{n}"
    elif op == 2:
        n = rng.randint(1, 64)
        data[pos:pos + n] = bytes(min(n, len(data) - pos))
        desc = f"zeros at {pos}+{n}"
    elif op == 3:
        data = data[:pos]
        desc = f"truncate at {pos}"
    elif op == 4:
        data += bytes(rng.randrange(256) for _ in range(rng.randint(1, 512)))
        desc = "append garbage"
    elif op == 5:
        n = rng.randint(8, 512)
        src = rng.randrange(ub_size, max(ub_size + 1, len(data) - n))
        data[pos:pos + n] = data[src:src + n][:len(data) - pos]
        desc = f"copy {src}+{n} to {pos}"
    else:
        p = rng.randrange(lo, len(data))
        data[p] = rng.randrange(256)
        desc = f"byte {p}"
    with open(path, "wb") as f:
        f.write(data)
    return desc


def mutate_attributes(rng, path, entries):
    with h5py.File(path, "r+") as f:
        names = list(f.attrs)
        name = rng.choice(names + ["__version__", "__SUCCESS__", "__spec__"] * 3)
        op = rng.randrange(3)
        if op == 0:
            del f.attrs[name]
            return f"delete root attribute {name}"
        if name == "__version__":
            value = rng.choice([0.4, 0.6, "0.5", np.array([0.5, 0.5]), True, 5, b"0.5", np.float32(0.5)])
        elif name == "__SUCCESS__":
            value = rng.choice([False, 0, 1, "True", np.array([True, True]), np.True_, 2.0, b"\x01"])
        else:
            value = rng.choice([1, 2.5, "garbage", b"\xff\xfe", np.arange(3), np.array(["a", "b"], dtype="S1"),
                                True, "{}", "[]"])
        if op == 1:
            f.attrs[name] = value
            return f"root attribute {name} = {value!r}"
        other = rng.choice(names)
        f.attrs[name] = f.attrs[other] if other in f.attrs else value
        return f"root attribute {name} = that of {other}"


def mutate_datasets(rng, path, entries):
    with h5py.File(path, "r+") as f:
        names = list(f.keys())
        if not names:
            return "no dataset"
        name = rng.choice(names)
        ds = f[name]
        op = rng.randrange(9)
        if op == 0:
            del f[name]
            return f"delete dataset {name}"
        if op == 1 and ds.shape is not None:
            data = ds[()]
            new = np.asarray(data).astype(rng.choice([np.float32, np.int32, np.int64, np.float64, np.int16, np.uint8,
                                                      np.bool_, np.float16]))
            attrs = dict(ds.attrs)
            del f[name]
            f.create_dataset(name, data=new)
            f[name].attrs.update(attrs)
            return f"dataset {name} cast to {new.dtype}"
        if op == 2 and ds.shape is not None:
            data = np.asarray(ds[()])
            new = np.resize(data, rng.choice([(1,), (2, 2), (0,), (7,), data.shape + (1,)]))
            del f[name]
            f.create_dataset(name, data=new)
            return f"dataset {name} reshaped to {new.shape}"
        if op == 3:
            del f[name]
            f.create_group(name)
            return f"dataset {name} replaced by a group"
        if op == 4:
            del f[name]
            f.create_dataset(name, data=h5py.Empty("f"))
            return f"dataset {name} emptied"
        if op == 5:
            del f[name]
            f[name] = np.array([b"abc", b"de"], dtype=h5py.string_dtype())
            return f"dataset {name} holds strings"
        if op == 6:
            key = rng.choice(list(ds.attrs) + ["__BYTES__"])
            if key in ds.attrs:
                del ds.attrs[key]
            return f"delete attribute {key} of dataset {name}"
        if op == 7:
            ds.attrs["__BYTES__"] = rng.choice([np.void(b"garbage"), "text", np.arange(3)])
            return f"__BYTES__ of {name} replaced"
        if ds.shape is not None and ds.size:
            data = np.asarray(ds[()]).copy()
            flat = data.reshape(-1).view(np.uint8)
            flat[rng.randrange(flat.size)] ^= 1 << rng.randrange(8)
            ds[()] = data
            return f"one bit of dataset {name} flipped through HDF5"
        return "no change"


def mutate_metadata(rng, path, entries):
    key = rng.choice(list(entries))
    name = f"{key}.__metadata__"
    if rng.random() < 0.4:
        with h5py.File(path, "r+") as f:
            f.attrs[name] = _garble(rng, f.attrs[name])
        return f"garble the metadata text of {key}"
    meta = entries[key]
    op = rng.randrange(4)
    if op == 0 and meta:
        field = rng.choice(list(meta))
        del meta[field]
        desc = f"delete {field} from the metadata of {key}"
    elif op == 1 and meta:
        field = rng.choice(list(meta))
        meta[field] = _rand_value(rng)
        desc = f"metadata {key}.{field} = {meta[field]!r}"
    elif op == 2:
        meta["__TYPE__"] = rng.choice(["TorchTensorSerializer", "NumpyArraySerializer", "ObjectSerializer",
                                       "LinkedObject", "ScalarSerializer", "StringSerializer", "NoneSerializer",
                                       "Mystery", 3])
        desc = f"kind of {key} = {meta['__TYPE__']!r}"
    else:
        with h5py.File(path, "r+") as f:
            doc = json.loads(f.attrs[name])
            field = rng.choice(list(doc))
            doc[field] = _rand_value(rng)
            f.attrs[name] = json.dumps(doc)
        return f"wrapper {field} of {key} = {doc[field]!r}"
    _set_meta(path, {key: meta})
    return desc


def mutate_links(rng, path, entries):
    keys = list(entries)
    links = [k for k, m in entries.items() if m.get("__TYPE__") == "LinkedObject"]
    a = rng.choice(links) if links and rng.random() < 0.7 else rng.choice(keys)
    b = rng.choice([k for k in keys if k != a] or keys)
    op = rng.randrange(5)
    link = lambda target: {"key": target, "__LINKED__": True, "__TYPE__": "LinkedObject", "__NONE__": True}  # noqa
    if op == 0:
        _set_meta(path, {a: link(a)})
        return f"{a} -> {a}"
    if op == 1:
        _set_meta(path, {a: link(b), b: link(a)})
        return f"{a} -> {b} -> {a}"
    if op == 2:
        c = rng.choice(keys)
        _set_meta(path, {a: link(b), b: link(c), c: link(a)})
        return f"{a} -> {b} -> {c} -> {a}"
    if op == 3:
        _set_meta(path, {a: link(rng.choice(["missing", "", a + ".x", "model"]))})
        return f"{a} -> a key that is not there"
    _set_meta(path, {a: link(b)})
    return f"{a} -> {b}"


def mutate_shapes(rng, path, entries):
    tensors = [k for k, m in entries.items() if m.get("__TYPE__") == "TorchTensorSerializer"]
    key = rng.choice(tensors)
    meta = entries[key]
    shape = meta["shapes"][0]
    meta["shapes"] = rng.choice([[[]], [[0]], [[-1]], [[2 ** 40, 2 ** 40]], [[2 ** 62, 4]], [[1.5]], [["3"]],
                                 [[True]], [shape + [1]], [shape[::-1]], [], "[3]", [shape, shape], None,
                                 [[d + 1 for d in shape]], [[0] + shape]])
    _set_meta(path, {key: meta})
    return f"shapes of {key} = {meta['shapes']!r}"


def mutate_dtypes(rng, path, entries):
    arrays = [k for k, m in entries.items() if m.get("__TYPE__") in ("TorchTensorSerializer", "NumpyArraySerializer")]
    key = rng.choice(arrays)
    meta = entries[key]
    if meta["__TYPE__"] == "NumpyArraySerializer":
        meta["is_bfloat16"] = rng.choice([not meta.get("is_bfloat16"), 1, "yes", None])
        desc = f"is_bfloat16 of {key} = {meta['is_bfloat16']!r}"
    else:
        meta["dtypes"] = rng.choice([[rng.choice(DTYPE_NAMES)]] * 4 + [[], "torch.float32", [5], None,
                                                                      ["torch.float32", "torch.int32"]])
        desc = f"dtypes of {key} = {meta['dtypes']!r}"
    _set_meta(path, {key: meta})
    return desc


def mutate_structure(rng, path, entries):
    with h5py.File(path, "r+") as f:
        text = f.attrs["__spec__"]
        op = rng.randrange(4)
        if op == 0:
            f.attrs["__spec__"] = _garble(rng, text)
            return "garble __spec__"
        skeleton, treespec = json.loads(text)
        if op == 1:
            f.attrs["__spec__"] = json.dumps([_rand_value(rng), treespec])
            return "skeleton replaced"
        if op == 2:
            f.attrs["__spec__"] = json.dumps([skeleton, _garble(rng, treespec)])
            return "garble the treespec"
        spec = json.loads(treespec)
        node = spec[1]
        while node.get("children_spec") and rng.random() < 0.6:
            node = rng.choice(node["children_spec"])
        field = rng.choice(["type", "context", "children_spec"])
        node[field] = rng.choice([None, "builtins.dict", "builtins.list", "builtins.tuple", "os.system", "[]",
                                  '["a", "a"]', [], 7, node.get("context")])
        f.attrs["__spec__"] = json.dumps([skeleton, json.dumps(spec)])
        return f"treespec node {field} = {node[field]!r}"


MUTATORS = {"attributes": mutate_attributes, "datasets": mutate_datasets, "metadata": mutate_metadata,
            "links": mutate_links, "shapes": mutate_shapes, "dtypes": mutate_dtypes, "structure": mutate_structure}


def wipe_checksums(path) -> None:
    with open(path, "r+b") as f:
        if f.read(len(MAGIC)) == MAGIC:
            f.seek(0)
            f.write(b"\0" * len(MAGIC))


# -- one case -------------------------------------------------------------------------------
def run_case(seed: int, case: int, bases, workdir: str) -> dict:
    rng = random.Random(f"{seed}:{case}")
    base = rng.randrange(len(bases))
    state, data, base_entries = bases[base]
    strict = rng.random() < 0.75
    families = FAMILIES if strict else FAMILIES[1:]  # raw bytes: strict only (see the module docstring)
    family = families[rng.randrange(len(families))]
    path = os.path.join(workdir, f"case{case}.mdl")
    with open(path, "wb") as f:
        f.write(data)
    if not strict:
        wipe_checksums(path)
    entries = json.loads(json.dumps(base_entries))  # a copy the mutation may change
    if family == "bytes":
        desc = mutate_bytes(rng, path, data.find(b"\x89HDF\r\n\x1a\n"))  # the superblock follows the user block
    else:
        desc = MUTATORS[family](rng, path, entries)
    result = {"case": case, "base": base, "oracle": "strict" if strict else "robust", "family": family,
              "mutation": desc}
    try:
        loaded = materialise_tied(cstorch.load(path))
    except cstorch.InvalidCheckpointError as e:
        result["outcome"] = "error" if path in str(e) else f"FAIL: the error does not name the file: {e}"
    except Exception as e:  # noqa: BLE001 -- anything else is what the fuzz looks for
        result["outcome"] = f"FAIL: {type(e).__name__}: {e}\n{traceback.format_exc()}"
    else:
        diff = difference(state, loaded)
        if diff is None and tie_pattern(loaded) != tie_pattern(state):
            diff = "tied tensors are no longer the same object"
        if diff is None:
            result["outcome"] = "equal"
        else:
            result["outcome"] = "loaded" if not strict else f"FAIL: loaded different values: {diff}"
    finally:
        os.remove(path)
    return result


# -- workers and the driver -----------------------------------------------------------------
def worker(seed: int, first: int, last: int, timeout: float) -> None:
    """Run cases [first, last), one JSON line each, under a watchdog."""
    with tempfile.TemporaryDirectory(prefix="ckpt_fuzz_") as workdir:
        bases = write_bases(workdir)
        for case in range(first, last):
            print(json.dumps({"begin": case}), flush=True)
            faulthandler.dump_traceback_later(timeout, exit=True)
            result = run_case(seed, case, bases, workdir)
            faulthandler.cancel_dump_traceback_later()
            print(json.dumps(result), flush=True)


def _worker_range(seed, first, last, timeout, env, results: dict, restart: list, lock) -> None:
    """Run one worker over [first, last); a case it died in is a failure, the rest is
    queued in `restart`."""
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--seed", str(seed), "--first", str(first),
           "--last", str(last), "--timeout", str(timeout)]
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
        current = first
        for line in proc.stdout:
            msg = json.loads(line)
            if "begin" in msg:
                current = msg["begin"]
            else:
                with lock:
                    results[msg["case"]] = msg
                current = msg["case"] + 1
        proc.wait()
        err.seek(0)
        stderr = err.read()
    if current < last:
        with lock:
            results[current] = {"case": current, "outcome": f"FAIL: the worker died (hang or crash, exit code "
                                                            f"{proc.returncode}):\n{stderr[-4000:]}"}
            if current + 1 < last:
                restart.append((current + 1, last))


def run(seed: int, cases: int, workers: int = 2, timeout: float = 20.0) -> list[dict]:
    """Run cases [0, cases) in `workers` processes at once; a worker that dies (a hang
    past `timeout`, a crash) is recorded as a failure of its current case and restarted
    after it."""
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    pending = [(cases * w // workers, cases * (w + 1) // workers) for w in range(workers)]
    pending = [(a, b) for a, b in pending if a < b]
    results: dict[int, dict] = {}
    lock = threading.Lock()
    while pending:
        restart: list = []
        threads = [threading.Thread(target=_worker_range, args=(seed, a, b, timeout, env, results, restart, lock))
                   for a, b in pending]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        pending = restart
    return [results[c] for c in sorted(results)]


def summary(results: list[dict]) -> str:
    counts: dict[tuple, int] = {}
    for r in results:
        outcome = "FAIL" if r["outcome"].startswith("FAIL") else r["outcome"]
        k = (r.get("oracle", "?"), outcome)
        counts[k] = counts.get(k, 0) + 1
    return ", ".join(f"{o}/{out}: {n}" for (o, out), n in sorted(counts.items()))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cases", type=int, default=1000)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--timeout", type=float, default=20.0)
    p.add_argument("--case", type=int, help="run this one case here and print it")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--first", type=int, help=argparse.SUPPRESS)
    p.add_argument("--last", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        worker(args.seed, args.first, args.last, args.timeout)
        return 0
    if args.case is not None:
        with tempfile.TemporaryDirectory() as d:
            bases = write_bases(d)
            faulthandler.dump_traceback_later(args.timeout, exit=True)
            print(json.dumps(run_case(args.seed, args.case, bases, d), indent=2))
        return 0
    start = time.time()
    results = run(args.seed, args.cases, args.workers, args.timeout)
    failures = [r for r in results if r["outcome"].startswith("FAIL")]
    for r in failures[:20]:
        print(json.dumps(r, indent=2))
    print(f"{len(results)} cases in {time.time() - start:.0f} s: {summary(results)}; {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
