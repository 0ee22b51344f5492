"""A persistent cache of compiled steps, so that a second process running the same
script skips capture and compilation.

Every compiled step is stored under the cache folder (`CSTORCH_CACHE_DIR`, by default
`$XDG_CACHE_HOME/cstorch` or `~/.cache/cstorch`) as one file: the compiled XLA program
(serialized by `jax.experimental.serialize_executable`) with the input/output
description of its captured graph. An entry is found by a lookup key (the caller's:
which step, the shapes and dtypes of its state and batch, the run's placement) together
with this module's `engine_fingerprint` (versions of Python, torch, jax, jaxlib and
cstorch's own sources, the XLA options and flags, the platform). It is used only when the
step, run once more on fake tensors (`capture.trace_signature`, the step's Python body
with its side effects, without building a graph), dispatches exactly the ops recorded
when the entry was compiled (`CapturedGraph.signature`): any change to the code, a
constant, a hyper-parameter, a shape or a dtype gives another signature, and the step is
captured and compiled again (kept as another entry of the same key, up to MAX_VARIANTS). An entry that cannot
be read is ignored and rewritten; nothing is ever used on a partial match.

JAX's own persistent compilation cache is pointed at `<cache>/xla` as well (unless the
user configured it), so a step whose signature changed but whose XLA program did not
skips the XLA compile.

`CSTORCH_CACHE=0` (or `configure(enabled=False)`) turns both off; `configure(directory)`
moves them. Multi-process runs do not use the cache.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import pickle
import sys
import tempfile
import threading
from pathlib import Path

import jax

from .capture import CapturedGraph, TensorSpec

ENV_DIR = "CSTORCH_CACHE_DIR"
ENV_ENABLED = "CSTORCH_CACHE"
# the environment variables that change which program a step compiles to (graph passes)
PROGRAM_ENV_PREFIXES = ("CSTORCH_GEMM", "CSTORCH_FFI_GEMM", "CSTORCH_CHANNELS_LAST")
FORMAT = 1

_settings: dict = {"directory": None, "enabled": None}
_xla_cache_lock = threading.Lock()


def configure(directory: str | os.PathLike | None = None, enabled: bool | None = None) -> None:
    """Set the cache folder and/or turn the cache on or off for this process (overrides
    the environment variables)."""
    if directory is not None:
        _settings["directory"] = Path(directory).expanduser()
    if enabled is not None:
        _settings["enabled"] = bool(enabled)


def directory() -> Path | None:
    """The cache folder, or None when the cache is off."""
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


def usable() -> bool:
    """Whether a step may be cached: the cache is on and this is a one-process run (the
    processes of a multi-process run compile together)."""
    return directory() is not None and jax.process_count() == 1


def _xla_cache(folder: Path) -> None:
    """Point JAX's persistent compilation cache at `<folder>/xla` unless the user set one."""
    with _xla_cache_lock:
        if jax.config.jax_compilation_cache_dir:
            return
        jax.config.update("jax_compilation_cache_dir", str(folder / "xla"))


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


def engine_fingerprint(platform: str, compiler_options: dict) -> str:
    """Everything outside the step that decides the compiled program."""
    import jaxlib
    import torch

    parts = [
        f"format={FORMAT}", f"python={sys.version}", f"torch={torch.__version__}", f"jax={jax.__version__}",
        f"jaxlib={jaxlib.__version__}", f"sources={_source_digest()}", f"platform={platform}",
        f"devices={[d.device_kind for d in jax.devices()]}", f"options={sorted(compiler_options.items())}",
        f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')}",
        *(f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith(PROGRAM_ENV_PREFIXES)),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


@dataclasses.dataclass
class CachedGraph:
    """What a program loaded from the cache knows of its captured graph: everything but
    the graph itself (`module` is None: capture the step again to look at it)."""

    state_specs: tuple[TensorSpec, ...]
    batch_specs: tuple[TensorSpec, ...]
    output_specs: tuple[TensorSpec, ...]
    mutated: tuple[int, ...]
    unused: tuple[int, ...]
    graph_hash: str
    signature: str
    module: None = None
    constants: tuple = ()  # set by the caller from `trace_signature` (tensors are not stored)

    read_only = CapturedGraph.read_only
    changed_constants = CapturedGraph.changed_constants

    @classmethod
    def of(cls, captured) -> "CachedGraph":
        return cls(captured.state_specs, captured.batch_specs, captured.output_specs, captured.mutated,
                   captured.unused, captured.graph_hash, captured.signature)


MAX_VARIANTS = 8  # entries kept per lookup key (one per signature), newest first


def _path(folder: Path, key: str, signature: str) -> Path:
    return folder / "steps" / key / f"{signature}.pkl"


def entry_key(lookup: str, platform: str, compiler_options: dict) -> str:
    return hashlib.sha256(f"{lookup}\n{engine_fingerprint(platform, compiler_options)}".encode()).hexdigest()


def candidate(key: str) -> bool:
    """Whether an entry exists for `key` (a signature check decides whether it is used)."""
    folder = directory()
    return folder is not None and (folder / "steps" / key).is_dir() and any((folder / "steps" / key).glob("*.pkl"))


def load(key: str, signature: str):
    """(CachedGraph, serialized program, uses_rng, batch names) of the entry for `key`
    recorded with this `signature`, or None. A hit touches the entry (it stays among the
    newest MAX_VARIANTS of its key)."""
    folder = directory()
    if folder is None:
        return None
    try:
        with open(_path(folder, key, signature), "rb") as f:
            entry = pickle.load(f)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("format") != FORMAT or entry.get("signature") != signature:
        return None
    _xla_cache(folder)
    try:
        os.utime(_path(folder, key, signature))
    except OSError:
        pass
    return entry["graph"], entry["program"], entry["uses_rng"], entry["batch_names"]


def store(key: str, captured, compiled, uses_rng: bool, batch_names) -> bool:
    """Write the entry for `key` atomically (a temp file renamed into place); False when
    the cache is off or the program cannot be serialized."""
    folder = directory()
    if folder is None or not captured.signature:
        return False
    _xla_cache(folder)
    try:
        from jax.experimental import serialize_executable

        program = serialize_executable.serialize(compiled)
    except Exception:  # a program XLA cannot serialize is simply not cached
        return False
    entry = {"format": FORMAT, "signature": captured.signature, "graph": CachedGraph.of(captured),
             "program": program, "uses_rng": uses_rng, "batch_names": list(batch_names)}
    path = _path(folder, key, captured.signature)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".part")
        with os.fdopen(fd, "wb") as f:
            pickle.dump(entry, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
        _prune(path.parent)
    except OSError:
        return False
    return True


def _prune(folder: Path) -> None:
    """Keep the MAX_VARIANTS newest entries of one lookup key."""
    entries = sorted(folder.glob("*.pkl"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
    for old in entries[MAX_VARIANTS:]:
        old.unlink(missing_ok=True)


def deserialize(program, devices):
    """A loaded `jax.stages.Compiled` from `store`'s serialized program, on `devices` (the
    run's devices, in order; by default JAX would load it onto every device of the
    process, and a one-device program then expects one input per device)."""
    from jax.experimental import serialize_executable

    payload, in_tree, out_tree = program
    return serialize_executable.deserialize_and_load(payload, in_tree, out_tree, execution_devices=devices)
