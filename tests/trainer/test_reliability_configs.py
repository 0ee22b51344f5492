"""Hostile or odd configurations (issue 29): each is refused up front with a short,
clear error, or (a NaN static argument that does not change) is not an error at all.

(a) a YAML "billion laughs" of nested aliases: errors show a bounded excerpt of a value;
(b) NaN / inf learning rates and hyper-parameters: refused with the key's name (YAML) or
    torch's message (Python), never a torch INTERNAL ASSERT during capture;
(c) a NaN static argument of a traced step that stays NaN is no change;
(d) an empty train loader with num_epochs: the error says the loader is empty;
(e) a model_dir that is a file (or under one): a ConfigError / ValueError, nothing built;
(f) a YAML nested deeper than `config.MAX_NESTING` (written out, or through aliases): refused
    with a message, never a RecursionError;
(g) values out of their real range (issue 49): a seed torch.manual_seed refuses, a negative
    learning rate: refused with the key's name (the CLI exits 2), never a traceback.
"""
from __future__ import annotations

import math
import re
import textwrap
import time

import pytest
import torch

import cstorch
from cstorch.trainer import Trainer, TrainingLoop, build, config
from cstorch.trainer.config import ConfigError
from toy import Net, loader, sgd

NAN, INF = float("nan"), float("inf")

pytestmark = pytest.mark.usefixtures("no_backend")



def trainer_dict(tmp_path) -> dict:
    return {
        "init": {
            "device": "CPU",
            "model_dir": str(tmp_path / "model_dir"),
            "seed": 1,
            "model": {"name": "toy.py:Toy"},
            "optimizer": {"AdamW": {"lr": 0.01}},
            "schedulers": [{"CosineDecayLR": {"initial_learning_rate": 0.01, "end_learning_rate": 0.0,
                                              "total_iters": 4}}],
            "loop": {"max_steps": 2},
            "loggers": [],
        },
        "fit": {"train_dataloader": {"data_processor": "toy.py:ToyData", "batch_size": 4}},
    }


def _set(d, dotted, value):
    keys = [int(k) if k.isdigit() else k for k in dotted.split(".")]
    for k in keys[:-1]:
        d = d[k]
    d[keys[-1]] = value


def _validate(tmp_path, params: dict):
    return config.validate_params({"trainer": params}, "train", str(tmp_path))


# ======================================================================================
# (a) billion laughs: bounded excerpts of values in error messages
# ======================================================================================
def laughs(depth: int) -> str:
    """A YAML document whose key `top` is 9**depth "lol"s made of nested aliases."""
    names = [f"l{i}" for i in range(depth + 1)]
    lines = [f"{names[0]}: &{names[0]} [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for prev, name in zip(names, names[1:]):
        lines.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]")
    lines.append(f"top: *{names[-1]}")
    return "\n".join(lines) + "\n"


def bomb(tmp_path, depth: int):
    path = tmp_path / "laughs.yaml"
    path.write_text(laughs(depth))
    return config.load_params(path)["top"]


#: (key, where the error names it): a huge value at each place the YAML is checked (the
#: error shows an excerpt of the value, except where noted in NO_EXCERPT)
BOMB_PLACES = [
    ("init.seed", "trainer.init.seed"),
    ("init.device", "trainer.init.device"),
    ("init.model_dir", "trainer.init.model_dir"),
    ("init.model.name", "trainer.init.model.name"),
    ("init.optimizer.AdamW.lr", "trainer.init.optimizer.AdamW.lr"),
    ("init.optimizer.AdamW.adjust_learning_rate", "trainer.init.optimizer.AdamW.adjust_learning_rate"),
    ("init.schedulers", "trainer.init.schedulers"),
    ("init.schedulers.0", r"trainer.init.schedulers\[0\]"),
    ("init.loop.max_steps", "trainer.init.loop"),
    ("init.checkpoint", "trainer.init.checkpoint"),
    ("init.callbacks", "trainer.init.callbacks"),
    ("fit.ckpt_path", "trainer.fit.ckpt_path"),
    ("fit.train_dataloader.batch_size", "trainer.fit.train_dataloader.batch_size"),
]


