"""The optimizer and scheduler classes have the real `__init__` signatures, annotations
included (`real_signatures_2_10.json`, written by `make_real_signatures.py` from the real
wheel), because config builders read them: the Model Zoo trainer makes a pydantic model
of every subclass of `Optimizer`, `LRScheduler` and `WeightDecayScheduler` from
`inspect.signature(cls.__init__)` and swaps annotations it knows (`ParamsT`,
`torch.optim.Optimizer`, `(float, "lr")`, ...) for config types.

For each real class: the same parameters in the same order, with the same kinds, the
same defaults and annotations that are the real ones evaluated against cstorch's objects
(`cerebras.pytorch.X` read as `cstorch.X`), as the signature shows them and as
`typing.get_type_hints` gives them. Parameters cstorch has beyond the real ones are
allowed only where `EXTRA` lists them, after the real ones and optional."""
import importlib
import inspect
import json
import os
import typing
from pathlib import Path

import pydantic
import pytest
import torch

import cstorch
from cstorch.optim.optimizer import ParamsT

REAL = json.loads(Path(__file__).with_name("real_signatures_2_10.json").read_text())["classes"]
REAL_PREFIX = "cerebras.pytorch"

#: cstorch-only parameters (optional, after the real ones), by real class
EXTRA = {
    "cerebras.pytorch.optim.Adam": {"maximize"},
    "cerebras.pytorch.optim.AdamW": {"maximize"},
}


def _ours(qualified: str):
    """cstorch's object for a qualified real name (`cerebras.pytorch.x.Y` -> `cstorch.x.Y`)."""
    if qualified.startswith(REAL_PREFIX + "."):
        qualified = "cstorch" + qualified[len(REAL_PREFIX):]
    parts = qualified.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(qualified)


def _expected_annotation(real: dict, source: str):
    """The real annotation `source` evaluated with cstorch's objects for the real names."""
    namespace = {name: _ours(origin) for name, origin in real["names"].items()}
    return eval(source, {"__builtins__": {}}, namespace)  # noqa: S307 (our own fixture)


def _expected_default(value):
    if isinstance(value, list):  # JSON has no tuples; the real defaults are tuples
        return tuple(value)
    return value


def _same_default(ours, real) -> bool:
    if isinstance(real, dict):  # a non-literal default: not compared
        return True
    real = _expected_default(real)
    if isinstance(real, bool) or isinstance(ours, bool) or real is None or ours is None:
        return type(ours) is type(real) and ours == real
    if isinstance(real, tuple):
        return isinstance(ours, tuple) and len(ours) == len(real) and all(map(_same_default, ours, real))
    if type(real) in (int, float):
        return type(ours) in (int, float) and ours == real
    return type(ours) is type(real) and ours == real


def signature_differences(qualified: str) -> list[str]:
    real = REAL[qualified]
    cls = _ours(qualified)
    init = cls.__init__
    params = list(inspect.signature(init).parameters.values())
    if not params or params[0].name != "self":
        return [f"{qualified}: __init__ does not start with self: {params}"]
    params = params[1:]
    try:
        hints = typing.get_type_hints(init)
    except Exception as e:  # noqa: BLE001 (the failure is the finding)
        return [f"{qualified}: typing.get_type_hints(__init__) fails: {e!r}"]
    problems = []
    names = [p.name for p in params]
    real_names = [p["name"] for p in real["params"]]
    if names[: len(real_names)] != real_names:
        problems.append(f"{qualified}: parameters {names}, real {real_names}")
    extra = names[len(real_names):] if names[: len(real_names)] == real_names else []
    allowed = EXTRA.get(qualified, set())
    for name in extra:
        p = params[names.index(name)]
        if name not in allowed:
            problems.append(f"{qualified}: extra parameter {name!r} (not in EXTRA)")
        elif p.default is inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            problems.append(f"{qualified}: extra parameter {name!r} is required")
        elif p.annotation is inspect.Parameter.empty or isinstance(p.annotation, str):
            problems.append(f"{qualified}: extra parameter {name!r} has no evaluated annotation")
    by_name = {p.name: p for p in params}
    for r in real["params"]:
        p = by_name.get(r["name"])
        if p is None:
            continue
        what = f"{qualified}({r['name']})"
        if p.kind.name != r["kind"]:
            problems.append(f"{what}: kind {p.kind.name}, real {r['kind']}")
        if "default" in r:
            if p.default is inspect.Parameter.empty:
                problems.append(f"{what}: required, real default {r['default']!r}")
            elif not _same_default(p.default, r["default"]):
                problems.append(f"{what}: default {p.default!r}, real {r['default']!r}")
        elif p.default is not inspect.Parameter.empty:
            problems.append(f"{what}: default {p.default!r}, required in the real API")
        if "annotation" not in r:
            continue
        expected = _expected_annotation(real, r["annotation"])
        if isinstance(p.annotation, str):
            problems.append(f"{what}: the signature shows the string {p.annotation!r}, not an evaluated annotation")
        elif p.annotation != expected:
            problems.append(f"{what}: annotation {p.annotation!r}, real {r['annotation']} = {expected!r}")
        if hints.get(r["name"]) != expected:
            problems.append(f"{what}: get_type_hints gives {hints.get(r['name'])!r}, real {expected!r}")
    return problems


