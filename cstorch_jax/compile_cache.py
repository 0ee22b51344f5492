"""A persistent cache of compiled steps, so that a second process running the same
script skips the lowering and the XLA compile.

It returns only the program a run without the cache would compile, or nothing:

The key. `entry_key(lookup, platform, options)` hashes the caller's lookup string (which
step, the shapes and dtypes of its state and batch, the run's placement) with
`engine_fingerprint`: the versions of Python, torch, jax and jaxlib, a digest of
cstorch's own sources, the XLA options and flags, the graph-pass switches, the tables a
program is made with (`tables_digest`: the capture's decomposition table, user
decompositions included, and the lowering table, each function by `code_digest`), the
platform, the devices (kind, platform version) and the CPU's instruction-set features.

The check. Within a key an entry is found by the step's op signature, recorded while its
body runs in the capture (`capture.trace_step`: the one run of the body in the process,
whatever the lookup finds). Any change to the code, a constant, a
hyper-parameter, a shape or a dtype gives another signature, and the step is captured
and compiled again (kept as another entry of the same key, up to MAX_VARIANTS). While
user decompositions are registered (they act below the ops the signature records) the
caller also compares the captured graph (`Executable.for_step`). Nothing is used on a
partial match.

The entry. One file per program, `<cache>/steps/<key>/<signature>.entry`:

    MAGIC | header length (8 bytes, little endian) | header (JSON, UTF-8)
          | the XLA executable's bytes | sha256 of everything before it (32 bytes)

The header names the key and signature it was stored under and holds the description of
the captured graph's inputs and outputs, whether it draws random numbers, the batch's
names and the program's JAX description (`program_codec`). Reading an entry checks the
checksum, parses JSON and hands bytes to XLA's deserializer: nothing in it can run Python
code (no pickle). An entry that is not whole, not of this key and signature, or does not
decode is removed with one `CompileCacheWarning` (naming the file and how to turn the
cache off) and the step is compiled again. Writers write a temporary
`.tmp-<host>-<pid>-<random>.part` and rename it into place; the temporary files of
writers that were killed (their process gone, or older than PART_MAX_AGE_S) are removed
when an entry of their folder is looked up or any entry is stored.

Trust. The cache trusts whoever can write its folder: an entry holds machine code that
the run executes. cstorch creates the folders private to the user (mode 0700).

JAX's own persistent compilation cache is not turned on by cstorch (its entries carry no
checksum and its key does not name the CPU's features).

`CSTORCH_CACHE=0` (or `configure(enabled=False)`) turns the cache off; `CSTORCH_CACHE_DIR`
(or `configure(directory)`) moves it, by default `$XDG_CACHE_HOME/cstorch` or
`~/.cache/cstorch`. Multi-process runs do not use the cache.

A folder that cannot be used (a regular file, a path under one, no permission, a full
disk: any OSError of the folder rather than of one entry) never fails a run: the cache
is off for the rest of the process, with one `CompileCacheWarning` naming the folder and
the error, and steps are compiled as without it.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import platform as _platform
import secrets
import socket
import struct
import sys
import time
import warnings
from pathlib import Path

import jax
import torch

from . import code_digest, program_codec, xla_options
from .capture import CapturedGraph, TensorSpec, decompositions

ENV_DIR = "CSTORCH_CACHE_DIR"
ENV_ENABLED = "CSTORCH_CACHE"
# the environment variables that change which program a step compiles to (graph passes)
PROGRAM_ENV_PREFIXES = ("CSTORCH_GEMM", "CSTORCH_FFI_GEMM", "CSTORCH_CHANNELS_LAST")
FORMAT = 3
MAGIC = b"cstorch-step\x00v2\n"
MAX_VARIANTS = 8  # entries kept per lookup key (one per signature), newest first
PART_MAX_AGE_S = 600  # a temporary file this old is a killed writer's, wherever it ran
SUFFIX = ".entry"
#: where the CPU's instruction-set features are read (Linux; elsewhere the processor's name)
CPUINFO = Path("/proc/cpuinfo")

_settings: dict = {"directory": None, "enabled": None}
_unusable: set[Path] = set()  # folders found unusable in this process (the cache is off for them)
_HOST = socket.gethostname().replace(os.sep, "_")


class CompileCacheWarning(UserWarning):
    """An entry of the compile cache could not be used and was removed, or the cache's
    folder cannot be used and the cache is off for the process."""


class EntryError(ValueError):
    """An entry that is not a whole, valid entry of its key and signature."""


def configure(directory: str | os.PathLike | None = None, enabled: bool | None = None) -> None:
    """Set the cache folder and/or turn the cache on or off for this process (overrides
    the environment variables)."""
    if directory is not None:
        _settings["directory"] = Path(directory).expanduser()
    if enabled is not None:
        _settings["enabled"] = bool(enabled)


def _configured_directory() -> Path | None:
    """The cache folder the settings name, or None when they turn the cache off."""
    enabled = _settings["enabled"]
    if enabled is None:
        enabled = os.environ.get(ENV_ENABLED, "1").strip().lower() not in ("0", "off", "false", "no")
    if not enabled:
        return None
    if _settings["directory"] is not None:
        return _settings["directory"]
    env = os.environ.get(ENV_DIR)
    if env is not None:
        return Path(env).expanduser() if env.strip() else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "cstorch"


def directory() -> Path | None:
    """The cache folder, or None when the cache is off (by the settings, or because the
    folder was found unusable in this process: `folder_unusable`)."""
    folder = _configured_directory()
    return None if folder is None or folder in _unusable else folder


def folder_unusable(folder: Path, error: OSError) -> None:
    """Turn the cache off for this process because `folder` cannot be used (`error`), with
    one CompileCacheWarning naming both."""
    if folder in _unusable:
        return
    _unusable.add(folder)
    warnings.warn(
        f"cstorch: the compile-cache folder {folder} cannot be used ({error}); the compile cache is off for this "
        f"process and steps are compiled without it. Point {ENV_DIR} at a folder you can write, or set "
        f"{ENV_ENABLED}=0 to turn the cache off.", CompileCacheWarning, stacklevel=3)


def usable() -> bool:
    """Whether a step may be cached: the cache is on and this is a one-process run (the
    processes of a multi-process run compile together)."""
    return directory() is not None and jax.process_count() == 1


# -- the key ----------------------------------------------------------------------------------
@functools.cache
def _source_digest() -> str:
    """sha256 of cstorch's and cstorch_jax's Python sources and compiled handlers: code that
    turns a step into a program, whose changes the version number does not follow."""
    h = hashlib.sha256()
    roots = [Path(__file__).resolve().parent]
    facade = sys.modules.get("cstorch")
    if facade is not None and getattr(facade, "__file__", None):
        roots.append(Path(facade.__file__).resolve().parent)
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.suffix in (".py", ".so", ".cc") and "__pycache__" not in path.parts:
                h.update(str(path.relative_to(root.parent)).encode())
                h.update(path.read_bytes())
    return h.hexdigest()


@functools.lru_cache(maxsize=4)
def _cpu_features(cpuinfo: str) -> str:
    try:
        text = Path(cpuinfo).read_text(errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip().lower() in ("flags", "features"):  # x86, arm
            return " ".join(sorted(set(value.split())))
    return _platform.processor()


def cpu_features() -> str:
    """The machine's architecture and its CPU's instruction-set features (the flags of
    `CPUINFO`): XLA compiles CPU code for the features of the CPU it runs on."""
    return f"{_platform.machine()}: {_cpu_features(str(CPUINFO))}"


def device_description() -> list[str]:
    """Platform, kind and platform version (and compute capability, where there is one)
    of every device."""
    return [f"{d.platform}/{d.device_kind}/{d.client.platform_version}/{getattr(d, 'compute_capability', '')}"
            for d in jax.devices()]


def tables_digest() -> str:
    """Digest of the tables that turn a captured step into a program: the capture's
    decompositions (torch's core-ATen table with cstorch's and the user's changes) and
    the ATen -> jax.numpy lowerings, each function by `code_digest.digest`."""
    from .lowering.registry import LOWERINGS, RANDOM_OPS  # the tables load with the first step compiled

    h = hashlib.sha256()
    for name, table in (("decomposition", decompositions()), ("lowering", LOWERINGS)):
        for op, fn in sorted(table.items(), key=lambda kv: str(kv[0])):
            h.update(f"{name} {op} {code_digest.digest(fn)}\n".encode())
    h.update(f"random {sorted(str(op) for op in RANDOM_OPS)}".encode())
    return h.hexdigest()


def engine_fingerprint(platform: str, compiler_options: dict) -> str:
    """Everything outside the step that decides the compiled program."""
    import jaxlib

    parts = [
        f"format={FORMAT}", f"python={sys.version}", f"torch={torch.__version__}", f"jax={jax.__version__}",
        f"jaxlib={jaxlib.__version__}", f"sources={_source_digest()}", f"tables={tables_digest()}",
        f"platform={platform}", f"devices={device_description()}", f"cpu={cpu_features()}",
        f"options={sorted(compiler_options.items())}", f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')}",
        *(f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith(PROGRAM_ENV_PREFIXES)),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def entry_key(lookup: str, platform: str, compiler_options: dict) -> str:
    return hashlib.sha256(f"{lookup}\n{engine_fingerprint(platform, compiler_options)}".encode()).hexdigest()


def function_key(fn, details: list[str], platform: str) -> str | None:
    """The lookup key of a compiled function (`@cstorch.trace`'s step, a `jit` function):
    its identity (module and qualified name, the file and line of its code), the `details`
    that select its program (the call's structure and specs, the state, the placement),
    and the engine for `platform` with its compiler options. None when the cache is not
    usable (off, or a multi-process run). An entry is used only if the function's op
    signature matches as well (`Executable.for_step`)."""
    if not usable():
        return None
    code = getattr(fn, "__code__", None)
    lookup = "\n".join([
        f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', repr(fn))}",
        f"{code.co_filename}:{code.co_firstlineno}" if code is not None else "",
        *details,
    ])
    return entry_key(lookup, platform, xla_options.compiler_options(platform))


# -- what an entry describes -----------------------------------------------------------------------
@dataclasses.dataclass
class CachedGraph:
    """What a program loaded from the cache knows of its captured graph: everything but
    the graph itself (`module` is None; `Executable.complete` makes it)."""

    state_specs: tuple[TensorSpec, ...]
    batch_specs: tuple[TensorSpec, ...]
    output_specs: tuple[TensorSpec, ...]
    mutated: tuple[int, ...]
    unused: tuple[int, ...]
    graph_hash: str
    signature: str
    module: None = None
    constants: tuple = ()  # set by the caller from the step's trace (tensors are not stored)

    read_only = CapturedGraph.read_only
    changed_constants = CapturedGraph.changed_constants

    @classmethod
    def of(cls, captured) -> "CachedGraph":
        return cls(captured.state_specs, captured.batch_specs, captured.output_specs, captured.mutated,
                   captured.unused, captured.graph_hash, captured.signature)

    def to_json(self) -> dict:
        specs = lambda ss: [[list(s.shape), str(s.dtype).removeprefix("torch.")] for s in ss]  # noqa: E731
        return {"state_specs": specs(self.state_specs), "batch_specs": specs(self.batch_specs),
                "output_specs": specs(self.output_specs), "mutated": list(self.mutated),
                "unused": list(self.unused), "graph_hash": self.graph_hash}

    @classmethod
    def from_json(cls, d, signature: str) -> "CachedGraph":
        d = _fields(d, "graph", {"state_specs": list, "batch_specs": list, "output_specs": list, "mutated": list,
                                 "unused": list, "graph_hash": str})
        state = _specs(d["state_specs"])
        mutated, unused = (_indices(d[k], len(state), k) for k in ("mutated", "unused"))
        if set(mutated) & set(unused):
            raise EntryError("state is both mutated and unused")
        return cls(state, _specs(d["batch_specs"]), _specs(d["output_specs"]), mutated, unused, d["graph_hash"],
                   signature)


def _fields(d, what: str, schema: dict) -> dict:
    if type(d) is not dict:
        raise EntryError(f"{what} is not an object")
    for k, t in schema.items():
        if k not in d:
            raise EntryError(f"{what} has no {k!r}")
        if type(d[k]) is not t:
            raise EntryError(f"{what}.{k} is not a {t.__name__}")
    return d


def _specs(items: list) -> tuple[TensorSpec, ...]:
    out = []
    for item in items:
        if type(item) is not list or len(item) != 2 or type(item[0]) is not list or type(item[1]) is not str:
            raise EntryError(f"bad tensor spec {item!r}")
        shape, name = item
        dtype = getattr(torch, name, None)
        if not isinstance(dtype, torch.dtype) or not all(type(s) is int and s >= 0 for s in shape):
            raise EntryError(f"bad tensor spec {item!r}")
        out.append(TensorSpec(tuple(shape), dtype))
    return tuple(out)


def _indices(items: list, n: int, what: str) -> tuple[int, ...]:
    if not all(type(i) is int and 0 <= i < n for i in items) or len(set(items)) != len(items):
        raise EntryError(f"bad {what} indices")
    return tuple(items)


@dataclasses.dataclass
class CachedProgram:
    """A loaded entry: the compiled program (a `jax.stages.Compiled`, on the run's
    devices) and the description of its graph."""

    graph: CachedGraph
    compiled: object
    uses_rng: bool
    batch_names: list[str]
    path: Path
    #: the mutated state the program takes stacked (`stacked_state.StackPlan.stacks`)
    stacking: tuple[tuple[int, ...], ...] = ()


# -- the file format --------------------------------------------------------------------------------
def pack(header: dict, blob: bytes) -> bytes:
    """An entry's bytes: MAGIC, the header's length and JSON, `blob`, and their sha256."""
    text = json.dumps(header, separators=(",", ":"), allow_nan=False).encode()
    body = MAGIC + struct.pack("<Q", len(text)) + text + blob
    return body + hashlib.sha256(body).digest()


def unpack(data: bytes) -> tuple[dict, bytes]:
    """(header, blob) of an entry's bytes; EntryError unless they are whole (checksum
    first, then the JSON)."""
    n = len(MAGIC)
    if len(data) < n + 8 + 32 or data[:n] != MAGIC:
        raise EntryError("not a cstorch compile-cache entry of this format (or truncated)")
    body, digest = data[:-32], data[-32:]
    if hashlib.sha256(body).digest() != digest:
        raise EntryError("checksum mismatch (damaged or truncated)")
    (length,) = struct.unpack("<Q", body[n:n + 8])
    if length > len(body) - n - 8:
        raise EntryError("header length beyond the end of the entry")
    try:
        header = json.loads(body[n + 8:n + 8 + length].decode())
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise EntryError(f"header is not JSON: {e}") from e
    if type(header) is not dict:
        raise EntryError("header is not an object")
    return header, body[n + 8 + length:]


def _read_header(header: dict, key: str, signature: str) -> tuple[CachedGraph, bool, list[str], tuple]:
    _fields(header, "header", {"format": int, "key": str, "signature": str, "graph": dict, "uses_rng": bool,
                               "batch_names": list, "program": dict, "stacking": list})
    if header["format"] != FORMAT:
        raise EntryError(f"format {header['format']}, expected {FORMAT}")
    if header["key"] != key or header["signature"] != signature:
        raise EntryError("stored under another key or signature")
    names = header["batch_names"]
    if not all(type(n) is str for n in names):
        raise EntryError("batch names are not strings")
    graph = CachedGraph.from_json(header["graph"], signature)
    if len(names) != len(graph.batch_specs):
        raise EntryError("one batch name per batch input")
    return graph, header["uses_rng"], names, _stacking(header["stacking"], len(graph.mutated))


def _stacking(stacks: list, n_mutated: int) -> tuple[tuple[int, ...], ...]:
    """The stored stacks, checked: lists of two or more distinct mutated-state positions,
    no position in two."""
    seen: set[int] = set()
    for positions in stacks:
        if (type(positions) is not list or len(positions) < 2
                or not all(type(p) is int and 0 <= p < n_mutated and p not in seen for p in positions)
                or len(set(positions)) != len(positions)):
            raise EntryError("stacking is not lists of distinct mutated-state positions")
        seen.update(positions)
    return tuple(tuple(p) for p in stacks)


# -- the folder -------------------------------------------------------------------------------------
def _path(folder: Path, key: str, signature: str) -> Path:
    return folder / "steps" / key / f"{signature}{SUFFIX}"


def _private_dirs(folder: Path, key_dir: Path) -> None:
    folder.parent.mkdir(parents=True, exist_ok=True)
    for d in (folder, folder / "steps", key_dir):
        d.mkdir(mode=0o700, exist_ok=True)


def drop(path: Path, reason: str) -> None:
    """Remove an unusable entry, with one warning."""
    try:
        path.unlink(missing_ok=True)
        removed = "it was removed"
    except OSError as e:
        removed = f"it could not be removed ({e})"
    folder = directory()
    warnings.warn(
        f"cstorch: the compile-cache entry {path} is unusable ({reason}); {removed} and the step is compiled "
        f"again. The cache is {folder}: set CSTORCH_CACHE=0 to turn it off.", CompileCacheWarning, stacklevel=3)


def _writer(name: str) -> tuple[str | None, int | None]:
    """(host, pid) of a temporary file's writer, from its name."""
    parts = name[len(".tmp-"):-len(".part")].rsplit("-", 2)
    if len(parts) != 3 or not parts[1].isdigit():
        return None, None
    return parts[0], int(parts[1])


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


def _clean_parts(folders) -> None:
    """Remove the temporary files of killed writers in `folders`."""
    now = time.time()
    for folder in folders:
        try:
            parts = list(folder.glob(".tmp-*.part"))
        except OSError:
            continue
        for part in parts:
            try:
                age = now - part.stat().st_mtime
            except OSError:
                continue
            host, pid = _writer(part.name)
            if age > PART_MAX_AGE_S or (host == _HOST and pid is not None and not _alive(pid)):
                part.unlink(missing_ok=True)


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:  # removed meanwhile by another process
        return 0


def _prune(folder: Path) -> None:
    """Keep the MAX_VARIANTS newest entries of one lookup key."""
    entries = sorted(folder.glob(f"*{SUFFIX}"), key=_mtime, reverse=True)
    for old in entries[MAX_VARIANTS:]:
        try:
            old.unlink(missing_ok=True)
        except OSError:
            pass


# -- load and store ---------------------------------------------------------------------------------
def load(key: str, signature: str, devices) -> CachedProgram | None:
    """The entry of `key` recorded with this `signature`, its program loaded onto
    `devices` (the run's devices, in order), or None: no such entry, or an unusable one
    (removed, with one `CompileCacheWarning`). A hit touches the entry (it stays among the
    newest MAX_VARIANTS of its key)."""
    folder = directory()
    if folder is None:
        return None
    path = _path(folder, key, signature)
    _clean_parts([path.parent])
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        if os.path.isfile(path):
            drop(path, f"unreadable: {e}")
        else:  # not the entry: its folder (a file in the way, no permission, ...)
            folder_unusable(folder, e)
        return None
    try:
        header, blob = unpack(data)
        graph, uses_rng, names, stacking = _read_header(header, key, signature)
        compiled = program_codec.decode(header["program"], blob, devices)
    except Exception as e:  # noqa: BLE001 (whatever is wrong with an entry, the step is compiled again)
        drop(path, f"{type(e).__name__}: {e}")
        return None
    try:
        os.utime(path)
    except OSError:
        pass
    return CachedProgram(graph, compiled, uses_rng, names, path, stacking)


def store(key: str, captured, compiled, uses_rng: bool, batch_names, stacking=()) -> bool:
    """Write the entry for `key` atomically (a temporary file renamed into place), with the
    stacks of mutated state the program takes (`stacked_state.StackPlan.stacks`); False
    when the cache is off, the program cannot be written as data or the folder cannot be
    written (then the cache is off for the process: `folder_unusable`)."""
    folder = directory()
    if folder is None or not captured.signature:
        return False
    try:
        program, blob = program_codec.encode(compiled)
    except Exception:  # noqa: BLE001 (a program that cannot be serialized is simply not cached)
        return False
    header = {"format": FORMAT, "key": key, "signature": captured.signature,
              "graph": CachedGraph.of(captured).to_json(), "uses_rng": bool(uses_rng),
              "batch_names": list(batch_names), "program": program, "stacking": [list(p) for p in stacking]}
    data = pack(header, blob)
    path = _path(folder, key, captured.signature)
    tmp = path.parent / f".tmp-{_HOST}-{os.getpid()}-{secrets.token_hex(4)}.part"
    try:
        _private_dirs(folder, path.parent)
        _clean_parts(p for p in (folder / "steps").iterdir() if p.is_dir())
        with open(tmp, "xb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        _prune(path.parent)
    except OSError as e:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        folder_unusable(folder, e)
        return False
    return True
