"""`cstorch.backends`: the process-wide flag tree of the real API.

    cstorch.backends.csx.performance.micro_batch_size = 4
    cstorch.backends.csx.debug.retrace_every_iteration = False
    with cstorch.backends.csx.performance:          # restored on exit
        cstorch.backends.csx.performance.transfer_processes = 8

Every flag of `cerebras.pytorch` 2.10 exists with its type and default (see
`tests/api/inventory_2_10.json`), is type-checked on assignment (a value outside the
flag's type hint: ``TypeError("Expected <type> for `<name>`. Got <type>: <value>")``) and
validated like the real one (`ValueError` with the real message); an unknown name is an
`AttributeError` ("... has no flag ..."), and a group cannot be replaced.

A flag is read when it is used (a run, a save, a Trainer step). Assigning another value
while a `DataExecutor` is iterating raises RuntimeError ("Detected changes in the backend
flags during the execution run..."). Values persist across runs and backends until
assigned again, `reset()` or `cstorch.backends.DEFAULT` (per flag) restores defaults.

What each flag does here is data of the tree, not prose kept elsewhere: every flag (or
its group) says whether it takes effect (`TAKES_EFFECT`), is accepted without effect
(`NO_EFFECT`: it tunes the wafer's compiler, appliance or cluster) or is cstorch's own
(`OWN`), what it does and how it differs from the real flag (`_Flag.doc`,
`_Flag.differs`); the documentation's flag-tree page is generated from them.
"""
from __future__ import annotations

import copy
import os
import typing
from typing import Any, Callable, Dict, List, Literal, Optional, Union

#: assigning this to a flag restores its default (`cstorch.backends.DEFAULT`)
DEFAULT = object()

#: the appliance's gRPC message limit (2 GiB - 1 KiB) bounds `max_transfer_bytes`
MAX_MESSAGE_LENGTH = 2 * 1024 ** 3 - 1024
MAX_TRANSFER_BYTES = 256 * 1024 ** 2

MicroBatchSize = Union[None, int, Literal["explore", "auto"], Dict[str, Dict[str, int]]]


# -- type hints ----------------------------------------------------------------------------
def matches(value, hint) -> bool:
    """Whether `value` fits the type hint (the rule of the real flags: isinstance for
    classes, element-wise for list/dict, any member of a Union, equality for a Literal)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return True
    if origin is None:
        return isinstance(value, hint)
    if origin is Union:
        return any(matches(value, a) for a in args)
    if origin is Literal:
        return value in args
    if origin in (list, tuple, set):
        return isinstance(value, origin) and all(matches(v, args[0]) for v in value) if args else \
            isinstance(value, origin)
    if origin is dict:
        return isinstance(value, dict) and all(matches(k, args[0]) and matches(v, args[1])
                                               for k, v in value.items()) if args else isinstance(value, dict)
    raise TypeError(f"unsupported type hint {hint}")


def describe(hint, prefix: bool = True) -> str:
    """A type hint in words ("one of str, NoneType", "list of str")."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is None:
        if isinstance(hint, str):
            return f'"{hint}"'
        return getattr(hint, "__name__", str(hint))
    if origin in (list, tuple, set):
        return f"{origin.__name__} of {describe(args[0])}"
    if origin is dict:
        return ("dictionary of " if prefix else "") + f"{describe(args[0])} to {describe(args[1])} pairs"
    return ("one of " if prefix else "") + ", ".join(describe(a, False) for a in args)


# -- validators (the real flags' rules and messages) -----------------------------------------
def _transfer_processes(v):
    if not isinstance(v, int) or v <= 0:
        raise ValueError(f"transfer_processes must be a positive integer, got {v}")


def _max_transfer_bytes(v):
    if not isinstance(v, int) or v > MAX_MESSAGE_LENGTH or v < 0:
        raise ValueError(f"max_transfer_bytes must be a positive integer less than {MAX_MESSAGE_LENGTH}, got {v}")


def _optimization_level(v):
    if v not in range(0, 3):
        raise ValueError(f"optimization_level must be an integer in range [0, 3). Got {v}")


