"""A callback for the resume test: SIGKILL this process right after the checkpoint of
global step $CSTORCH_TEST_KILL_AT_STEP is written (a no-op when the variable is unset)."""
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
