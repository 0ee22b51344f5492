"""The implementations the benchmark suite compares, and how a round runs them.

Each implementation (`Impl`) trains one workload (`benchmarks.workloads`) from the same
initial weights on the same batches; `step()` runs one training step. A synced one
returns the step's loss as a float, so every step ends on the host and is timed alone
(`run_steps`); a pipelined one (`Impl.pipelined`) leaves its losses on the device or to a
step closure until the block ends, and the block is timed from its start to its last loss
on the host (`run_block`). An exception inside a block is recorded as the
implementation's error text and the suite carries on with the others.
"""
from __future__ import annotations

import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
import torch

import cstorch
from cstorch_jax.xla_options import compiler_options

from .steps import cstorch_train_step
from .workloads import Workload

def error_text(e: BaseException) -> str:
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    first = lines[0] if lines else ""
    text = f"{type(e).__name__}: {first}" if first else type(e).__name__
    return text if len(text) <= 300 else text[:297] + "..."


# --------------------------------------------------------------------------------------
# The implementations. Each runs one training step per `step()` call and returns the loss
# of that step as a Python float (so every step ends in a sync with the host), except the
# pipelined ones (`Impl.pipelined`).
# --------------------------------------------------------------------------------------
class Impl:
    key = ""
    #: False: `step()` returns the step's loss as a float (every step syncs with the host) and
    #: each step is timed; True: `step()` leaves the loss on the device or to a closure,
    #: `take_losses()` returns the block's losses after `end()`, and a block is timed whole
    #: (from `begin` to its last loss on the host) and counted as its mean per step
    pipelined = False

    def __init__(self, wl: Workload, model: torch.nn.Module):
        self.wl = wl
        self.model = model
        self.i = 0  # steps taken
        self.times: list[float] = []  # seconds per timed step
        self.losses: list[float] = []  # every step's loss, warm-up included
        self.error: str | None = None
        self.warmup_s = 0.0  # wall time of the warm-up steps
        self.first_step_s = float("nan")
        self.compile_s: float | None = None  # trace + compile seconds
        self.compile_note = ""

    def _batch(self):
        b = self.wl.batches[self.i % len(self.wl.batches)]
        self.i += 1
        return b

    def setup(self, total_steps: int) -> None:  # pragma: no cover - overridden
        pass

    def begin(self, n: int) -> None:
        """Before a block of `n` consecutive steps (warm-up or timed)."""

    def end(self) -> None:
        """After the block."""

    def step(self) -> float:  # pragma: no cover - overridden
        raise NotImplementedError

    def after_warmup(self) -> None:
        pass

    def before_rounds(self, steps_per_round: int) -> None:
        """After the warm-up: prepare what blocks of `steps_per_round` steps need beyond it."""

    def finish(self) -> None:
        pass

    def take_losses(self) -> list[float]:  # pragma: no cover - overridden where pipelined
        raise NotImplementedError

    def parameters(self) -> dict:
        """{name: float64 numpy array} of the parameters after the last step."""
        return {n: p.detach().double().numpy() for n, p in self.model.named_parameters()}

    @property
    def median_s(self) -> float:
        return statistics.median(self.times) if self.times else float("nan")


class EagerTorch(Impl):
    key = "eager"

    def setup(self, total_steps):
        self.opt = self.wl.optimizer.torch(self.model.parameters())

    def step(self):
        batch = self._batch()
        self.opt.zero_grad(set_to_none=True)
        loss = self.wl.torch_loss(self.model, *batch)
        loss.backward()
        self.opt.step()
        return loss.item()


class TorchCompile(Impl):
    """torch.compile compiles lazily inside the first calls: its trace + compile time is
    the warm-up wall time minus warm-up steps x the steady-state median ("lazy")."""
    key = "torch.compile"

    def setup(self, total_steps):
        self.opt = self.wl.optimizer.torch(self.model.parameters())
        model, loss_fn, opt = self.model, self.wl.torch_loss, self.opt
        self.loss = torch.compile(lambda *batch: loss_fn(model, *batch))

        @torch.compile
        def opt_step():
            opt.step()

        self.opt_step = opt_step
        self.compile_note = "lazy"

    def step(self):
        batch = self._batch()
        self.opt.zero_grad(set_to_none=True)
        loss = self.loss(*batch)
        loss.backward()
        self.opt_step()
        return loss.item()