NO_EXCERPT = {"init.optimizer.AdamW.lr"}  # "... is a schedule; move it to the schedulers section"


@pytest.mark.parametrize("key, where", BOMB_PLACES, ids=[p[0] for p in BOMB_PLACES])
def test_a_huge_value_gives_a_short_error_naming_its_key(tmp_path, toy_dir, key, where):
    value = bomb(tmp_path, 6)  # 9**6 = 531441 items: its repr is ~4 MB
    params = trainer_dict(toy_dir)
    _set(params, key, value)
    with pytest.raises(ConfigError, match=where) as info:
        _validate(toy_dir, params)
    message = str(info.value)
    assert len(message) < 1000, message[:2000]
    if key not in NO_EXCERPT:
        assert "'lol'" in message  # an excerpt of the value is still shown


def test_a_600_byte_billion_laughs_seed_fails_fast_with_a_short_message(tmp_path, toy_dir):
    text = laughs(9)  # 9**9 = 387 million "lol"s
    assert len(text) < 700
    params = trainer_dict(toy_dir)
    params["init"]["seed"] = bomb(tmp_path, 9)
    start = time.perf_counter()
    with pytest.raises(ConfigError, match="trainer.init.seed must be an integer") as info:
        _validate(toy_dir, params)
    assert time.perf_counter() - start < 5
    assert len(str(info.value)) < 400


def test_show_bounds_any_value():
    from cstorch.trainer.checks import show

    assert show("abc") == "'abc'"
    assert show([1, 2.5, None]) == "[1, 2.5, None]"
    assert show({"a": 1}) == "{'a': 1}"
    assert len(show("x" * 10_000)) <= 200
    assert len(show(list(range(10_000)))) <= 200
    assert len(show({str(i): [[i] * 50] * 50 for i in range(1000)})) <= 200
    nested = []
    for _ in range(100):
        nested = [nested]
    assert len(show(nested)) <= 200


# ======================================================================================
# (b) NaN / inf hyper-parameters
# ======================================================================================
def test_nan_lr_in_a_yaml_file_is_refused_with_its_key(toy_dir):
    (toy_dir / "p.yaml").write_text(textwrap.dedent(f"""\
        trainer:
          init:
            device: CPU
            model_dir: {toy_dir / 'model_dir'}
            model: {{name: toy.py:Toy}}
            optimizer:
              SGD: {{lr: .nan, momentum: 0.9}}
            loop: {{max_steps: 2}}
          fit:
            train_dataloader: {{data_processor: toy.py:ToyData, batch_size: 4}}
        """))
    params = config.load_params(toy_dir / "p.yaml")
    with pytest.raises(ConfigError, match=r"trainer\.init\.optimizer\.SGD\.lr must be a finite number, got nan"):
        build.run_trainer("train", params, base_dir=str(toy_dir))
    assert cstorch.backend() is None


NONFINITE = [
    ("init.optimizer.AdamW.lr", INF, r"trainer\.init\.optimizer\.AdamW\.lr must be a finite number, got inf"),
    ("init.optimizer", {"AdamW": {"learning_rate": -INF}},
     r"trainer\.init\.optimizer\.AdamW\.learning_rate must be a finite number, got -inf"),
    ("init.optimizer.AdamW.eps", NAN, r"trainer\.init\.optimizer\.AdamW\.eps must be a finite number, got nan"),
    ("init.optimizer.AdamW.weight_decay", INF,
     r"trainer\.init\.optimizer\.AdamW\.weight_decay must be a finite number, got inf"),
    ("init.optimizer.AdamW.betas", [NAN, 0.999],
     r"trainer\.init\.optimizer\.AdamW\.betas\[0\] must be a finite number, got nan"),
    ("init.optimizer.AdamW.adjust_learning_rate", {"bias": NAN},
     r"trainer\.init\.optimizer\.AdamW\.adjust_learning_rate\.bias must be a finite number, got nan"),
    ("init.schedulers.0.CosineDecayLR.initial_learning_rate", NAN,
     r"trainer\.init\.schedulers\[0\]\.CosineDecayLR\.initial_learning_rate must be a finite number, got nan"),
    ("init.schedulers", [{"SequentialLR": {"schedulers": [
        {"ConstantLR": {"learning_rate": NAN, "total_iters": 2}},
        {"ConstantLR": {"learning_rate": 0.1}}]}}],
     r"trainer\.init\.schedulers\[0\]\.SequentialLR\.schedulers\[0\]\.ConstantLR\.learning_rate must be a finite "
     r"number, got nan"),
    ("init.schedulers", [{"learning_rate": NAN}],
     r"trainer\.init\.schedulers\[0\]\.learning_rate must be a finite number, got nan"),
    ("init.schedulers", [{"learning_rate": "nan"}],
     r"trainer\.init\.schedulers\[0\]\.learning_rate must be a finite number, got 'nan'"),
    ("init.schedulers", [{"learning_rate": [{"scheduler": "Linear", "initial_learning_rate": 0.0,
                                             "end_learning_rate": INF, "total_iters": 2}]}],
     r"trainer\.init\.schedulers\[0\]\.learning_rate\[0\]\.end_learning_rate must be a finite number, got inf"),
]


