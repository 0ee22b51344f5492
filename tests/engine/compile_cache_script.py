"""A small training script for tests/engine/test_compile_cache.py, run as its own process:
GPT-style decoder with dropout (`--model gpt`) or a tiny MLP (`--model mlp`), AdamW with a
cosine schedule, a step closure reading the loss; `--decomp cube` registers a
`cstorch.register_decomposition` of aten.gelu first. Prints one JSON line: the losses, a
digest of the final parameters, whether the compiled step came from the compile cache,
and how many times the step's Python body ran."""
import argparse
import hashlib
import json

import torch

import cstorch
from benchmarks.models import GPT

p = argparse.ArgumentParser()
p.add_argument("--model", choices=["gpt", "mlp"], default="gpt")
p.add_argument("--decomp", choices=["none", "cube"], default="none")
p.add_argument("--dropout", type=float, default=0.1)
p.add_argument("--batch", type=int, default=4)
p.add_argument("--steps", type=int, default=4)
args = p.parse_args()

if args.decomp == "cube":
    @cstorch.register_decomposition(torch.ops.aten.gelu.default)
    def cubic_gelu(x, approximate="none"):
        return x * x * x


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Embedding(64, 16), torch.nn.GELU(), torch.nn.Linear(16, 64))

    def forward(self, x, y):
        return torch.nn.functional.cross_entropy(self.net(x).flatten(0, 1), y.flatten())


torch.manual_seed(0)
if args.model == "gpt":
    model = GPT(vocab=64, seq=16, d_model=32, n_heads=2, n_layers=2, dropout=args.dropout)
else:
    model = MLP()
backend = cstorch.backend("CSX")
cstorch.backends.csx.performance.progress = False
compiled = cstorch.compile(model, backend)
opt = cstorch.optim.AdamW(model.parameters(), lr=1e-2)
sched = cstorch.optim.lr_scheduler.CosineDecayLR(opt, initial_learning_rate=1e-2, end_learning_rate=1e-3,
                                                 total_iters=args.steps)
losses = []
body_runs = []


@cstorch.step_closure
def record(loss):
    losses.append(loss.item())


@cstorch.trace
def train_step(x, y):
    body_runs.append(1)
    loss = compiled(x, y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    sched.step()
    record(loss)
    return loss


g = torch.Generator().manual_seed(1)
batches = [(torch.randint(0, 64, (args.batch, 16), generator=g), torch.randint(0, 64, (args.batch, 16), generator=g))
           for _ in range(args.steps)]
loader = cstorch.utils.data.DataLoader(lambda: batches)
for x, y in cstorch.utils.data.DataExecutor(loader, num_steps=args.steps):
    train_step(x, y)
digest = hashlib.sha256()
for k, v in sorted(model.state_dict().items()):
    digest.update(k.encode())
    digest.update(v.detach().numpy().tobytes())
ex = train_step.executable
report = train_step.report  # a loaded program is completed for its views (the body does not run again)
assert report.num_ops > 0 and report.cost.flops > 0
print(json.dumps({"losses": losses, "params": digest.hexdigest(), "from_cache": ex.from_cache,
                  "body_runs": len(body_runs),
                  "compile_seconds": train_step.program.trace_seconds + ex.lower_seconds + ex.compile_seconds}))
