"""Callbacks for the CLI resume test (test_resume_cli.py), driven by environment variables:

- `KillAfterCheckpoint`: SIGKILL this process right after the checkpoint of global step
  $CSTORCH_TEST_KILL_AT_STEP is written (a no-op when the variable is unset);
- `ForgetOnLoad`: the negative controls: when a checkpoint is loaded, drop the part
  $CSTORCH_TEST_FORGET names before the Trainer restores it — `rng` (the RNG state is
  not restored) or `stream` (the train stream restarts at its first batch) — a no-op
  when the variable is unset."""
import os
import signal

from cstorch.trainer import Callback


class KillAfterCheckpoint(Callback):
    def on_save_checkpoint(self, trainer, state_dict):
        self.step = state_dict["global_step"]

    def on_after_save_checkpoint(self, trainer, ckpt_path):
        step = os.environ.get("CSTORCH_TEST_KILL_AT_STEP")
        if step is not None and self.step == int(step):
            os.kill(os.getpid(), signal.SIGKILL)


class ForgetOnLoad(Callback):
    def preprocess_checkpoint(self, trainer, state_dict):
        part = os.environ.get("CSTORCH_TEST_FORGET")
        if part == "rng":
            del state_dict["rng"]
        elif part == "stream":
            state_dict["dataloader"] = {"batches_consumed": 0}
        elif part is not None:
            raise ValueError(f"CSTORCH_TEST_FORGET={part!r}: expected rng or stream")
