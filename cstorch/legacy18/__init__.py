"""`cstorch.legacy18`: the "experimental" porting API of release 1.8, as a thin layer over
today's engine (the Model Zoo 1.8 runner classes of the same release are part of the
Trainer layer: `cstorch.trainer.legacy.runner`, `.device_runners`, `.base_model`; the top-level
`modelzoo` package serves them under the Model Zoo 1.8 module paths).

The porting API (`import cerebras_pytorch.experimental as cstorch`; the
`cerebras_pytorch` package aliases this one). Every name maps onto the 2.x public API;
nothing runs a step, an optimizer or a checkpoint by itself:

       1.8 name                                 2.x it is built on          module
       ---------------------------------------  --------------------------  -------------
       configure(model_dir, ..., checkpoint_     backend arguments,          run_config
         steps, num_csx, ...)                    ClusterConfig
       compile(model, backend="wse_ws")         cstorch.backend("CSX") +    compiled_model
                                                cstorch.compile
       utils.data.DataLoader(input_fn,          cstorch.utils.data.          utils.data
         num_steps=, max_steps=, num_epochs=,    DataLoader + one
         steps_per_epoch=, **input_fn_kwargs),   DataExecutor per pass
         iterated directly
       compile_step, step_closure,              cstorch.trace, step_closure, steps
         checkpoint_closure, save, load          checkpoint_closure, save,
                                                load
       optim.* (configure_optimizer,            cstorch.optim.*              optim
         Optimizer + state_names_to_sparsify,
         lr_scheduler.LRScheduler +
         _get_closed_form_lr, configure_lr_
         scheduler)
       amp.GradScaler, amp.optimizer_step(...,  cstorch.amp.*                amp
         max_gradient_val=)
       metrics.AccuracyMetric(name,             cstorch.metrics.*            metrics
         compute_on_system), PerplexityMetric,
         compute_all_metrics

Why a package of its own: the names clash with the 2.x ones they are built on
(`compile`, `DataLoader`, `Optimizer`, ...) and have other signatures, and
`cstorch.experimental` is the 2.x API's own (different) module.

Differences from the real system:
    Only the names above: the 1.8 package's other names (`scalar_summary`,
    `save_summaries`, `utils.CSConfig`, the lazy `xla` device) do not exist, and
    pipeline execution is not supported (`compile`).
"""
from . import amp, metrics, optim, utils
from . import run_config
from .compiled_model import compile
from .run_config import configure
from .steps import checkpoint_closure, compile_step, load, save, step_closure
from .utils import data as _data

__all__ = ["configure", "compile", "compile_step", "step_closure", "checkpoint_closure", "save", "load", "amp",
           "metrics", "optim", "utils"]


def _reset() -> None:
    """Start over (tests that run several 1.8 scripts in one process): forget the
    configuration and any unfinished DataLoader pass. The backend is reset separately."""
    run_config._reset()
    _data._reset()
