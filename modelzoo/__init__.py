"""`modelzoo`: the Model Zoo 1.8 module paths that custom runners import, served by
`cstorch` (the runner classes of `cstorch.trainer.legacy.runner`, `.device_runners` and `.base_model`).
Only the runner API is here, not the Model Zoo's models."""
