"""`cerebras.modelzoo.common`: the helpers Model Zoo model and data code imports
(`input_utils`, `pytorch_utils`, `run_utils`, `registry`)."""