@pytest.mark.parametrize("key, value, message", NONFINITE, ids=[n[0] + "=" + repr(n[1])[:20] for n in NONFINITE])
def test_nonfinite_hyperparameters_in_yaml_are_refused_with_their_key(toy_dir, key, value, message):
    params = trainer_dict(toy_dir)
    _set(params, key, value)
    with pytest.raises(ConfigError, match=message):
        _validate(toy_dir, params)


PY_NONFINITE = [
    (lambda ps: cstorch.optim.SGD(ps, lr=NAN), "Invalid learning rate: nan"),
    (lambda ps: cstorch.optim.SGD(ps, lr=INF), "Invalid learning rate: inf"),
    (lambda ps: cstorch.optim.SGD(ps, lr=0.1, momentum=NAN), "Invalid momentum value: nan"),
    (lambda ps: cstorch.optim.AdamW(ps, lr=NAN), "Invalid learning rate: nan"),
    (lambda ps: cstorch.optim.AdamW(ps, lr=0.1, eps=INF), "Invalid epsilon value: inf"),
    (lambda ps: cstorch.optim.AdamW(ps, lr=0.1, weight_decay=NAN), "Invalid weight_decay value: nan"),
    (lambda ps: cstorch.optim.AdamW(ps, lr=0.1, betas=(0.9, NAN)), "Invalid beta parameter at index 1: nan"),
    (lambda ps: cstorch.optim.SGD([{"params": list(ps), "lr": NAN}], lr=0.1), "Invalid learning rate: nan"),
]


@pytest.mark.parametrize("make, message", PY_NONFINITE, ids=[m for _, m in PY_NONFINITE])
def test_nonfinite_hyperparameters_in_python_are_refused_like_torch(make, message):
    with pytest.raises(ValueError, match=message + r" \(a hyper-parameter must be a finite number\)"):
        make(torch.nn.Linear(2, 2).parameters())


def test_nonfinite_param_group_added_later_is_refused():
    opt = cstorch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1)
    with pytest.raises(ValueError, match="Invalid learning rate: nan"):
        opt.add_param_group({"params": [torch.nn.Parameter(torch.zeros(2))], "lr": NAN})


def test_nonfinite_scheduler_arguments_name_the_public_argument():
    opt = cstorch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1)
    with pytest.raises(ValueError, match="CosineDecayLR: `initial_learning_rate` must be finite, got nan"):
        cstorch.optim.lr_scheduler.CosineDecayLR(opt, initial_learning_rate=NAN, end_learning_rate=0.0,
                                                 total_iters=3)
    with pytest.raises(ValueError, match="ConstantLR: `learning_rate` must be finite, got inf"):
        cstorch.optim.lr_scheduler.ConstantLR(opt, learning_rate=INF)


def test_a_nan_lr_set_on_a_param_group_by_hand_does_not_break_capture(tmp_path):
    """A run whose lr becomes NaN after the optimizer was built (not through a check) trains
    with that NaN (the parameters become NaN); the capture itself does not fail."""
    trainer = Trainer(device="CSX", model_dir=str(tmp_path / "m"), model=Net, optimizer=sgd(), seed=1, loggers=[],
                      loop=TrainingLoop(num_steps=2))
    trainer.optimizer.param_groups[0]["lr"] = NAN
    trainer.fit(loader())
    assert all(torch.isnan(p).any() for p in trainer.model.parameters() if p.dim() == 2)


