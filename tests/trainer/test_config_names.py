"""What a trainer YAML may name (issue 20, item 5): a registered name, a class of the kind
its place expects named by dotted path or by `file.py:Class`, and nothing else. Every
place a name is read refuses callables that are not such classes (`os.system`,
`subprocess.Popen`, `subprocess:getoutput`, `builtins.eval`, `posix.system`, a file of
the standard library) with a ConfigError naming the key, before anything is called: a
probe file the call would create must not exist, and no backend is made."""
import os
import subprocess
import sys

import pytest

import cstorch
from cstorch.trainer import build, registry
from cstorch.trainer.config import ConfigError

pytestmark = pytest.mark.usefixtures("no_backend")




def trainer(toy_dir) -> dict:
    return {
        "init": {"device": "CPU", "model_dir": str(toy_dir / "model_dir"), "seed": 1,
                 "model": {"name": "toy.py:Toy"}, "optimizer": {"SGD": {"lr": 0.1}},
                 "loop": {"max_steps": 2}, "logging": {"log_steps": 1}},
        "fit": {"train_dataloader": {"data_processor": "toy.py:ToyData"},
                "val_dataloader": {"data_processor": "toy.py:ToyData"}},
    }


# the callables a YAML could smuggle in, and arguments with which each would create `probe`
def _payloads(probe: str) -> dict:
    return {
        "os.system": {"command": f"touch {probe}"},
        "posix.system": {"command": f"touch {probe}"},
        "subprocess:getoutput": {"cmd": f"touch {probe}"},
        "subprocess.Popen": {"args": ["touch", probe]},
        "builtins.eval": {"source": f"open({probe!r}, 'w').close()"},
        f"{subprocess.__file__}:getoutput": {"cmd": f"touch {probe}"},  # the same code, named by file
    }


PAYLOAD_IDS = ["os.system", "posix.system", "subprocess:getoutput", "subprocess.Popen", "builtins.eval",
               "stdlib-file"]


def _registry_refusal(name: str) -> str:
    return "Python installation" if name.startswith("/") else "standard library"


# place -> (put the name and its arguments into a trainer dict, the key path the error names, why)
PLACES = {
    "model": (lambda t, n, kw: t["init"].update(model={"name": n, **kw}), r"trainer\.init\.model\.name: ",
              _registry_refusal),
    "train_data_processor": (lambda t, n, kw: t["fit"].update(train_dataloader={"data_processor": n, **kw}),
                             r"trainer\.fit\.train_dataloader\.data_processor: ", _registry_refusal),
    "val_data_processor": (lambda t, n, kw: t["fit"].update(val_dataloader=[{"data_processor": n, **kw}]),
                           r"trainer\.fit\.val_dataloader\[0\]\.data_processor: ", _registry_refusal),
    "callback": (lambda t, n, kw: t["init"].update(callbacks=[{n: kw}]), r"trainer\.init\.callbacks\[0\]\.",
                 _registry_refusal),
    "callback_by_name": (lambda t, n, kw: t["init"].update(callbacks=[n]), r"trainer\.init\.callbacks\[0\]: ",
                         _registry_refusal),
    "logger": (lambda t, n, kw: t["init"].update(loggers=[{n: kw}]), r"trainer\.init\.loggers\[0\]\.",
               _registry_refusal),
    "optimizer": (lambda t, n, kw: t["init"].update(optimizer={n: kw}), r"trainer\.init\.optimizer: ",
                  lambda n: "unknown optimizer"),
    "scheduler": (lambda t, n, kw: t["init"].update(schedulers=[{n: kw}]), r"trainer\.init\.schedulers\[0\]: ",
                  lambda n: "unknown scheduler"),
    "nested_scheduler": (lambda t, n, kw: t["init"].update(schedulers=[{"ScalePerParamLR": {"scheduler": {n: kw}}}]),
                         r"trainer\.init\.schedulers\[0\]\.ScalePerParamLR\.scheduler: ", lambda n: "unknown scheduler"),
    "learning_rate_scheduler": (
        lambda t, n, kw: t["init"].update(schedulers=[{"learning_rate": {"scheduler": n, **kw}}]),
        r"trainer\.init\.schedulers\[0\]\.learning_rate\.scheduler: ", lambda n: "Unknown learning-rate scheduler"),
}