@pytest.mark.parametrize("qualified", sorted(REAL))
def test_init_signature_is_the_real_one(qualified):
    problems = signature_differences(qualified)
    assert not problems, "\n".join(problems)


#: an unpacked cerebras-pytorch 2.10.0 wheel (its `cerebras/pytorch/optim` sources), if any
REAL_SOURCE = Path(os.environ.get("CEREBRAS_PYTORCH_2_10_SRC", "/tmp/cbpt"))


@pytest.mark.skipif(not (REAL_SOURCE / "cerebras" / "pytorch" / "optim").is_dir(),
                    reason=f"the real cerebras-pytorch 2.10.0 sources are not unpacked at {REAL_SOURCE} "
                           f"(set CEREBRAS_PYTORCH_2_10_SRC); the recorded fixture is checked without them")
def test_the_fixture_is_what_the_real_sources_say():
    from .make_real_signatures import collect

    assert json.loads(json.dumps(collect(REAL_SOURCE)))["classes"] == REAL  # JSON: tuples are lists


def test_params_t_is_torchs():
    """`cstorch.optim.optimizer.ParamsT` is the object config builders key on, as in the
    real package (torch's)."""
    from torch.optim.optimizer import ParamsT as torch_params_t

    assert ParamsT is torch_params_t
    assert inspect.signature(cstorch.optim.SGD.__init__).parameters["params"].annotation is ParamsT


def test_the_fixture_covers_the_classes():
    """Every optimizer and scheduler cstorch exports under a real name is in the fixture."""
    assert len(REAL) >= 70
    for module, base in [("cstorch.optim", cstorch.optim.Optimizer),
                         ("cstorch.optim.lr_scheduler", cstorch.optim.lr_scheduler.LRScheduler),
                         ("cstorch.optim.weight_decay_scheduler",
                          cstorch.optim.weight_decay_scheduler.WeightDecayScheduler),
                         ("cstorch.optim.scheduler", cstorch.optim.scheduler.Scheduler)]:
        mod = importlib.import_module(module)
        for name in getattr(mod, "__all__", []):
            obj = getattr(mod, name)
            if inspect.isclass(obj) and issubclass(obj, base):
                assert f"{REAL_PREFIX}{module[len('cstorch'):]}.{name}" in REAL, name


def test_signature_check_catches_differences(monkeypatch):
    """The check fails on a different default and a different annotation."""
    sgd = cstorch.optim.SGD

    def with_param(name, **change):
        sig = inspect.signature(sgd.__init__)
        params = [p.replace(**change) if p.name == name else p for p in sig.parameters.values()]
        return sig.replace(parameters=params)

    monkeypatch.setattr(sgd.__init__, "__signature__", with_param("momentum", default=0.5))
    assert any("default" in p for p in signature_differences("cerebras.pytorch.optim.SGD"))
    monkeypatch.setattr(sgd.__init__, "__signature__", with_param("lr", annotation=int))
    assert any("annotation" in p for p in signature_differences("cerebras.pytorch.optim.SGD"))
    monkeypatch.setattr(sgd.__init__, "__signature__", with_param("lr", annotation="float"))
    assert any("string" in p for p in signature_differences("cerebras.pytorch.optim.SGD"))


# -- a config model from each signature, as a config builder makes it --------------------------
def _all_subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _all_subclasses(sub)


