"""A compiled JAX program as plain data, without pickle: JSON-ready metadata and the raw
bytes of the XLA executable.

    meta, executable = encode(compiled)          # compiled: a jax.stages.Compiled
    compiled = decode(meta, executable, devices) # the same program, loaded onto `devices`

`jax.experimental.serialize_executable` pickles JAX's description of a compiled program
(which inputs it keeps, their avals, shardings and layouts, the argument info and the
pytrees of its inputs and outputs) around the executable, and loading it unpickles: a file
written by someone else runs any code they chose. Here the same objects are written as JSON
through their own pickle reductions, restricted to `CONSTRUCTORS`, a fixed table of JAX's
data classes and of the functions JAX itself rebuilds them with. Decoding calls only those,
found by their names in the table (a name read from the data is never imported), on
arguments that are again plain JSON values or table objects; devices are named by id and
taken from `devices`; the executable goes to XLA's own deserializer
(`Client.deserialize_executable`). Nothing else can run while a program is decoded.

Contract: `encode` raises `CodecError` for a program it cannot describe this way (an object
outside the table, state a reduction does not show, const args): such a program is simply
not cached. It also decodes its own result around the live executable and encodes that
again: a description that does not come back the same is refused, so whatever `decode`
returns for an intact `encode` result is the program that was encoded. `decode` raises
(`CodecError`, or JAX's and XLA's own errors) on anything else; it never returns a partly
decoded program.
"""
from __future__ import annotations

import base64
import copyreg
import dataclasses
import enum
import functools

import jax
import numpy as np
from jax._src.lib import xla_client as xc

FORMAT = 1  # of the metadata written by `encode`


class CodecError(ValueError):
    """A program that cannot be written as data, or data that is not a program."""


#: (module, qualified name) of every class and function decoding may call; resolved from the
#: already imported JAX modules by this list, never by a name read from the data
_ALLOWED = (
    ("jax._src.interpreters.pxla", "UnloadedMeshExecutable"),
    ("jax._src.interpreters.pxla", "AllArgsInfo"),
    ("jax._src.linear_util", "DebugInfo"),
    ("jax._src.core", "ShapedArray"),
    ("jax._src.core", "ManualAxisType"),
    ("jax._src.core", "MemorySpace"),
    ("jax._src.stages", "ArgInfo"),
    ("jax._src.layout", "Layout"),
    ("jax._src.layout", "AutoLayoutSingleton"),  # in programs of jax >= 0.11 (stateless; checked by isinstance)
    ("jax._src.mesh", "Mesh"),
    ("jax._src.mesh", "AbstractMesh"),
    ("jax._src.mesh", "AbstractDevice"),
    ("jax._src.mesh", "AxisType"),
    ("jax._src.partition_spec", "PartitionSpec"),
    ("jax._src.named_sharding", "_unpickle_named_sharding"),
    ("jax._src.sharding_impls", "_unpickle_single_device_sharding"),
)


@functools.cache
def constructors() -> dict[str, object]:
    """name -> the class or function, for every entry of `_ALLOWED` this JAX has."""
    import importlib

    table = {}
    for module, name in _ALLOWED:
        try:
            obj = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
        table[f"{module}.{name}"] = obj
    return table


def _name_of(obj) -> str:
    for name, known in constructors().items():
        if known is obj:
            return name
    raise CodecError(f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', obj)} is not a known JAX "
                     f"data class")


def _known(name) -> object:
    if not isinstance(name, str) or name not in constructors():
        raise CodecError(f"{name!r} is not a known JAX data class")
    return constructors()[name]


class _Leaf:
    """A pytree leaf stand-in, to write and read a PyTreeDef as its containers."""


_LEAF = _Leaf()


