"""`cstorch.metrics`: metrics whose state is accumulated inside the (compiled) step.

Each metric is a `torch.nn.Module`; call it with a batch (`metric(labels, preds)`
updates and returns the value) inside the eval step, and read `float(metric)` after
the run. On CSX the metric state is state of the compiled step: it stays on the device
during a run and is copied back into the metric's buffers at its end.
"""
from .accuracy import AccuracyMetric
from .auc import AUCMetric
from .dice_coefficient import DiceCoefficientMetric
from .fbeta_score import FBetaScoreMetric
from .mean import MeanMetric
from .mean_iou import MeanIOUMetric
from .mean_per_class_accuracy import MeanPerClassAccuracyMetric
from .metric import Metric, get_all_metrics
from .perplexity import PerplexityMetric
from .precision_at_k import PrecisionAtKMetric
from .recall_at_k import RecallAtKMetric
from . import utils

__all__ = [
    "AccuracyMetric", "AUCMetric", "DiceCoefficientMetric", "FBetaScoreMetric", "MeanMetric", "MeanIOUMetric",
    "MeanPerClassAccuracyMetric", "Metric", "PerplexityMetric", "PrecisionAtKMetric", "RecallAtKMetric",
    "get_all_metrics", "utils",
]