# ======================================================================================
# (c) a NaN static argument
# ======================================================================================
def test_a_nan_static_argument_that_stays_nan_is_not_a_change():
    cstorch.backend("CSX")

    @cstorch.trace
    def step(batch, scale):
        return batch[0].sum() * scale

    for batch in cstorch.utils.data.DataExecutor(loader(), num_steps=3):
        out = step(batch, NAN)
    assert math.isnan(float(out))


def test_a_static_argument_that_changes_from_nan_is_still_an_error():
    cstorch.backend("CSX")

    @cstorch.trace
    def step(batch, scale):
        return batch[0].sum() * scale

    with pytest.raises(Exception, match="was nan when the step was compiled and is now 1.0"):
        for i, batch in enumerate(cstorch.utils.data.DataExecutor(loader(), num_steps=3)):
            step(batch, NAN if i == 0 else 1.0)


# ======================================================================================
# (d) an empty train loader
# ======================================================================================
def test_num_epochs_over_an_empty_loader_says_it_is_empty(tmp_path):
    trainer = Trainer(device="CPU", model_dir=str(tmp_path / "m"), model=Net, optimizer=sgd(), seed=1, loggers=[],
                      loop=TrainingLoop(num_epochs=1))
    with pytest.raises(ValueError) as info:
        trainer.fit(loader(n=4, batch_size=8))  # 4 samples, batches of 8 with drop_last: no batch
    message = str(info.value)
    assert "empty (length 0)" in message and "no length" not in message
    assert "batch_size" in message  # how to fix it


def test_num_epochs_over_a_loader_without_length_still_asks_for_steps_per_epoch():
    loop = TrainingLoop(num_epochs=1)
    with pytest.raises(ValueError, match="no length, so set steps_per_epoch"):
        loop.train_steps(0, None)


# ======================================================================================
# (e) a model_dir that is a file
# ======================================================================================
@pytest.mark.parametrize("under", [False, True], ids=["is_a_file", "under_a_file"])
def test_a_model_dir_that_is_a_file_is_a_config_error(toy_dir, under):
    blocker = toy_dir / "taken"
    blocker.write_text("not a folder")
    params = trainer_dict(toy_dir)
    params["init"]["model_dir"] = str(blocker / "sub" if under else blocker)
    with pytest.raises(ConfigError, match=r"trainer\.init\.model_dir .*is a file.*another model_dir"):
        build.run_trainer("train", {"trainer": params}, base_dir=str(toy_dir))
    assert cstorch.backend() is None


@pytest.mark.parametrize("under", [False, True], ids=["is_a_file", "under_a_file"])
def test_a_model_dir_that_is_a_file_is_refused_by_the_trainer(tmp_path, under):
    blocker = tmp_path / "taken"
    blocker.write_text("not a folder")
    with pytest.raises(ValueError, match=r"model_dir .*is a file.*another model_dir"):
        Trainer(device="CPU", model_dir=str(blocker / "sub" if under else blocker), model=Net, seed=1, loggers=[])
    assert cstorch.backend() is None


# ======================================================================================
# (f) deep nesting
# ======================================================================================
def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("how", ["written", "aliases"])
def test_a_yaml_nested_too_deep_is_refused_with_a_message(toy_dir, capsys, how):
    """1,000 levels in 2 kB of YAML (or a chain of aliases, each list holding the previous
    one) gave a RecursionError traceback from the YAML reader."""
    from cstorch.trainer import cli

    params = trainer_dict(toy_dir)
    text = yaml_text(params)
    if how == "written":
        deep = _nested(1000)
        assert len(deep) == 2000
    else:
        deep = "[" + ", ".join(["&l0 [x]"] + [f"&l{i} [*l{i - 1}]" for i in range(1, 1000)]) + "]"
    model = "model: {name: 'toy.py:Toy'}"
    assert text.splitlines()[5].strip() == model
    path = toy_dir / "deep.yaml"
    path.write_text(text.replace(model, f"model: {{name: 'toy.py:Toy', width: {deep}}}"))
    with pytest.raises(ConfigError, match=rf"params file .*deep.yaml.* nests mappings and lists more than "
                                          rf"{config.MAX_NESTING} levels deep .*line 6"):
        config.load_params(path)
    assert cli.main(["fit", str(path)]) == 2
    assert "nests mappings and lists" in capsys.readouterr().err
    assert cstorch.backend() is None