@pytest.mark.parametrize("place", list(PLACES))
@pytest.mark.parametrize("name_index", range(len(PAYLOAD_IDS)), ids=PAYLOAD_IDS)
def test_a_yaml_cannot_name_a_callable_that_is_not_a_class_of_its_place(toy_dir, place, name_index):
    probe = toy_dir / "probe"
    name, kwargs = list(_payloads(str(probe)).items())[name_index]
    params = trainer(toy_dir)
    put, where, why = PLACES[place]
    put(params, name, kwargs)
    with pytest.raises(ConfigError, match=where) as info:
        build.run_trainer("train_and_eval", {"trainer": params}, base_dir=str(toy_dir))
    assert why(name) in str(info.value), str(info.value)
    assert not probe.exists(), f"{name} ran"
    assert cstorch.backend() is None


def test_the_legacy_format_is_checked_the_same_way(toy_dir):
    probe = toy_dir / "probe"
    legacy = {"model": {"name": "os.system", "command": f"touch {probe}"},
              "train_input": {"data_processor": "toy.py:ToyData"},
              "optimizer": {"optimizer_type": "SGD", "learning_rate": 0.1},
              "runconfig": {"target_device": "CPU", "max_steps": 1, "model_dir": str(toy_dir / "m")}}
    with pytest.raises(ConfigError, match=r"trainer\.init\.model\.name: .*standard library"):
        build.run_trainer("train", legacy, base_dir=str(toy_dir))
    assert not probe.exists()


@pytest.mark.parametrize("place, name, message", [
    ("model", "torch.optim.SGD", r"model 'torch.optim.SGD' is not a model class: a model that is not registered "
                                 r"must be a subclass of torch.nn.Module, and torch.optim.SGD is a class of "
                                 r"torch.optim.sgd\. Nothing was called\."),
    ("train_data_processor", "torch.utils.data.DataLoader", "must be a class with a create_dataloader"),
    ("callback", "torch.nn.Linear", r"must be a subclass of cstorch.trainer.Callback"),
    ("model", "toy.py:ToyData", r"must be a subclass of torch.nn.Module, and toy.py:ToyData is a class of file "),
    ("model", "torch.nn.functional.relu", r"'relu' in module 'torch.nn.functional' is not a class \(it is a "
                                          r"function\)"),
], ids=["optimizer-as-model", "loader-as-processor", "module-as-callback", "processor-as-model", "function"])
def test_a_class_of_another_kind_is_refused(toy_dir, place, name, message):
    params = trainer(toy_dir)
    PLACES[place][0](params, name, {})
    with pytest.raises(ConfigError, match=message):
        build.run_trainer("train", {"trainer": params}, base_dir=str(toy_dir))
    assert cstorch.backend() is None


@pytest.mark.parametrize("name", ["antigravity.Fly", "this:Zen", os.path.join(os.path.dirname(os.__file__),
                                                                                "antigravity.py") + ":Fly"])
def test_standard_library_code_is_neither_imported_nor_loaded(toy_dir, name):
    """Importing antigravity opens a web browser, `this` prints: neither module may run."""
    before = set(sys.modules)
    params = trainer(toy_dir)
    params["init"]["model"] = {"name": name}
    with pytest.raises(ConfigError, match="standard library|Python installation"):
        build.run_trainer("train", {"trainer": params}, base_dir=str(toy_dir))
    loaded = set(sys.modules) - before
    assert not {m for m in loaded if "antigravity" in m or m == "this"}, loaded


def test_registered_names_are_trusted(toy_dir, monkeypatch):
    """A registered name may stand for any factory: the code that registered it vouches for it."""
    made = []

    def make_toy(width=4):
        made.append(width)
        return registry.load_file(str(toy_dir / "toy.py")).Toy(width)

    monkeypatch.setitem(registry._REGISTRY["model"], "test_config_names_factory", make_toy)
    params = trainer(toy_dir)
    params["init"]["model"] = {"name": "test_config_names_factory", "width": 4}
    (done,) = build.run_trainer("train", {"trainer": params}, base_dir=str(toy_dir))
    assert made == [4] and done.global_step == 2


def test_the_cli_refuses_it_with_exit_status_2(toy_dir):
    probe = toy_dir / "probe"
    path = toy_dir / "bad.yaml"
    path.write_text(f"trainer:\n  init:\n    device: CPU\n    model: {{name: os.system, command: touch {probe}}}\n"
                    f"    optimizer: {{SGD: {{lr: 0.1}}}}\n    loop: {{max_steps: 1}}\n"
                    f"  fit:\n    train_dataloader: {{data_processor: toy.py:ToyData}}\n")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "cstorch.trainer", "fit", str(path)], capture_output=True, text=True,
                          env=env, cwd=toy_dir, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("cstorch: error: trainer.init.model.name: model 'os.system': 'os' is a module of "
                                  "the Python standard library"), proc.stderr
    assert not probe.exists()