def _micro_batch_size(v):
    """The real rule: None, "auto", "explore", {"explore": {...}} (kept as "explore") or an
    int > 0 (bool included, as an int)."""
    ok = (v is None or v in ("auto", "explore") or (isinstance(v, int) and v > 0)
          or (isinstance(v, dict) and isinstance(v.get("explore"), dict)))
    if not ok:
        raise ValueError(
            f'Invalid value "{v}" for "micro_batch_size". Expected one of:\n'
            '\t"auto": Automatically choose an optimal micro batch size.\n'
            '\t"explore": Search for an optimal micro batch size and return.\n'
            '\t{"explore": {"min": Optional[<positive_int>], "max": Optional[<positive_int>]}}: Search for an '
            'optimal micro batch size within the min and max bounds and return.\n'
            '\t<positive_int>: Use this micro batch size.\n'
            '\tNone: Disable micro batch tiling.')


def _own(check: Callable[[Any], bool], accepted: str):
    """A cstorch-only flag: ValueError naming what is accepted (no real message to keep)."""
    def validate(v, path):
        if not check(v):
            raise ValueError(f"{path} must be {accepted}, got {v!r}.")
    validate.own = True
    return validate


_backend = None  # the process's backend, or None: told by cstorch._backend (`attach`)


def attach(backend) -> None:
    """Tell the flags which backend the process has (None after a reset): some flags are
    refused while it runs, or once it is created. `cstorch._backend`, which sits above
    this module (it reads the flags when it creates a backend), calls this."""
    global _backend
    _backend = backend


def _current_backend():
    """The process's backend, or None."""
    return _backend


def _shard_state(v, path):
    """`cluster.shard_state` (cstorch-only): a bool, read when the CSX backend is
    created; changing it while a CSX backend exists would be silently ignored, so it
    is refused."""
    if not isinstance(v, bool):
        raise ValueError(f"{path} must be True or False, got {v!r}.")
    b = _current_backend()
    if b is not None and b.is_csx and b.shard_state != v:
        raise RuntimeError(
            f"{path} is read when the CSX backend is created, and this process's backend was created with "
            f"shard_state={b.shard_state}: set the flag before cstorch.backend(\"CSX\", ...).")


_shard_state.own = True


