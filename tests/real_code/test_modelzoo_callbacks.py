"""Two Model Zoo callbacks (Cerebras/modelzoo, Apache-2.0; see modelzoo_callbacks/README.md)
run unmodified inside cstorch's Trainer, on CSX and on the CPU backend.

`CountParams` logs a pandas DataFrame through `trainer.log_metrics` at setup (the
TensorBoardLogger writes it as a Markdown table, as the real one does);
`ModelZooParamsMetadata` puts `__metadata__` into every checkpoint and sets
`trainer.metadata` when one is loaded."""
import warnings

import pytest
import torch

import cstorch
from cstorch.trainer import Trainer
from cstorch.trainer.callbacks import Checkpoint, Logger, TensorBoardLogger, TrainingLoop

from .support import Classifier, assert_close_relative, classifier_loader, load_vendored, sgd

pytest.importorskip("pandas")
pytest.importorskip("tabulate")
with warnings.catch_warnings():  # its docstring has a "\." escape (the file is kept as published)
    warnings.simplefilter("ignore", DeprecationWarning)
    model_stats = load_vendored("modelzoo_callbacks/model_stats.py")
metadata = load_vendored("modelzoo_callbacks/metadata.py")


class Recorder(Logger):
    def __init__(self):
        self.logged = []

    def log_metrics(self, metrics, step):
        self.logged.append((step, dict(metrics)))


def _fit(tmp_path, device, params):
    recorder = Recorder()
    count = model_stats.CountParams(search_and_replace=[[r"layers\.\d+\.", "grouped_layers."]])
    trainer = Trainer(device=device, model_dir=str(tmp_path / device), model=Classifier, optimizer=sgd, seed=3,
                      loop=TrainingLoop(max_steps=4), checkpoint=Checkpoint(steps=2),
                      callbacks=[count, metadata.ModelZooParamsMetadata(params)],
                      loggers=[recorder, TensorBoardLogger()])
    trainer.fit(classifier_loader())
    return trainer, count, recorder


@pytest.mark.parametrize("device", ["CSX", "CPU"])
def test_count_params_logs_its_table(tmp_path, device):
    trainer, count, recorder = _fit(tmp_path, device, {})
    n = sum(p.numel() for p in trainer.model.parameters())
    assert count.total_params == count.total_trainable_params == n
    [(step, logged)] = [(s, m) for s, m in recorder.logged if "parameter_counts" in m]
    table = logged["parameter_counts"]
    assert step == 0 and list(table.columns) == ["Modules", "Parameters", "%"]
    assert table["Parameters"].sum() == n and abs(table["%"].sum() - 100) < 1e-9
    assert list(table["Modules"]) == ["grouped_layers.weight", "grouped_layers.bias"]

    from tensorboard.backend.event_processing import event_accumulator

    events = event_accumulator.EventAccumulator(str(trainer.summary_dir), size_guidance={"tensors": 0})
    events.Reload()
    [text] = events.Tensors("parameter_counts/text_summary")
    markdown = text.tensor_proto.string_val[0].decode()
    assert markdown.startswith("|") and "grouped_layers.weight" in markdown


@pytest.mark.slow
def test_metadata_in_checkpoints_and_csx_equals_cpu(tmp_path):
    params = {"trainer": {"init": {"seed": 3}}}
    trained = {}
    for device in ("CSX", "CPU"):
        trainer, _, _ = _fit(tmp_path, device, params)
        (_, last) = trainer.checkpoint.checkpoints()[-1]
        state = cstorch.load(str(last))
        assert state["__metadata__"] == [{"version": cstorch.__version__, "model_name": "Classifier",
                                          "params": params}]
        trained[device] = {k: torch.as_tensor(v) for k, v in state["model"].items()}

        # a new trainer on the same model_dir autoloads the last checkpoint
        again = Trainer(device=device, model_dir=str(tmp_path / device), model=Classifier, optimizer=sgd, seed=3,
                        loop=TrainingLoop(max_steps=4), callbacks=[metadata.ModelZooParamsMetadata(params)],
                        loggers=[])
        again.fit(classifier_loader())
        assert again.metadata == state["__metadata__"]
        cstorch._backend._reset_backend()
    assert_close_relative(trained["CSX"], trained["CPU"])
