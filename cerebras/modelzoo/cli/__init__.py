"""`cerebras.modelzoo.cli`: the `cszoo` command (`python -m cerebras.modelzoo.cli.main`)."""
