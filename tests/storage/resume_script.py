"""A training run that checkpoints everything a resume needs, as a user would write it.

    python resume_script.py --dir D --steps N --every K [--resume CKPT] [--kill-after STEP]

Trains an MLP with dropout (RNG), Adam, a cosine LR schedule and a dynamic GradScaler
on a restartable loader, on the CSX backend. Every step's loss goes to D/losses.txt as
`<global step> <float hex>`, checkpoints to D/ckpt_<global step>.mdl and the final
state (model, optimizer, scheduler, scaler) to D/final.pt. `--kill-after S` sends
SIGKILL to this process right after the checkpoint of global step S is written;
`--forget rng,dataloader` resumes without restoring those parts (the negative
controls of the resume test).
"""
from __future__ import annotations

import argparse
import os
import signal

import torch

import cstorch

N_SAMPLES, BATCH, FEATURES, CLASSES = 96, 8, 12, 5


class RestartableBatches:
    """Fixed batches of generated data, shuffled per epoch with a seeded generator;
    its position is the number of batches consumed, which it reads from the runtime."""

    def __init__(self):
        g = torch.Generator().manual_seed(1234)
        self.x = torch.randn(N_SAMPLES, FEATURES, generator=g)
        self.y = torch.randint(0, CLASSES, (N_SAMPLES,), generator=g)
        self.per_epoch = N_SAMPLES // BATCH
        self.start = 0  # batches consumed before this run

    def _order(self, epoch: int) -> torch.Tensor:
        return torch.randperm(N_SAMPLES, generator=torch.Generator().manual_seed(epoch))

    def __iter__(self):
        position = self.start
        while True:
            epoch, i = divmod(position, self.per_epoch)
            idx = self._order(epoch)[i * BATCH:(i + 1) * BATCH]
            yield self.x[idx], self.y[idx]
            position += 1

    def state_dict(self):
        return {"batches_consumed": self.start + cstorch.distributed.get_worker_state().worker_step}

    def load_state_dict(self, state_dict):
        self.start = state_dict["batches_consumed"]

    def aggregate_state_dict(self, worker_states):
        return worker_states[0]

    def deaggregate_state_dict(self, aggregated_state_dict):
        return aggregated_state_dict


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--every", type=int, required=True)
    p.add_argument("--resume")
    p.add_argument("--kill-after", type=int)
    p.add_argument("--forget", default="", help="comma-separated parts of the checkpoint not to restore")
    args = p.parse_args()
    forget = set(filter(None, args.forget.split(",")))

    torch.manual_seed(0)
    backend = cstorch.backend("CSX")
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, 32), torch.nn.ReLU(), torch.nn.Dropout(0.3),
                                torch.nn.Linear(32, CLASSES))
    compiled = cstorch.compile(model, backend)
    opt = cstorch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=1e-3)
    sched = cstorch.optim.lr_scheduler.CosineDecayLR(opt, initial_learning_rate=1e-2, end_learning_rate=1e-4,
                                                     total_iters=args.steps)
    scaler = cstorch.amp.GradScaler(loss_scale="dynamic", init_scale=2.0 ** 4, steps_per_increase=3)
    loader = cstorch.utils.data.DataLoader(RestartableBatches)

    start = 0
    if args.resume:
        state = cstorch.load(args.resume)
        restore = {"model": model.load_state_dict, "optimizer": opt.load_state_dict,
                   "scheduler": sched.load_state_dict, "grad_scaler": scaler.load_state_dict,
                   "dataloader": loader.load_state_dict, "rng": cstorch.set_rng_state}
        for part, load in restore.items():
            if part not in forget:
                load(state[part])
        start = state["global_step"]

    @cstorch.trace
    def train_step(x, y):
        loss = torch.nn.functional.cross_entropy(compiled(x), y)
        cstorch.amp.optimizer_step(loss, opt, scaler)
        sched.step()
        return loss

    losses = open(os.path.join(args.dir, "losses.txt"), "a", buffering=1)

    @cstorch.step_closure
    def record(loss, step):
        losses.write(f"{step} {float(loss).hex()}\n")

    @cstorch.checkpoint_closure
    def checkpoint():
        step = start + executor.iteration + 1
        path = os.path.join(args.dir, f"ckpt_{step}.mdl")
        cstorch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                      "grad_scaler": scaler.state_dict(), "rng": cstorch.get_rng_state(),
                      "dataloader": loader.state_dict(), "global_step": step}, path)
        if step == args.kill_after:
            os.kill(os.getpid(), signal.SIGKILL)

    executor = cstorch.utils.data.DataExecutor(loader, num_steps=args.steps - start, checkpoint_steps=args.every)
    for x, y in executor:
        record(train_step(x, y), start + executor.iteration)
        checkpoint()
    final = {"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
             "grad_scaler": scaler.state_dict()}
    torch.save(final, os.path.join(args.dir, "final.pt"))


if __name__ == "__main__":
    main()