class INI(dict):
    """`backends.csx.debug.ini`: compiler INI overrides, as a dict whose keys are also
    attributes (`ini.ws_opt_foo = 1`). Accepted and kept; they have no effect here."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name, value):
        self[name] = value


class DebugArgs(dict):
    """`backends.csx.debug.debug_args`: the appliance's debug arguments (a protobuf in
    the real system); a dict here, kept and without effect.

    `MergeFrom(other)` merges another set of debug arguments in, with the protobuf
    message's rules: a field set in `other` replaces a plain value, extends a list and
    is merged into a nested message. `other` is a mapping or a protobuf message (the
    real `DebugArgs` that `cerebras.appliance.utils.debug_args.get_debug_args` reads
    from a file), whose set fields are taken by name."""

    def MergeFrom(self, other) -> None:  # noqa: N802 (the protobuf method's name)
        _merge(self, _fields(other))


def _fields(message) -> dict:
    """A mapping or protobuf message as a dict of its (set) fields, nested ones included."""
    if isinstance(message, dict):
        return message
    if hasattr(message, "ListFields"):
        return {field.name: _plain(value) for field, value in message.ListFields()}
    raise TypeError(f"debug_args.MergeFrom() takes a mapping or a protobuf message, got {type(message).__name__}")


def _plain(value):
    if hasattr(value, "ListFields"):
        return _fields(value)
    if hasattr(value, "items"):  # a protobuf map field
        return {k: _plain(v) for k, v in value.items()}
    if not isinstance(value, (str, bytes)) and hasattr(value, "__len__") and hasattr(value, "__iter__"):
        return [_plain(v) for v in value]  # a repeated field
    return value


def _merge(into: dict, fields: dict) -> None:
    for name, value in fields.items():
        old = into.get(name)
        if isinstance(old, dict) and isinstance(value, dict):
            _merge(old, value)
        elif isinstance(old, list) and isinstance(value, list):
            old.extend(value)
        else:
            into[name] = copy.deepcopy(value)


#: what a flag does in cstorch (`_Flag.effect`), shown next to it in the documentation
TAKES_EFFECT = "takes effect"
NO_EFFECT = "no effect"  # accepted and validated; it tunes the wafer's compiler, appliance or cluster
OWN = "cstorch only"  # not a flag of the real API
EFFECTS = (TAKES_EFFECT, NO_EFFECT, OWN)


class _Flag:
    """A flag: its type hint, default (or default factory), validator (raising the real
    error) and the conversion of an accepted value to the one kept; and what it does
    here: `effect` (one of `EFFECTS`; None: its group's), `doc` (what it does in cstorch;
    "": its group's text says it) and `differs` (how it differs from the real flag)."""

    def __init__(self, hint, default, validate=None, factory: Optional[Callable] = None,
                 convert: Optional[Callable] = None, *, effect: Optional[str] = None, doc: str = "",
                 differs: str = ""):
        self.hint, self.validate, self.convert = hint, validate, convert
        self.factory = factory if factory is not None else (lambda: copy.deepcopy(default))
        if effect is not None and effect not in EFFECTS:
            raise ValueError(f"effect must be one of {EFFECTS}, got {effect!r}")
        self.effect, self.doc, self.differs = effect, doc, differs

    @property
    def default(self):
        return self.factory()


class _EnvFlag(_Flag):
    """A flag stored in an environment variable (`storage.s3.profile` = AWS_PROFILE)."""

    def __init__(self, hint, variable: str, **about):
        super().__init__(hint, None, **about)
        self.variable = variable


# -- the tree ---------------------------------------------------------------------------------
def _refuse_during_run(path: str, value) -> None:
    b = _current_backend()
    if b is not None and b.run.executor is not None:
        raise RuntimeError(
            f"Detected changes in the backend flags during the execution run: {path} was set to {value!r} while "
            f"a DataExecutor is iterating. Backend flags hold for a whole run: set them before iterating the "
            f"DataExecutor (before `for batch in executor:`) or after the run has ended."
        )


class FlagGroup:
    """A node of the flag tree: flags (validated on assignment) and nested groups.
    `asdict()`, `load_flags(dict)`, `reset()`, iteration as (name, value) pairs and use
    as a context manager (values restored on exit) follow the real flags. `effect`, `doc`
    and `differs` say what the group's flags do here, for those that do not say it
    themselves (see `_Flag`)."""

    def __init__(self, path: str, flags: Dict[str, _Flag] = None, groups: Dict[str, "FlagGroup"] = None, *,
                 effect: Optional[str] = None, doc: str = "", differs: str = ""):
        for flag in (flags or {}).values():
            if flag.effect is None:
                flag.effect = effect
        object.__setattr__(self, "_doc", doc)
        object.__setattr__(self, "_differs", differs)
        object.__setattr__(self, "_path", path)
        object.__setattr__(self, "_flags", dict(flags or {}))
        object.__setattr__(self, "_groups", dict(groups or {}))
        object.__setattr__(self, "_saved", [])
        for name, group in self._groups.items():
            object.__setattr__(self, name, group)
        self.reset(recurse=False, check_run=False)

    @property
    def _name(self) -> str:
        return self._path.rsplit(".", 1)[-1]

    def __getattribute__(self, name):
        if not name.startswith("_"):
            flag = object.__getattribute__(self, "_flags").get(name)
            if isinstance(flag, _EnvFlag):
                return os.environ.get(flag.variable)
        return object.__getattribute__(self, name)

    def __setattr__(self, name: str, value) -> None:
        self._set(name, value, check_run=True)

    def _set(self, name: str, value, check_run: bool) -> None:
        if name.startswith("_"):
            object.__setattr__(self, name, value)
            return
        if name in self._groups:
            if value is self._groups[name]:
                return
            raise AttributeError(f"{name} is a nested flag and cannot be set directly ({self._path}.{name} is a "
                                 f"group of flags: assign its flags one by one instead).")
        flag = self._flags.get(name)
        if flag is None:
            known = sorted([*self._flags, *self._groups])
            raise AttributeError(f"'_{self._name}' has no flag '{name}' ({self._path}'s flags are {known}).")
        path = f"{self._path}.{name}"
        if value is DEFAULT:
            value = flag.default
        elif getattr(flag.validate, "own", False):
            flag.validate(value, path)
        else:
            if not matches(value, flag.hint):
                raise TypeError(f"Expected {describe(flag.hint)} for `{name}`. Got {type(value)}: {value}")
            if flag.validate is not None:
                flag.validate(value)
            if flag.convert is not None:
                value = flag.convert(value)
        if check_run and _differs(getattr(self, name, DEFAULT), value):
            _refuse_during_run(path, value)
        if isinstance(flag, _EnvFlag):
            if isinstance(value, str):
                os.environ[flag.variable] = value
            else:
                os.environ.pop(flag.variable, None)
            return
        object.__setattr__(self, name, value)

    # -- the real flags' methods --------------------------------------------------------------
    def asdict(self) -> dict:
        """A deep copy of the values, nested groups as dicts."""
        out = {name: copy.deepcopy(getattr(self, name)) for name in self._flags}
        out.update({name: group.asdict() for name, group in self._groups.items()})
        return out

    def __iter__(self):
        yield from self.asdict().items()

    def load_flags(self, data) -> None:
        """Assign every flag of a dict (or another group of this kind), recursively."""
        if isinstance(data, FlagGroup):
            if data._path != self._path:
                raise ValueError(f"Expected flags of {self._path}. Got {data._path}")
            data = data.asdict()
        if not isinstance(data, dict):
            raise ValueError(f"Expected a dictionary, got {type(data)}")
        for key, value in data.items():
            if key in self._groups:
                self._groups[key].load_flags(value)
            else:
                setattr(self, key, copy.deepcopy(value))

    def reset(self, recurse: bool = True, check_run: bool = True) -> None:
        """Every flag back to its default (and the nested groups' when `recurse`)."""
        for name, flag in self._flags.items():
            if not isinstance(flag, _EnvFlag):  # the environment variable keeps its value
                self._set(name, flag.default, check_run)
        if recurse:
            for group in self._groups.values():
                group.reset(recurse, check_run)

    def __enter__(self):
        self._saved.append(self.asdict())
        return self

    def __exit__(self, *exc):
        if self._saved:
            self.load_flags(self._saved.pop())
        return False

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.asdict().items())
        return f"{self._name}({inner})"


