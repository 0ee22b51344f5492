"""Model Zoo 1.8 path of `run` (`cstorch.trainer.legacy.runner.run`): the per-model `run.py`
entry point, `run(model_fn, train_data_fn, eval_data_fn, default_params_fn=None)`."""
from cstorch.trainer.legacy.runner import run

__all__ = ["run"]