def test_nesting_up_to_the_limit_is_read(toy_dir):
    path = toy_dir / "deep.yaml"
    path.write_text(f"a: {_nested(config.MAX_NESTING - 1)}\n")  # the top mapping is one level
    value = config.load_params(path)["a"]
    for _ in range(config.MAX_NESTING - 2):
        (value,) = value
    assert value == []


# ======================================================================================
# (g) values out of their real range
# ======================================================================================
def yaml_text(params: dict) -> str:
    """The `trainer:` YAML of a trainer dict, written as a user would (flow-style leaves)."""
    import yaml

    return yaml.safe_dump({"trainer": params}, default_flow_style=None, sort_keys=False)


SEEDS_OUT = [2 ** 70, 2 ** 64, -2 ** 63 - 1]


@pytest.mark.parametrize("seed", SEEDS_OUT, ids=str)
def test_a_seed_out_of_torch_range_is_a_config_error(toy_dir, seed):
    params = trainer_dict(toy_dir)
    params["init"]["seed"] = seed
    with pytest.raises(ConfigError, match=rf"trainer\.init\.seed must be an integer from -2\*\*63 to 2\*\*64 - 1 "
                                          rf"\(what torch\.manual_seed accepts\), got {seed}"):
        _validate(toy_dir, params)
    with pytest.raises(ValueError, match=rf"seed must be an integer from -2\*\*63 to 2\*\*64 - 1.*got {seed}"):
        Trainer(device="CPU", model_dir=str(toy_dir / "m"), model=Net, seed=seed, loggers=[])
    assert cstorch.backend() is None and not (toy_dir / "m").exists()


@pytest.mark.parametrize("seed", [2 ** 64 - 1, -2 ** 63, 0])
def test_seeds_at_the_ends_of_the_range_are_accepted(toy_dir, seed):
    params = trainer_dict(toy_dir)
    params["init"]["seed"] = seed
    (spec,) = _validate(toy_dir, params)
    assert spec.init.seed == seed
    torch.manual_seed(seed)  # what the Trainer does with it
    torch.manual_seed(1)


def test_the_cli_exits_2_on_a_huge_seed(toy_dir, capsys):
    from cstorch.trainer import cli

    params = trainer_dict(toy_dir)
    params["init"]["seed"] = 2 ** 70
    path = toy_dir / "seed.yaml"
    path.write_text(yaml_text(params))
    assert cli.main(["fit", str(path)]) == 2
    assert "trainer.init.seed must be an integer from -2**63" in capsys.readouterr().err
    assert cstorch.backend() is None


NEGATIVE_LR = [
    ("init.optimizer.AdamW.lr", -0.1, r"trainer\.init\.optimizer\.AdamW\.lr must be >= 0"),
    ("init.optimizer", {"SGD": {"learning_rate": -1e-3}}, r"trainer\.init\.optimizer\.SGD\.learning_rate must be >= 0"),
    ("init.schedulers.0.CosineDecayLR.initial_learning_rate", -0.1,
     r"trainer\.init\.schedulers\[0\]\.CosineDecayLR\.initial_learning_rate must be >= 0"),
    ("init.schedulers.0.CosineDecayLR.end_learning_rate", -1e-5,
     r"trainer\.init\.schedulers\[0\]\.CosineDecayLR\.end_learning_rate must be >= 0"),
    ("init.schedulers", [{"SequentialLR": {"schedulers": [
        {"ConstantLR": {"learning_rate": -0.1, "total_iters": 2}},
        {"ConstantLR": {"learning_rate": 0.1}}]}}],
     r"trainer\.init\.schedulers\[0\]\.SequentialLR\.schedulers\[0\]\.ConstantLR\.learning_rate must be >= 0"),
    ("init.schedulers", [{"PiecewiseConstantLR": {"learning_rates": [0.1, -0.01], "milestones": [2]}}],
     r"trainer\.init\.schedulers\[0\]\.PiecewiseConstantLR\.learning_rates\[1\] must be >= 0"),
    ("init.schedulers", [{"learning_rate": -0.1}], r"trainer\.init\.schedulers\[0\]\.learning_rate must be >= 0"),
    ("init.schedulers", [{"learning_rate": "-0.1"}],
     r"trainer\.init\.schedulers\[0\]\.learning_rate must be >= 0(?=, got '-0\.1')"),
    ("init.schedulers", [{"learning_rate": [{"scheduler": "Linear", "initial_learning_rate": 0.0,
                                             "end_learning_rate": -0.1, "total_iters": 2}]}],
     r"trainer\.init\.schedulers\[0\]\.learning_rate\[0\]\.end_learning_rate must be >= 0"),
]


