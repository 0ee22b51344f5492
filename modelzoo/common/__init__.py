"""`modelzoo.common` of Model Zoo 1.8: see `modelzoo.common.pytorch`."""
