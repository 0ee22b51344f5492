"""The Metric base class (registry, counting, caching, state) and the input errors."""
from __future__ import annotations

import pytest
import torch

import cstorch
from cstorch.metrics import (AccuracyMetric, AUCMetric, DiceCoefficientMetric, FBetaScoreMetric, MeanIOUMetric,
                             MeanMetric, MeanPerClassAccuracyMetric, Metric, PerplexityMetric, PrecisionAtKMetric,
                             RecallAtKMetric, get_all_metrics)

T = torch.as_tensor


class CountMetric(Metric):
    """A user-defined metric: the number of positive elements seen."""

    def reset(self):
        self.register_state("count", torch.tensor(0.0), persistent=True)

    def update(self, x):
        self.count.add_((x > 0).sum())

    def compute(self):
        return self.count.clone()


def test_registry_and_get_all_metrics():
    a1, a2 = AccuracyMetric("acc"), AccuracyMetric("acc")
    m = MeanMetric("loss")
    auc = AUCMetric()  # no name: the class name
    assert auc.name == "AUCMetric"
    assert Metric.registry["acc"] == [a1, a2]
    assert list(get_all_metrics()) == [("acc.0", a1), ("acc.1", a2), ("loss", m), ("AUCMetric", auc)]
    assert cstorch.metrics is __import__("cerebras.pytorch.metrics", fromlist=["x"])


def test_subclass_counts_caches_and_resets():
    m = CountMetric("count")
    assert m.num_updates == 0 and isinstance(m, torch.nn.Module)
    assert float(m(T([1, -1, 2]))) == 2.0  # calling = update + compute
    first = m.compute()
    assert m.compute() is first  # cached until the next update
    m.update(T([3]))
    assert m.num_updates == 2 and float(m) == 3.0
    state = m.count
    m.reset()
    assert m.num_updates == 0 and float(m) == 0.0
    assert m.count is state  # reset keeps the state tensor (a compiled step is bound to it)
    assert list(m.state_dict()) == ["count"]  # persistent=True
    assert list(AccuracyMetric("acc").state_dict()) == []  # metric state is not persistent by default
    assert set(MeanMetric("m").state_tensors()) == {"mean_value", "weight", "_update_count"}


def test_update_does_not_track_gradients():
    x = torch.randn(5, requires_grad=True)
    m = MeanMetric("mean")
    m.update(x * 2)
    assert not m.mean_value.requires_grad and m.mean_value.grad_fn is None


def test_compute_with_no_update_off_csx_is_nan_not_an_error():
    assert torch.isnan(MeanMetric("m").compute())


@pytest.mark.parametrize("make", [
    lambda: DiceCoefficientMetric(1), lambda: MeanIOUMetric(0), lambda: FBetaScoreMetric(1),
    lambda: MeanPerClassAccuracyMetric(-3),
])
def test_num_classes_must_be_at_least_two(make):
    with pytest.raises(ValueError, match="num_classes must be at least 2"):
        make()


def test_constructor_errors():
    with pytest.raises(TypeError, match="num_classes must be an int"):
        MeanIOUMetric(2.5)
    with pytest.raises(ValueError, match="average_type has to be one of"):
        FBetaScoreMetric(3, average_type="weighted")
    with pytest.raises(ValueError, match="'beta' should be a positive number"):
        FBetaScoreMetric(3, beta=0)
    with pytest.raises(ValueError, match="Curve must be either ROC or PR"):
        AUCMetric(curve="DET")
    with pytest.raises(ValueError, match="Invalid AUC summation method"):
        AUCMetric(summation_method="simpson")
    with pytest.raises(ValueError, match="num_thresholds must be an int > 1"):
        AUCMetric(num_thresholds=1)
    with pytest.raises(ValueError, match=r"thresholds must lie in \[0, 1\]"):
        AUCMetric(thresholds=[0.5, 1.5])
    with pytest.raises(ValueError, match=r"ignored class 4 is not a class id in \[0, 4\)"):
        DiceCoefficientMetric(4, ignore_classes=[4])
    with pytest.raises(ValueError, match="every one of the 2 classes is ignored"):
        MeanIOUMetric(2, ignore_classes=[0, 1])
    with pytest.raises(ValueError, match="k must be a positive int"):
        PrecisionAtKMetric(0)
    with pytest.raises(TypeError, match="name must be a string"):
        MeanMetric(3)


def test_update_errors():
    with pytest.raises(ValueError, match="mismatched shapes"):
        MeanIOUMetric(3).update(T([0, 1]), T([0, 1, 2]))
    with pytest.raises(ValueError, match="mismatched shapes"):
        AUCMetric().update(T([0, 1]), T([0.5]))
    with pytest.raises(ValueError, match="different numbers of elements"):
        AccuracyMetric("a").update(T([0, 1]), T([0, 1, 2]))
    with pytest.raises(ValueError, match="cannot be broadcast"):
        DiceCoefficientMetric(3).update(T([0, 1]), T([0, 1]), weights=T([1.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match="cannot be broadcast"):
        MeanMetric("m").update(T([1.0, 2.0]), T([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match="`labels` holds class 3, but num_classes is 3"):
        FBetaScoreMetric(3).update(T([0, 3]), T([0, 1]))
    with pytest.raises(ValueError, match="Negative values in `predictions`"):
        MeanIOUMetric(3).update(T([0, 1]), T([0, -1]))
    with pytest.raises(ValueError, match="num_classes is 2"):
        MeanPerClassAccuracyMetric(2).update(T([0, 2]), T([0, 1]))
    with pytest.raises(ValueError, match=r"must be in \[0, 1\]"):
        AUCMetric().update(T([0, 1]), T([0.5, 1.5]))
    with pytest.raises(ValueError, match="Negative values in `labels`"):
        AUCMetric().update(T([0, -1]), T([0.5, 0.5]))
    with pytest.raises(ValueError, match="scalar or a vector of size 2"):
        PrecisionAtKMetric(1).update(T([[0], [1]]), torch.rand(2, 3), weights=torch.ones(3))
    with pytest.raises(ValueError, match="k=4 is larger than the number of classes 3"):
        RecallAtKMetric(4).update(T([[0], [1]]), torch.rand(2, 3))
    with pytest.raises(ValueError, match=r"`predictions` must be \[batch_size, num_classes\]"):
        RecallAtKMetric(1).update(T([0, 1]), torch.rand(2, 3, 1))
    with pytest.raises(ValueError, match="batch size"):
        PrecisionAtKMetric(1).update(T([[0], [1], [2]]), torch.rand(2, 3))
    # a failed update is not counted
    m = PerplexityMetric("p")
    with pytest.raises(ValueError, match="cannot be broadcast"):
        m.update(T([1, 2]), T(1.0), weights=T([1.0, 1.0, 1.0]))
    assert m.num_updates == 0


def test_auc_interpolate_pr_auc_is_the_pr_area():
    """The real metric's public `interpolate_pr_auc()` is the area `compute()` reports for
    curve="PR" (interpolation summation)."""
    auc = AUCMetric(num_thresholds=50, curve="PR", name="pr")
    auc.update(torch.tensor([1, 0, 1, 1, 0, 0]), torch.tensor([0.9, 0.2, 0.6, 0.4, 0.5, 0.1]))
    assert float(auc.interpolate_pr_auc()) == pytest.approx(float(auc.compute()))