@pytest.mark.parametrize("key, value, message", NEGATIVE_LR, ids=[n[0] + "=" + repr(n[1])[:20] for n in NEGATIVE_LR])
def test_negative_learning_rates_in_yaml_are_refused_with_their_key(toy_dir, key, value, message):
    params = trainer_dict(toy_dir)
    _set(params, key, value)
    with pytest.raises(ConfigError, match=message + r", got .*a learning rate cannot be negative"):
        _validate(toy_dir, params)


OPTIMIZER_OUT_OF_RANGE = [
    ({"SGD": {"lr": 0.1, "momentum": -1}}, "Invalid momentum value: -1"),
    ({"SGD": {"lr": 0.1, "weight_decay": -0.5}}, "Invalid weight_decay value: -0.5"),
    ({"SGD": {"lr": 0.1, "nesterov": True}}, "Nesterov momentum requires a momentum and zero dampening"),
    ({"AdamW": {"lr": 0.1, "betas": [1.5, 0.9]}}, "Invalid beta parameter at index 0: 1.5"),
    ({"AdamW": {"lr": 0.1, "eps": -1e-8}}, "Invalid epsilon value: -1e-08"),
]


@pytest.mark.parametrize("optimizer, message", OPTIMIZER_OUT_OF_RANGE, ids=[m for _, m in OPTIMIZER_OUT_OF_RANGE])
def test_optimizer_arguments_out_of_their_range_are_refused_while_parsing(toy_dir, optimizer, message):
    """The optimizer's own checks run on the YAML's arguments before anything is built (a
    negative momentum used to exit 1 with a traceback from the optimizer's constructor; a
    negative weight_decay, which goes to the param groups, used to train)."""
    params = trainer_dict(toy_dir)
    params["init"]["optimizer"] = optimizer
    (name,) = optimizer
    with pytest.raises(ConfigError, match=rf"trainer\.init\.optimizer\.{name}: {re.escape(message)}"):
        _validate(toy_dir, params)


def test_a_zero_learning_rate_is_accepted(toy_dir):
    params = trainer_dict(toy_dir)
    _set(params, "init.optimizer.AdamW.lr", 0.0)
    _set(params, "init.schedulers.0.CosineDecayLR.end_learning_rate", 0)
    _validate(toy_dir, params)


def test_the_cli_exits_2_on_a_negative_lr_as_on_a_nan_one(toy_dir, capsys):
    from cstorch.trainer import cli

    for lr, message in (("-0.1", "trainer.init.optimizer.SGD.lr must be >= 0, got -0.1"),
                        (".nan", "trainer.init.optimizer.SGD.lr must be a finite number, got nan")):
        params = trainer_dict(toy_dir)
        params["init"]["optimizer"] = {"SGD": {"lr": 0.5, "momentum": 0.9}}
        params["init"].pop("schedulers")
        path = toy_dir / "lr.yaml"
        text = yaml_text(params)
        assert "lr: 0.5," in text
        path.write_text(text.replace("lr: 0.5,", f"lr: {lr},"))
        assert cli.main(["fit", str(path)]) == 2
        assert message in capsys.readouterr().err
        assert cstorch.backend() is None
