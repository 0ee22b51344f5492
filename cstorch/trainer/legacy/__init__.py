"""The Model Zoo 1.8 path over the Trainer: the legacy flat YAML format converted to the
`trainer:` format (`flat_format`), and the 1.8 runner classes a Model Zoo 1.8 `run.py`
drives (`runner`: `PyTorchBaseRunner` and `run`; `device_runners`: the CPU/GPU runner, the
CSX runner and compiler; `base_model`: `PyTorchBaseModel`). The `modelzoo/` package serves
them under their 1.8 module paths; `cstorch.trainer` re-exports the classes.

(Nothing is imported here: `config.py` reads `flat_format` while the runner imports
`config.py`.)"""