class CstorchCSX(Impl):
    key = "cstorch"

    def __init__(self, wl, model, backend):
        super().__init__(wl, model)
        self.backend = backend
        self.executor = None

    def setup(self, total_steps):
        compiled = cstorch.compile(self.model, self.backend)
        optimizer = self.wl.optimizer.cstorch(self.model.parameters())
        self.train_step = cstorch_train_step(compiled, optimizer, self.wl.torch_loss)

    def begin(self, n):
        """Each block is a run of its own (a `DataExecutor` of `n` steps on the batches that
        come next), as a program that trains only with cstorch runs: between two steps of a
        run cstorch's host guard (`cstorch.run.host_edits.SyncOnTouch`, a torch dispatch mode)
        sees every torch op of the thread, and it would see the other implementations'
        blocks if they ran inside the run. The step program is compiled once (the first
        block); a run uploads the state at its first step and brings it back at its end
        (the first step of each block is the slower one; medians are unaffected)."""
        batches, start = self.wl.batches, self.i
        chunk = [batches[(start + j) % len(batches)] for j in range(n)]
        loader = cstorch.utils.data.DataLoader(lambda: chunk)
        self.executor = iter(cstorch.utils.data.DataExecutor(loader, num_steps=n))

    def end(self):
        self.finish()

    def step(self):
        batch = next(self.executor)  # the previous step's bookkeeping and this step's batch
        self.i += 1
        loss = self.train_step(*batch)
        return float(loss)

    def after_warmup(self):
        prog = self.train_step.program
        self.compile_s = prog.trace_seconds + prog.executable.lower_seconds + prog.executable.compile_seconds

    def finish(self):
        if self.executor is not None:
            for _ in self.executor:  # ends the run
                raise AssertionError("the executor ran more steps than asked")
            self.executor = None


class CstorchPipelined(CstorchCSX):
    """As `CstorchCSX`, but the loss is read as the documentation's loop reads it: in a step
    closure, which runs once the step's values exist while the device runs ahead."""
    key = "cstorch pipelined"
    pipelined = True

    def setup(self, total_steps):
        super().setup(total_steps)
        self.pending: list[float] = []

        @cstorch.step_closure
        def record(loss):
            self.pending.append(float(loss))

        self.record = record

    def step(self):
        batch = next(self.executor)
        self.i += 1
        self.record(self.train_step(*batch))

    def take_losses(self):
        losses, self.pending = self.pending, []
        return losses

    def before_rounds(self, steps_per_round):
        """Compile the launch counts a block uses (K, and the block's tail) now, as the
        hand-written scan compiles its K steps in its setup; the compile time counts in
        trace + compile."""
        prog, k = self.train_step.program, cstorch.backends.csx.performance.steps_per_launch
        for count in {min(k, steps_per_round), steps_per_round % k}:
            self.compile_s += prog.prepare_steps(count)


class JaxJit(Impl):
    """Lowered and compiled ahead of time (timed), then the compiled step is called. It gets
    the same process (memory policy) and the same XLA options as cstorch's step, so the two
    differ only in how the program was written."""
    key = "jax.jit"

    def setup(self, total_steps):
        names = [n for n, _ in self.model.named_parameters()]
        params = [jnp.asarray(p.detach().numpy().copy()) for p in self.model.parameters()]
        tx = self.wl.optimizer.optax()
        jax_loss = self.wl.jax_loss

        def train_step(params, opt_state, batch):
            loss, grads = jax.value_and_grad(lambda ps: jax_loss(dict(zip(names, ps)), *batch))(params)
            updates, opt_state = tx.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state, loss

        self.np_batches = [tuple(t.numpy().astype(np.int32) if t.dtype == torch.int64 else t.numpy() for t in b)
                           for b in self.wl.batches]
        self.params, self.opt_state = params, tx.init(params)
        t0 = time.perf_counter()
        lowered = jax.jit(train_step, donate_argnums=(0, 1)).trace(self.params, self.opt_state,
                                                                   self.np_batches[0]).lower()
        self.compiled = lowered.compile(compiler_options=compiler_options(jax.devices()[0].platform))
        self.compile_s = time.perf_counter() - t0

    def step(self):
        batch = self.np_batches[self.i % len(self.np_batches)]
        self.i += 1
        self.params, self.opt_state, loss = self.compiled(self.params, self.opt_state, batch)
        return float(loss)

    def parameters(self):
        names = [n for n, _ in self.model.named_parameters()]
        return {n: np.asarray(p, dtype=np.float64) for n, p in zip(names, self.params)}