def _differs(old, new) -> bool:
    try:
        return bool(old != new)
    except Exception:  # values without a plain comparison: any assignment is a change
        return True


def _non_negative_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _positive_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def _prefetch_setting(v) -> bool:
    return v == "auto" or _non_negative_int(v)


def _progress_mode(v) -> bool:
    return v is True or v is False or v == "auto"


_WAFER = ("No effect: it tunes the wafer's compiler, appliance or cluster, which cstorch does not have; the "
          "value is accepted and validated like the real flag's (the real errors).")

_MEMORY = {name: _Flag(Optional[int], None) for name in (
    "compile_crd_memory_gi", "execute_crd_memory_gi", "wrk_memory_gi", "act_memory_gi", "cmd_memory_gi",
    "wgt_memory_gi", "chf_memory_gi")}

csx = FlagGroup("cstorch.backends.csx", groups={
    "precision": FlagGroup("cstorch.backends.csx.precision", {
        "optimization_level": _Flag(
            int, 1, _optimization_level, effect=NO_EFFECT,
            doc="The precision optimization level (POL), an integer in [0, 3); `cstorch.current_pol()` returns it.",
            differs="No effect on the numerics: it tunes the wafer compiler's precision, while XLA computes in "
                    "float32, or in the half dtype `cstorch.amp` sets. Nothing but `current_pol()` reads it."),
    }),
    "performance": FlagGroup("cstorch.backends.csx.performance", {
        "micro_batch_size": _Flag(
            MicroBatchSize, "auto", _micro_batch_size,  # {"explore": bounds} is kept as "explore"
            convert=lambda v: "explore" if isinstance(v, dict) else v, effect=TAKES_EFFECT,
            doc='"auto", "explore", `{"explore": {"min": ..., "max": ...}}` (kept as "explore"), an int > 0 or '
                'None. An int M makes the Trainer split each device\'s share of a CSX batch into micro-batches '
                'of M inside the compiled step (gradients summed, loss averaged: the full batch\'s step) and '
                'ignore `grad_accum_steps` (warning when it is > 1), as the real system does; an M that does not '
                'divide the batch per device is a `ValueError`. The Trainer reads it for each training batch.',
            differs='"auto", "explore" and None compile the whole batch (the Trainer\'s `grad_accum_steps` '
                    'still applies): nothing chooses or searches for a micro-batch size. A custom '
                    '`@cstorch.trace` step compiles the whole batch whatever the flag says (the same math).'),
        "transfer_processes": _Flag(
            int, 5, _transfer_processes, effect=TAKES_EFFECT,
            doc="The number of threads that turn checkpoint tensors into host arrays while `cstorch.save` "
                "writes. The 1.8 `configure(transfer_processes=...)` sets it when `compile` creates a CSX "
                "backend."),
        "max_transfer_bytes": _Flag(int, MAX_TRANSFER_BYTES, _max_transfer_bytes, effect=NO_EFFECT,
                                    differs=_WAFER + " Tensors move between the host and the devices through XLA."),
        "compress_weights": _Flag(
            bool, False, effect=TAKES_EFFECT,
            doc="Recorded as the `compressed` attribute of every tensor `cstorch.save` writes.",
            differs="H5 tensor data is LZ4-compressed whatever the flag says, as the real H5 writer does (the "
                    "real S3 writer compresses with zstd when it is set; cstorch has no S3 writer)."),
        "use_speculative_optimizers": _Flag(bool, True, effect=NO_EFFECT, differs=_WAFER),
        "prefetch_batches": _Flag(
            Any, "auto", _own(_prefetch_setting, 'an integer >= 0 (0 turns prefetching off) or "auto"'), effect=OWN,
            doc='How many batches each data worker\'s producer thread prepares ahead of the step (0: no thread; '
                'each batch is made when the step needs it). "auto" (the default) is 2, except where the step '
                'computes on the host\'s own cores (the CPU backend, CSX on the cpu platform): there the batches '
                'are pulled on the main thread until the loader turns out slow (a median of 0.5 ms or more per batch '
                'over 4 consecutive pulls), and only then does the producer thread start, since a thread that '
                'prepares cheap batches ahead competes with the step for the same cores. Read when a '
                '`DataExecutor` run starts, on every backend; any other value is a `ValueError`. See '
                '`cstorch.utils.data.streamer`.'),
        "steps_per_launch": _Flag(
            int, 16, _own(_positive_int, "an integer >= 1"), effect=OWN,
            doc="How many calls of a compiled CSX step launch together as one executable (a loop over their "
                "batches whose body is the step, compiled once per count, when it comes a second time): the run "
                "collects the calls and launches them when that many wait, at a checkpoint step, at the last "
                "step, and whenever the host needs a value or the state first (a read of an output, a host "
                "edit, a checkpoint closure, the end of the run). Every step computes what it computes launched "
                "alone, bit for bit; step closures receive their values once their launch has run. 1 launches "
                "every call at once. Read when a "
                "`DataExecutor` run starts (`DataExecutor(steps_per_launch=...)` sets it for one run); on a "
                "multi-device mesh, and on the CPU for a step with convolutions or more than 2 GFLOP of matrix "
                "products (where XLA's loop body costs more than a launch saves), every step launches alone."),
        "trace_repeated_layers": _Flag(
            bool, True, effect=OWN,
            doc="True: while a step is captured, the children of a model's `ModuleList` or `Sequential` of "
                "which at least `cstorch_jax.repeated_blocks.MIN_REPEATS` share their class and structure are traced "
                "once and called as one graph per layer (forward and backward), so a deep model's capture no "
                "longer grows with the cost of tracing every layer; the numbers are those of the unrolled step. "
                "False traces every "
                "layer (the path before; for comparisons). Read when a step is captured."),
        "stack_repeated_layers_from": _Flag(
            int, 0, _own(_non_negative_int, "an integer >= 0"), effect=OWN,
            doc="0 (the default): off. N >= 2: with `trace_repeated_layers`, on one device, a run of at least N "
                "repeated layers whose parameters a cstorch optimizer updates keeps each kind of parameter and of "
                "optimizer state as one array over the layers, and the compiled step computes the run as one "
                "loop over them (`cstorch_jax.stacked_state`), so that its compile time stops growing with depth. "
                "A trade: on the CPU the benchmark GPT's first step at 32 layers takes ~7.4 s instead of ~10 s "
                "(compile 2.2 s instead of 5.3 s), but every later step ~13 % longer (77 against 68 ms: the loop "
                "copies each layer's saved activations in and out of the stacked arrays), and below ~16 layers "
                "the loop costs more compile than it saves; for runs of few steps (trying configurations), not for "
                "long training. The numbers agree with the unstacked step's within rounding, not bit for bit (XLA "
                "compiles the loop's body on its own and may fuse a product and a sum into one multiply-add "
                "there). Read when a step is captured."),
        "progress": _Flag(
            Any, "auto", _own(_progress_mode, 'True, False or "auto" (a bar only when stderr is a terminal)'),
            effect=OWN,
            doc='True, False or "auto" (a bar only when stderr is a terminal): the tqdm bar of a `DataExecutor` '
                'run on stderr (steps, steps/s, input-wait share, queue fill). Read when a run starts, on every '
                'backend; the Trainer turns it off while a `ProgressLogger` shows its own bar. Another value is '
                'a `ValueError`.'),
    }),
    "cluster": FlagGroup("cstorch.backends.csx.cluster", {
        "auto_taint": _Flag(bool, False, effect=NO_EFFECT, differs=_WAFER),
        "shard_state": _Flag(
            bool, False, _shard_state, effect=OWN,
            doc="With `ClusterConfig(num_csx=N)`, N > 1, every parameter, buffer and optimizer-state tensor is "
                "split over the N devices instead of replicated (FSDP / ZeRO-3, see `cstorch_jax.sharding`); "
                "with N = 1 it changes nothing. Read when the CSX backend is created: changing it while a CSX "
                "backend made with the other value exists is a `RuntimeError`. A flag rather than a "
                "`ClusterConfig` field, whose fields are the real dataclass's."),
    }),
    "storage": FlagGroup("cstorch.backends.csx.storage", groups={
        "s3": FlagGroup("cstorch.backends.csx.storage.s3", {"profile": _EnvFlag(
            Optional[str], "AWS_PROFILE", effect=TAKES_EFFECT,
            doc="Reads and sets the `AWS_PROFILE` environment variable (None unsets it), as the real flag "
                "does; `reset()` leaves the variable as it is.",
            differs="S3 checkpoint paths are not supported, so nothing in cstorch uses the profile.")}),
    }),
    "debug": FlagGroup("cstorch.backends.csx.debug", {
        "ini": _Flag(Union[INI, dict], None, factory=INI, convert=lambda v: v if isinstance(v, INI) else INI(v),
                     doc="Compiler INI overrides: a dict whose keys are also attributes (`ini.ws_opt_foo = 1`)."),
        "debug_args": _Flag(Union[DebugArgs, dict], None, factory=DebugArgs,
                            convert=lambda v: v if isinstance(v, DebugArgs) else DebugArgs(v),
                            doc="The appliance's debug arguments: a dict (a protobuf message in the real "
                                "system) with the message's `MergeFrom`."),
        "drop_data": _Flag(bool, False),
        "lazy_initialization": _Flag(bool, True),
        "skip_weight_init": _Flag(bool, False),
        "optimize_initialization": _Flag(bool, True),
        "log_initialization": _Flag(bool, True),
        "retrace_every_iteration": _Flag(
            bool, False, differs="No effect: on CSX the step's Python body runs once, when the step is captured "
                                 "at its first call, whatever the flag says."),
        "implicit_cast_cb16_to_fp32": _Flag(bool, False),
        "save_gpv": _Flag(bool, False),
        "check_constraints": _Flag(bool, False),
        "op_definition_module": _Flag(Optional[str], None),
        "skip_connectivity_check": _Flag(bool, False),
        "fabric_type_blacklist": _Flag(Optional[List[Literal["cs2", "cs3"]]], None),
        **_MEMORY,
    }, effect=NO_EFFECT, doc="Settings that debug or tune the wafer's compiler, appliance and cluster.",
        differs="cstorch has no wafer compiler, appliance or cluster: every flag of this group is accepted and "
                "validated like the real one (the real errors), and has no effect."),
})

#: the root of the tree, as `cstorch.backends` is in the real package
backends = FlagGroup("cstorch.backends", groups={"csx": csx})
object.__setattr__(backends, "DEFAULT", DEFAULT)


def reset() -> None:
    """Every flag back to its default."""
    backends.reset()


def asdict() -> dict:
    return backends.asdict()


__all__ = ["backends", "csx", "DEFAULT", "reset", "asdict"]