# -- encoding ---------------------------------------------------------------------------------
def _enc(x, blob: list):
    if x is None or type(x) in (bool, int, str):
        return x
    if type(x) is float:
        return {"float": x.hex()}
    if type(x) is bytes:
        return {"bytes": base64.b64encode(x).decode()}
    if type(x) in (list, tuple, set, frozenset):
        items = sorted(x, key=repr) if type(x) in (set, frozenset) else x
        return {type(x).__name__: [_enc(v, blob) for v in items]}
    if type(x) is dict:
        return {"dict": [[_enc(k, blob), _enc(v, blob)] for k, v in x.items()]}
    if x is _LEAF:
        return {"leaf": None}
    if isinstance(x, xc.LoadedExecutable):
        if blob is not None:  # None: describing it again, to compare
            blob.append(x.client.serialize_executable(x))
        return {"executable": None}
    if isinstance(x, xc.Device):
        return {"device": x.id}
    if isinstance(x, xc.DeviceList):
        return {"device_list": [d.id for d in x]}
    if isinstance(x, xc.Client):
        return {"client": None}
    if isinstance(x, np.dtype):
        return {"dtype": x.name}
    if isinstance(x, np.ndarray):
        if x.dtype != object:
            raise CodecError(f"an array of {x.dtype} in a program's description")
        return {"ndarray": [list(x.shape), [_enc(v, blob) for v in x.flat]]}
    if isinstance(x, enum.Enum):
        return {"enum": [_name_of(type(x)), x.name]}
    if isinstance(x, type) or callable(x) and not hasattr(x, "__reduce_ex__"):
        raise CodecError(f"{x!r} in a program's description")
    try:
        rv = x.__reduce_ex__(4)
    except Exception as e:  # noqa: BLE001
        raise CodecError(f"{type(x).__qualname__} cannot be written as data: {e}") from e
    if isinstance(rv, str) or not isinstance(rv, tuple) or len(rv) < 2:
        raise CodecError(f"{type(x).__qualname__} cannot be written as data")
    fn, args, state = rv[0], rv[1], rv[2] if len(rv) > 2 else None
    if any(r is not None for r in rv[3:]):
        raise CodecError(f"{type(x).__qualname__} has list or dict items")
    if fn is copyreg.__newobj__:
        return {"new": [_name_of(args[0]), [_enc(a, blob) for a in args[1:]], _enc(state, blob)]}
    if fn is copyreg.__newobj_ex__:
        cls, a, kw = args
        return {"new_ex": [_name_of(cls), [_enc(v, blob) for v in a], _enc(dict(kw), blob), _enc(state, blob)]}
    return {"call": [_name_of(fn), [_enc(a, blob) for a in args], _enc(state, blob)]}


def _enc_tree(tree) -> dict:
    return _enc(jax.tree_util.tree_unflatten(tree, [_LEAF] * tree.num_leaves), None)


