"""The child process of test_run_interrupts.py: a CSX training loop (linear regression,
SGD with momentum, a checkpoint closure every few steps) that the test interrupts.

    python interrupt_training_script.py <checkpoint dir> <backend> [<checkpoint every N steps, 0: none>]

prints "ready" once the step is compiled, then reads commands from stdin:

    run         -> "running", then trains until a signal stops it. After Ctrl-C it prints
                   "interrupted <steps> <match>": which count of steps the host parameters
                   and momentum equal, as eager torch computes them from the initial
                   values ("n" or "n+1", n the steps counted by the loop: the interrupt
                   may land between a step's return and the count; "none": lost or
                   corrupted state), and the steps done so far in all runs; then waits
                   for the next command. SIGTERM ends the process (the test checks its
                   exit status).
    resume      -> trains 3 more steps in a new run and prints "resumed <match>".
"""
from __future__ import annotations

import faulthandler
import os
import signal
import sys

import torch

import cstorch

LR, MOMENTUM = 0.01, 0.9


def batches():
    g = torch.Generator().manual_seed(1)
    w = torch.randn(16, 4, generator=g)
    out = []
    for _ in range(8):
        x = torch.randn(64, 16, generator=g)
        out.append((x, x @ w + 0.1 * torch.randn(64, 4, generator=g)))
    return out


def eager(initial: dict, data, steps: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(weight, momentum buffer) after `steps` steps of the same training in eager torch."""
    w = initial["weight"].clone().requires_grad_()
    buf = torch.zeros_like(w)
    for i in range(steps):
        x, y = data[i % len(data)]
        (g,) = torch.autograd.grad(((x @ w.T - y) ** 2).mean(), [w])
        with torch.no_grad():
            buf = MOMENTUM * buf + g
            w -= LR * buf
    return w.detach(), buf


def main() -> None:
    faulthandler.register(signal.SIGUSR1)  # the test asks for the stacks when the child goes quiet
    directory, backend_type = sys.argv[1], sys.argv[2]
    save_every = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 4, bias=False)
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    data = batches()
    backend = cstorch.backend(backend_type)
    cstorch.backends.csx.performance.progress = False
    compiled = cstorch.compile(model, backend)
    opt = cstorch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    done = [0]

    @cstorch.trace
    def step(x, y):
        loss = ((compiled(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    @cstorch.checkpoint_closure
    def save(k):
        cstorch.save({"model": model.state_dict(), "optimizer": opt.state_dict()},
                     os.path.join(directory, f"ckpt_{k}.mdl"))

    def train(num_steps, on_first=None):
        loader = cstorch.utils.data.DataLoader(lambda: [data[(done[0] + j) % len(data)] for j in range(len(data))])
        executor = cstorch.utils.data.DataExecutor(loader, num_steps=num_steps, checkpoint_steps=save_every or None)
        for x, y in executor:
            step(x, y)
            done[0] += 1
            if save_every:
                save(done[0])
            if on_first is not None:
                on_first()
                on_first = None

    def match() -> str:
        weight = model.weight.detach()
        buf = opt.state[model.weight]["momentum_buffer"].detach()
        for name, n in (("n", done[0]), ("n+1", done[0] + 1)):
            w, b = eager(initial, data, n)
            if torch.allclose(weight, w, rtol=1e-4, atol=1e-5) and torch.allclose(buf, b, rtol=1e-4, atol=1e-5):
                return name
        return "none"

    train(1)
    print("ready", flush=True)
    for line in sys.stdin:
        command = line.strip()
        if command == "run":
            try:
                train(10**6, on_first=lambda: print("running", flush=True))
            except KeyboardInterrupt:
                found = match()
                done[0] += found == "n+1"  # the step ran: the next run starts at the next batch
                print("interrupted", done[0], found, flush=True)
        elif command == "resume":
            train(3)
            print("resumed", match(), flush=True)


if __name__ == "__main__":
    main()