class JaxJitPipelined(JaxJit):
    """As `JaxJit`, but the losses stay on the device (jax dispatches asynchronously) until
    the end of the block."""
    key = "jax.jit pipelined"
    pipelined = True

    def begin(self, n):
        self.pending = []

    def step(self):
        batch = self.np_batches[self.i % len(self.np_batches)]
        self.i += 1
        self.params, self.opt_state, loss = self.compiled(self.params, self.opt_state, batch)
        self.pending.append(loss)

    def take_losses(self):
        return [float(loss) for loss in self.pending]


class JaxScanPipelined(JaxJit):
    """As `JaxJitPipelined`, but K steps run as one call: a `lax.scan` of the hand-written
    step over K batches stacked on the host, the parameters and optimizer state carried
    (donated), the K losses stacked; a block's last steps, fewer than K, run the one-step
    program. K is cstorch's `steps_per_launch`, so the two launch alike."""
    key = "jax.scan pipelined"
    pipelined = True

    def setup(self, total_steps):
        super().setup(total_steps)
        self.k = cstorch.backends.csx.performance.steps_per_launch
        names = [n for n, _ in self.model.named_parameters()]
        tx = self.wl.optimizer.optax()
        jax_loss = self.wl.jax_loss

        def steps(params, opt_state, batches):
            def body(carry, batch):
                params, opt_state = carry
                loss, grads = jax.value_and_grad(lambda ps: jax_loss(dict(zip(names, ps)), *batch))(params)
                updates, opt_state = tx.update(grads, opt_state, params)
                return (optax.apply_updates(params, updates), opt_state), loss

            (params, opt_state), losses = jax.lax.scan(body, (params, opt_state), batches)
            return params, opt_state, losses

        stacked = self._stacked(self.np_batches[:1] * self.k)
        t0 = time.perf_counter()
        lowered = jax.jit(steps, donate_argnums=(0, 1)).trace(self.params, self.opt_state, stacked).lower()
        self.compiled_k = lowered.compile(compiler_options=compiler_options(jax.devices()[0].platform))
        self.compile_s += time.perf_counter() - t0

    @staticmethod
    def _stacked(batches):
        return tuple(np.stack(parts) for parts in zip(*batches))

    def begin(self, n):
        self.pending, self.waiting = [], []

    def step(self):
        self.waiting.append(self.np_batches[self.i % len(self.np_batches)])
        self.i += 1
        if len(self.waiting) == self.k:
            self.params, self.opt_state, losses = self.compiled_k(self.params, self.opt_state,
                                                                  self._stacked(self.waiting))
            self.pending.append(losses)
            self.waiting = []

    def end(self):
        for batch in self.waiting:  # the block's tail: one step per call
            self.params, self.opt_state, loss = self.compiled(self.params, self.opt_state, batch)
            self.pending.append(loss[None])
        self.waiting = []

    def take_losses(self):
        return [float(v) for losses in self.pending for v in np.asarray(losses)]


# --------------------------------------------------------------------------------------
# Measurements around the steps: the matmul peak and other processes' CPU use.
# --------------------------------------------------------------------------------------
def run_steps(impl: Impl, n: int, timed: bool) -> None:
    if impl.error is not None or n < 1:
        return
    if impl.pipelined:
        run_block(impl, n, timed)
        return
    try:
        impl.begin(n)
        for _ in range(n):
            start = time.perf_counter()
            loss = impl.step()
            elapsed = time.perf_counter() - start
            if timed:
                impl.times.append(elapsed)
            impl.losses.append(loss)
        impl.end()
    except Exception as e:  # recorded in the table; the other implementations carry on
        impl.error = error_text(e)


def run_block(impl: Impl, n: int, timed: bool) -> None:
    try:
        start = time.perf_counter()
        impl.begin(n)
        for _ in range(n):
            impl.step()
        impl.end()
        losses = impl.take_losses()
        elapsed = time.perf_counter() - start
        if len(losses) != n:
            raise AssertionError(f"{len(losses)} losses came back from a block of {n} steps")
        if timed:
            impl.times.append(elapsed / n)
        impl.losses.extend(losses)
    except Exception as e:  # recorded in the table; the other implementations carry on
        impl.error = error_text(e)
