"""What each logger writes for the kinds of values `trainer.log_metrics` accepts: scalars
as floats everywhere; a str, a pandas DataFrame and a tensor with dimensions only in
TensorBoard (text, Markdown text, tensor summary); anything else a warning."""
import csv
import types

import numpy as np
import pytest
import torch
from tensorboard.backend.event_processing import event_accumulator

from cstorch.trainer.loggers import CSVLogger, TensorBoardLogger, as_scalar


def test_as_scalar():
    assert [as_scalar(v) for v in (True, 2, 2.5, torch.tensor(3.5), np.float32(1.5))] == [1.0, 2.0, 2.5, 3.5, 1.5]
    for other in ("text", torch.ones(1), np.ones(2), object()):
        assert as_scalar(other) is other


def test_tensorboard_and_csv_loggers_write_what_they_can(tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("tabulate")
    trainer = types.SimpleNamespace(summary_dir=str(tmp_path))
    board, table = TensorBoardLogger(), CSVLogger()
    board.pre_setup(trainer)
    table.pre_setup(trainer)
    frame = pd.DataFrame([["a", 1.0]], columns=["name", "count"])
    metrics = {k: as_scalar(v) for k, v in {"loss": torch.tensor(0.5), "note": "hello", "counts": frame,
                                             "hist": torch.arange(3.0)}.items()}
    for logger in (board, table):
        logger.log_metrics(metrics, 7)
    with pytest.warns(UserWarning, match="cannot log 'odd', a object"):
        board.log_metrics({"odd": object()}, 7)
    board.finalize()
    table.finalize()

    events = event_accumulator.EventAccumulator(str(tmp_path), size_guidance={"tensors": 0, "scalars": 0})
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars("loss")] == [(7, 0.5)]
    texts = {tag: events.Tensors(tag)[0].tensor_proto.string_val[0].decode()
             for tag in ("note/text_summary", "counts/text_summary")}
    assert texts == {"note/text_summary": "hello", "counts/text_summary": frame.to_markdown(tablefmt="github")}
    assert "hist" in events.Tags()["tensors"]
    with open(tmp_path / "metrics.csv") as f:
        assert list(csv.reader(f)) == [["step", "name", "value"], ["7", "loss", "0.5"]]
