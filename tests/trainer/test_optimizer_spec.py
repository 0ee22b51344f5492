"""`init.optimizer` keys the optimizer class does not take: dropped with a warning, as the
Model Zoo's optimizer config does (its published ViT, LLaVA and multimodal YAMLs give
`Adam: {correct_bias: true}`; the real Adam takes no `correct_bias`), not an error."""
import pytest
import torch

from cstorch.trainer.specs.optim import OptimizerSpec


def test_an_argument_the_optimizer_does_not_take_is_dropped_with_a_warning():
    with pytest.warns(UserWarning, match=r"trainer.init.optimizer.Adam: Adam got 1 unexpected and unused "
                                         r"parameter\(s\): \['correct_bias'\]"):
        spec = OptimizerSpec.parse({"Adam": {"lr": 0.01, "betas": [0.9, 0.98], "correct_bias": True}},
                                   "trainer.init.optimizer")
    assert spec.kwargs == {"betas": [0.9, 0.98]} and spec.lr == 0.01
    optimizer = spec.build(torch.nn.Linear(2, 2))
    assert type(optimizer).__name__ == "Adam"
    assert all(g["correct_bias"] for g in optimizer.param_groups)  # Adam always corrects the bias


def test_an_argument_the_optimizer_takes_is_kept():
    spec = OptimizerSpec.parse({"AdamW": {"lr": 0.01, "correct_bias": False}}, "trainer.init.optimizer")
    assert spec.kwargs == {"correct_bias": False}