# -- decoding ---------------------------------------------------------------------------------
class _Decoder:
    def __init__(self, executable, devices):
        self.executable = executable
        self.devices = list(devices)
        self.by_id = {d.id: d for d in self.devices}

    def device(self, i):
        if type(i) is not int or i not in self.by_id:
            raise CodecError(f"device {i!r} is not one of the run's devices")
        return self.by_id[i]

    def list(self, v) -> list:
        if type(v) is not list:
            raise CodecError(f"expected a list, found {type(v).__name__}")
        return [self(x) for x in v]

    def __call__(self, v):
        if v is None or type(v) in (bool, int, str):
            return v
        if type(v) is not dict or len(v) != 1:
            raise CodecError(f"unexpected {type(v).__name__} in a program's description")
        (tag, p), = v.items()
        if tag == "float":
            return float.fromhex(p)
        if tag == "bytes":
            return base64.b64decode(p, validate=True)
        if tag in ("list", "tuple", "set", "frozenset"):
            return {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[tag](self.list(p))
        if tag == "dict":
            return {self(k): self(x) for k, x in (self._pair(kv) for kv in self.list_raw(p))}
        if tag == "leaf":
            return _LEAF
        if tag == "executable":
            if self.executable is None:
                raise CodecError("a second executable in a program's description")
            exe, self.executable = self.executable, None
            return exe
        if tag == "device":
            return self.device(p)
        if tag == "device_list":
            return xc.DeviceList(tuple(self.device(i) for i in self.list_raw(p)))
        if tag == "client":
            return self.devices[0].client
        if tag == "dtype":
            if type(p) is not str:
                raise CodecError("a dtype is named by a string")
            return np.dtype(p)
        if tag == "ndarray":
            shape, items = self._pair(p)
            shape = tuple(self.list_raw(shape))
            if not all(type(s) is int and 0 <= s for s in shape):
                raise CodecError(f"array shape {shape}")
            out = np.empty(len(self.list_raw(items)), dtype=object)
            out[:] = self.list(items)
            return out.reshape(shape)
        if tag == "enum":
            cls, member = self._pair(p)
            cls = _known(cls)
            if not (isinstance(cls, type) and issubclass(cls, enum.Enum)) or member not in cls.__members__:
                raise CodecError(f"{member!r} is not a member of {cls}")
            return cls[member]
        if tag == "new":
            cls, args, state = self._items(p, 3)
            cls = self._class(cls)
            return self._build(cls.__new__(cls, *self.list(args)), state)
        if tag == "new_ex":
            cls, args, kwargs, state = self._items(p, 4)
            cls = self._class(cls)
            kwargs = self(kwargs)
            if type(kwargs) is not dict or not all(type(k) is str for k in kwargs):
                raise CodecError("keyword arguments are a dict of strings")
            return self._build(cls.__new__(cls, *self.list(args), **kwargs), state)
        if tag == "call":
            fn, args, state = self._items(p, 3)
            return self._build(_known(fn)(*self.list(args)), state)
        raise CodecError(f"unknown tag {tag!r} in a program's description")

    @staticmethod
    def list_raw(v) -> list:
        if type(v) is not list:
            raise CodecError(f"expected a list, found {type(v).__name__}")
        return v

    def _pair(self, v):
        return self._items(v, 2)

    def _items(self, v, n):
        v = self.list_raw(v)
        if len(v) != n:
            raise CodecError(f"expected {n} items, found {len(v)}")
        return v

    @staticmethod
    def _class(name):
        cls = _known(name)
        if not isinstance(cls, type):
            raise CodecError(f"{name} is not a class")
        return cls

    def _build(self, obj, state):
        """pickle's BUILD: `__setstate__`, or the instance dict and slots."""
        state = self(state)
        if state is None:
            return obj
        setstate = getattr(obj, "__setstate__", None)
        if setstate is not None:
            setstate(state)
            return obj
        slots = None
        if type(state) is tuple and len(state) == 2:
            state, slots = state
        for part in (state, slots):
            if part is not None and (type(part) is not dict or not all(type(k) is str for k in part)):
                raise CodecError("an object's state is a dict of strings")
        if state:
            obj.__dict__.update(state)
        for k, v in (slots or {}).items():
            setattr(obj, k, v)
        return obj


def _tree(v):
    obj = _Decoder(None, []).__call__(v)
    tree = jax.tree_util.tree_structure(obj)
    if jax.tree_util.tree_leaves(obj) != [_LEAF] * tree.num_leaves:
        raise CodecError("a pytree with leaves other than placeholders")
    return tree


def _parts(meta: dict, executable, devices):
    """(UnloadedMeshExecutable, flat args info, no_kwargs, in_tree, out_tree) of `meta`."""
    from jax._src.interpreters.pxla import UnloadedMeshExecutable

    if type(meta) is not dict or meta.get("format") != FORMAT:
        raise CodecError("not a program description of this format")
    dec = _Decoder(executable, devices)
    unloaded = dec(meta.get("program"))
    if type(unloaded) is not UnloadedMeshExecutable:
        raise CodecError("the description is not of a compiled program")
    if dec.executable is not None:
        raise CodecError("the description does not hold its executable")
    args_info = dec.list(meta.get("args_info"))
    no_kwargs = meta.get("no_kwargs")
    if type(no_kwargs) is not bool:
        raise CodecError("no_kwargs is a bool")
    in_tree, out_tree = _tree(meta.get("in_tree")), _tree(meta.get("out_tree"))
    _check(unloaded, args_info, in_tree, out_tree, devices)
    return unloaded, args_info, no_kwargs, in_tree, out_tree


def _check(u, args_info: list, in_tree, out_tree, devices) -> None:
    """CodecError unless the decoded description is whole and consistent: every field
    of JAX's `UnloadedMeshExecutable` present, of the type JAX gives it, with one aval,
    sharding and layout per kept input and per output, on `devices`; no effects, host
    callbacks or mutable arrays (a program with them is never encoded)."""
    from jax._src import core, stages
    from jax._src.interpreters.pxla import AllArgsInfo
    from jax._src.layout import Layout
    from jax._src.linear_util import DebugInfo
    from jax.sharding import Sharding

    missing = [f.name for f in dataclasses.fields(u) if not hasattr(u, f.name)]
    if missing:
        raise CodecError(f"the program's description lacks {missing}")

    def avals(xs, what):
        ok = type(xs) in (list, tuple) and all(
            type(a) is core.ShapedArray and type(a.shape) is tuple and all(type(d) is int and d >= 0 for d in a.shape)
            and isinstance(a.dtype, np.dtype) and type(a.weak_type) is bool for a in xs)
        if not ok:
            raise CodecError(f"{what} are not avals")
        return len(xs)

    def of(xs, types, n, what):
        if type(xs) not in (list, tuple) or len(xs) != n or not all(isinstance(x, types) for x in xs):
            raise CodecError(f"{what}: expected {n} of {types}")

    n_in, n_out = avals(u.input_avals, "input avals"), avals(u.output_avals, "output avals")
    if not (type(args_info) is list and all(type(a) is stages.ArgInfo and type(a.donated) is bool for a in args_info)):
        raise CodecError("the argument info is not ArgInfo")
    arg_avals = [a._aval for a in args_info]
    avals(arg_avals, "argument avals")
    kept = u.kept_var_idx
    if type(kept) is not set or not all(type(i) is int and 0 <= i < len(args_info) for i in kept) or len(kept) != n_in:
        raise CodecError("kept_var_idx does not index the arguments")
    if [(a.shape, a.dtype) for a in u.input_avals] != [(arg_avals[i].shape, arg_avals[i].dtype) for i in sorted(kept)]:
        raise CodecError("the kept arguments are not the program's inputs")
    of(u.input_shardings, Sharding, n_in, "input shardings")
    of(u.output_shardings, Sharding, n_out, "output shardings")
    of(u.xla_in_layouts, (Layout, type(None)), n_in, "input layouts")
    of(u.dispatch_in_layouts, (Layout, type(None)), n_in, "dispatch layouts")
    of(u.xla_out_layouts, (Layout, type(None)), n_out, "output layouts")
    if not (isinstance(u.xla_executable, xc.LoadedExecutable) and isinstance(u.device_list, xc.DeviceList)
            and list(u.device_list) == list(devices) and u.backend is devices[0].client):
        raise CodecError("the program is not on the run's devices")
    if type(u.committed) is not bool or type(u.name) is not str:
        raise CodecError("committed / name")
    if any(list(x or ()) for x in (u.unordered_effects, u.ordered_effects, u.keepalive, u.host_callbacks)) or (
            u.mut is not None or u.pgle_profiler is not None):
        raise CodecError("effects, callbacks or mutable arrays in a program's description")
    if u.all_args_info is not None:
        if type(u.all_args_info) is not AllArgsInfo or avals(u.all_args_info.in_avals, "all avals") != len(args_info):
            raise CodecError("all_args_info")
        info = u.all_args_info.debug_info
        names = lambda xs, n: xs is None or type(xs) is tuple and len(xs) == n and all(type(x) is str for x in xs)  # noqa: E731
        if not (type(info) is DebugInfo and type(info.traced_for) is str and type(info.func_src_info) in (str, type(None))
                and names(info.arg_names, len(args_info)) and names(info.result_paths, n_out)):
            raise CodecError("the program's debug info does not name its arguments and results")
    if in_tree.num_leaves != len(args_info) or out_tree.num_leaves != n_out:
        raise CodecError("the pytrees do not match the program's arguments and results")


def _describe(unloaded, args_info, no_kwargs, in_tree, out_tree, serialize: bool = True) -> tuple[dict, list]:
    blob: list | None = [] if serialize else None
    meta = {"format": FORMAT, "program": _enc(unloaded, blob), "args_info": _enc(list(args_info), blob)["list"],
            "no_kwargs": bool(no_kwargs), "in_tree": _enc_tree(in_tree), "out_tree": _enc_tree(out_tree)}
    return meta, blob


def encode(compiled) -> tuple[dict, bytes]:
    """(JSON-ready metadata, the XLA executable's bytes) of a `jax.stages.Compiled`."""
    unloaded = getattr(compiled._executable, "_unloaded_executable", None)
    if unloaded is None:
        raise CodecError("this compiled program cannot be serialized")
    if getattr(compiled._params, "const_args", None):
        raise CodecError("a program with constant arguments")
    args_info, in_tree = jax.tree_util.tree_flatten(compiled.args_info)
    try:
        meta, blob = _describe(unloaded, args_info, compiled._no_kwargs, in_tree, compiled.out_tree)
        if len(blob) != 1:
            raise CodecError(f"{len(blob)} executables in one program")
        again, _ = _describe(*_parts(meta, unloaded.xla_executable, list(unloaded.device_list)), serialize=False)
    except CodecError:
        raise
    except Exception as e:  # noqa: BLE001 (a JAX object this codec does not know how to write)
        raise CodecError(f"the program's description cannot be written as data: {type(e).__name__}: {e}") from e
    if again != meta:
        raise CodecError("the program's description does not read back the same")
    return meta, blob[0]


def decode(meta: dict, executable: bytes, devices):
    """The `jax.stages.Compiled` that `encode` described, loaded onto `devices` (the run's
    devices, in order)."""
    devices = list(devices)
    if not devices or type(executable) is not bytes:
        raise CodecError("no devices, or no executable")
    loaded = devices[0].client.deserialize_executable(executable, executable_devices=xc.DeviceList(tuple(devices)))
    unloaded, args_info, no_kwargs, in_tree, out_tree = _parts(meta, loaded, devices)
    if _describe(unloaded, args_info, no_kwargs, in_tree, out_tree, serialize=False)[0] != meta:
        raise CodecError("the program's description does not read back the same")
    executable = unloaded.load()
    executable.unsafe_call  # noqa: B018 (built now: a description it cannot be built from fails here, not in a step)
    return jax.stages.Compiled(executable, [], in_tree.unflatten(args_info), out_tree, no_kwargs=no_kwargs)