def _config_model(cls):
    """A pydantic model of `cls.__init__`'s parameters (after self), with the mapping of
    annotations a config builder applies: the parameters and the optimizer become optional
    (they are supplied by the trainer), `lr` / `learning_rate` also take the other name.
    A mapped field is its `Annotated` type alone: with the pydantic installed here (2.13),
    `(Annotated[T, Field(default=d)], ...)` is a required field (the Model Zoo pins 2.8.2)."""
    mapping = {
        ParamsT: typing.Annotated[typing.List[dict], pydantic.Field(default=[])],
        torch.optim.Optimizer: typing.Annotated[typing.Optional[torch.optim.Optimizer], pydantic.Field(default=None)],
        (float, "lr"): typing.Annotated[float, pydantic.Field(default=0.1, alias="learning_rate")],
        (typing.Optional[float], "lr"): typing.Annotated[typing.Optional[float],
                                                         pydantic.Field(default=None, alias="learning_rate")],
        (float, "learning_rate"): typing.Annotated[float, pydantic.Field(default=0.1, alias="lr")],
        (typing.Optional[float], "learning_rate"): typing.Annotated[typing.Optional[float],
                                                                    pydantic.Field(default=None, alias="lr")],
    }
    fields = {}
    for name, p in list(inspect.signature(cls.__init__).parameters.items())[1:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        annotation = typing.Any if p.annotation is inspect.Parameter.empty else p.annotation
        if annotation in mapping:
            fields[name] = mapping[annotation]
        elif (annotation, name) in mapping:
            fields[name] = mapping[(annotation, name)]
        else:
            fields[name] = (annotation, ... if p.default is inspect.Parameter.empty else p.default)
    return pydantic.create_model(f"{cls.__name__}Config", __config__=pydantic.ConfigDict(
        arbitrary_types_allowed=True, populate_by_name=True), **fields)


#: the classes a 2.x YAML can name: not the 1.8 porting API's (`cstorch.legacy18`, which no
#: YAML names; whether its subclasses exist at collection would depend on whether another
#: test module imported it first)
CONFIGURABLE = sorted(
    {c for base in (cstorch.optim.Optimizer, cstorch.optim.lr_scheduler.LRScheduler,
                    cstorch.optim.weight_decay_scheduler.WeightDecayScheduler)
     for c in _all_subclasses(base) if c.__module__.startswith("cstorch.")
     and not c.__module__.startswith("cstorch.legacy18")},
    key=lambda c: (c.__module__, c.__qualname__))


@pytest.mark.parametrize("cls", CONFIGURABLE, ids=lambda c: f"{c.__module__}.{c.__qualname__}")
def test_a_config_model_builds_from_the_signature(cls):
    model = _config_model(cls)
    params = list(inspect.signature(cls.__init__).parameters)
    if "params" in params and cls.__name__ != "SpecOptimizer":
        assert not model.model_fields["params"].is_required()  # the ParamsT annotation was recognised
    if "optimizer" in params:
        assert not model.model_fields["optimizer"].is_required()  # the torch.optim.Optimizer annotation too


def test_config_models_validate_real_configs():
    """Config values as a Model Zoo YAML gives them validate against the models."""
    optim = cstorch.optim
    lr = optim.lr_scheduler
    wd = optim.weight_decay_scheduler
    assert _config_model(optim.SGD).model_validate({"learning_rate": 0.01, "momentum": 0.9}).lr == 0.01
    assert _config_model(optim.AdamW).model_validate({"lr": 1e-4, "betas": [0.9, 0.95]}).betas == (0.9, 0.95)
    assert _config_model(lr.ConstantLR).model_validate({"lr": 0.1, "total_iters": 10}).learning_rate == 0.1
    cfg = _config_model(lr.CosineDecayLR).model_validate(
        {"initial_learning_rate": 1e-3, "end_learning_rate": 0.0, "total_iters": 100, "param_group_tags": ["a"]})
    assert cfg.total_iters == 100 and cfg.param_group_tags == ["a"]
    assert _config_model(wd.CosineDecayWD).model_validate(
        {"initial_val": 0.1, "end_val": 0.0, "total_iters": 10}).end_val == 0.0
    with pytest.raises(pydantic.ValidationError):
        _config_model(lr.LinearLR).model_validate({"initial_learning_rate": 1.0, "end_learning_rate": 0.1,
                                                   "total_iters": "ten"})
