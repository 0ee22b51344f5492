"""`modelzoo.common.pytorch` of Model Zoo 1.8: the runner classes and `run`.

    modelzoo.common.pytorch.pytorch_base_runner   PyTorchBaseRunner (and its `create` factory)
    modelzoo.common.pytorch.pytorch_runner        PyTorchRunner (CPU/GPU)
    modelzoo.common.pytorch.pytorch_cs_compiler   PyTorchCSCompiler (CSX, compile only)
    modelzoo.common.pytorch.pytorch_cs_runner     PyTorchCSRunner (CSX)
    modelzoo.common.pytorch.run_utils             run(model_fn, train_data_fn, eval_data_fn, ...)
    modelzoo.common.pytorch.PyTorchBaseModel      PyTorchBaseModel
"""
