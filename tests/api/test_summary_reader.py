"""The real SummaryReader's members that scripts call: `Tags`, `reload`, `scalar_groups`,
text summaries, `Scalars(name)`, `read_tensor(..., latest_only)`, a string `filter`."""
import pytest
import torch

pytest.importorskip("tensorboard")

import cstorch.utils.tensorboard as cstb  # noqa: E402


def _write(log_dir, extra=False):
    w = cstb.SummaryWriter(log_dir=str(log_dir))
    w.add_scalar("train/loss", 0.5, 1)
    w.add_scalar("train/lr", 0.1, 1)
    w.add_scalar("eval/loss", 0.7, 1)
    w.add_tensor("weights", torch.ones(2), 1)
    w.add_text("notes", "first", 1)
    w.add_text("notes", "second", 2)
    if extra:
        w.add_scalar("train/loss", 0.25, 2)
    w.close()


def test_tags_groups_and_text_summaries(tmp_path):
    _write(tmp_path)
    r = cstb.SummaryReader(tmp_path)
    assert r.Tags() == {"scalars": ["eval/loss", "train/loss", "train/lr"],
                        "tensors": ["notes/text_summary", "weights"]}
    assert r.scalar_groups() == {"train", "eval"}
    assert r.text_summary_names() == {"notes/text_summary"}
    assert r.read_text_summary("notes") == [(1, "first"), (2, "second")]
    assert r.read_text_summary("notes/text_summary", step=2) == "second"
    with pytest.raises(RuntimeError, match="Could not find text summary other/text_summary"):
        r.read_text_summary("other")
    with pytest.raises(RuntimeError, match="at step 9"):
        r.read_text_summary("notes", step=9)
    assert r.Scalars("train/loss") == r.read_scalar("train/loss") == [(1, 0.5)]
    assert torch.equal(r.read_tensor("weights", 1, latest_only=False), torch.ones(2))


def test_string_filter_and_reload(tmp_path):
    _write(tmp_path)
    r = cstb.SummaryReader(tmp_path, filter="train")
    assert r.scalar_names() == ["train/loss", "train/lr"]
    _write(tmp_path / "later", extra=True)  # new events appear after the reader was made
    assert r.read_scalar("train/loss") == [(1, 0.5)]
    r.reload()
    assert r.read_scalar("train/loss") == [(1, 0.5), (2, 0.25)]
    assert cstb.SummaryReader(tmp_path, size_guidance={"scalars": 0, "tensors": 0}).scalar_names()
