"""The host input pipeline: prefetch threads, data workers, restartable state with
several workers, backend flags, the pre-initial step and the pipeline's counters.

Every test compares against the run without prefetch (or one worker), or a count
that follows from the contract (`prefetch_batches + 1` ahead at most, round robin)."""
import threading
import time
import traceback

import pytest
import torch
import torch.nn as nn

import cstorch
from cstorch._backend import _reset_backend
from cstorch.distributed import ClusterConfig
from cstorch.utils.data import DataExecutor, DataLoader, DistributedSampler

PERF = cstorch.backends.csx.performance


@pytest.fixture(autouse=True)
def default_flags():
    yield
    _reset_backend()  # no run may stay active while the flags are restored
    PERF.prefetch_batches = "auto"
    PERF.progress = "auto"


def _backend(kind, workers=1):
    _reset_backend()
    if kind == "CSX":
        return cstorch.backend("CSX", cluster_config=ClusterConfig(num_workers_per_csx=workers))
    return cstorch.backend(kind)


def _producers():
    return [t for t in threading.enumerate() if t.name.startswith("cstorch-input-")]


def _wait_for(cond, timeout=2.0):
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.002)
    return cond()


class Counting:
    """`n` batches `torch.full((2, 3), i)`; counts how many were pulled."""

    def __init__(self, n=5, delay=0.0, fail_at=None):
        self.n, self.delay, self.fail_at, self.pulled = n, delay, fail_at, 0

    def __len__(self):
        return self.n

    def __iter__(self):
        for i in range(self.n):
            if self.delay:
                time.sleep(self.delay)
            if i == self.fail_at:
                raise ValueError(f"broken sample {i}")
            self.pulled += 1
            yield torch.full((2, 3), float(i))


# -- prefetch keeps the run identical ------------------------------------------------------
def _train(kind, prefetch, steps=12):
    """SGD-momentum on a linear model over a 5-batch loader (restarted twice)."""
    PERF.prefetch_batches = prefetch
    b = _backend(kind)
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    compiled = cstorch.compile(model, b)
    opt = cstorch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    @cstorch.trace
    def step(x):
        loss = (compiled(x) - 1).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.detach()

    g = torch.Generator().manual_seed(1)
    data = [torch.randn(4, 3, generator=g) for _ in range(5)]
    seen, losses = [], []
    for x in DataExecutor(DataLoader(lambda: data), num_steps=steps):
        seen.append(x.clone())
        losses.append(step(x))
    return seen, [float(v) for v in losses], {k: v.detach().clone() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("kind", ["CPU", "CSX"])
def test_prefetch_gives_the_same_batches_and_parameters(kind):
    seen0, losses0, params0 = _train(kind, prefetch=0)
    seen2, losses2, params2 = _train(kind, prefetch=2)
    assert len(seen2) == 12
    assert all(torch.equal(a, b) for a, b in zip(seen0, seen2))
    assert losses0 == losses2
    assert all(torch.equal(params0[k], params2[k]) for k in params0)


def test_stage_batch_is_called_for_each_produced_batch_on_csx_only(monkeypatch):
    staged = []
    for kind, prefetch, expected in [("CSX", 2, 7), ("CSX", 0, 0), ("CPU", 2, 0)]:
        PERF.prefetch_batches = prefetch
        b = _backend(kind)
        monkeypatch.setattr(b.run, "stage_batch", lambda batch: staged.append(threading.current_thread().name))
        list(DataExecutor(DataLoader(Counting), num_steps=7))
        assert len(staged) == expected and all(n.startswith("cstorch-input-worker") for n in staged)  # by the producer
        staged.clear()


# -- the producer runs ahead, bounded -----------------------------------------------------
@pytest.mark.parametrize("prefetch", [0, 1, 3])
def test_the_producer_runs_at_most_prefetch_plus_one_batches_ahead(prefetch):
    PERF.prefetch_batches = prefetch
    _backend("CPU")
    loader = DataLoader(Counting, 20)
    ex = DataExecutor(loader, num_steps=12)
    ahead = []
    for i, _ in enumerate(ex):
        inner = loader.dataloader
        bound = min(prefetch + 1 if prefetch else 0, 12 - (i + 1))  # never past the run's last batch
        reached = _wait_for(lambda: inner.pulled - (i + 1) >= bound, timeout=1.0)
        time.sleep(0.01)  # a producer that overshoots would do so now
        ahead.append(inner.pulled - (i + 1))
        assert reached and ex.pipeline_stats.produced == [inner.pulled]
    assert ahead == [min(prefetch + 1 if prefetch else 0, 12 - (i + 1)) for i in range(12)]
    assert loader.dataloader.pulled == 12  # exactly the batches the run takes


# -- "auto": where the step computes on the host's cores, producers start once the loader is slow
@pytest.mark.parametrize("kind", ["CPU", "CSX"])
def test_auto_prefetch_pulls_a_fast_loader_on_the_main_thread(kind):
    assert PERF.prefetch_batches == "auto"
    _backend(kind, workers=2) if kind == "CSX" else _backend(kind)
    loader = DataLoader(Counting, 40)
    ex = DataExecutor(loader, num_steps=30)
    got = []
    for x in ex:
        got.append(int(x[0, 0]))
        assert not _producers()  # no thread: the pulls are the step thread's
        assert sum(ex.pipeline_stats.produced) == len(got)  # nothing taken ahead
    workers = len(ex.pipeline_stats.produced)
    assert got == [k // workers for k in range(30)]  # round robin, as with prefetch


class OnePullHeldUp(Counting):
    """A fast loader one of whose pulls (the third) takes 5 ms, as when another process
    holds the core (a fresh-clone CI run on the loaded 2-core machine started the
    producers for a fast loader that way)."""

    def __iter__(self):
        for i, batch in enumerate(super().__iter__()):
            if i == 2:
                time.sleep(5e-3)
            yield batch


def test_auto_prefetch_keeps_a_fast_loader_with_one_slow_pull_on_the_main_thread():
    """One 5 ms pull among fast ones is no slow loader: the window's median decides, not
    its mean (5 ms / 4 pulls is over the 0.5 ms threshold)."""
    from cstorch.utils.data.streamer import SLOW_LOADER_S, SLOW_WINDOW

    assert 5e-3 / SLOW_WINDOW > SLOW_LOADER_S
    _backend("CPU")
    loader = DataLoader(OnePullHeldUp, 12)
    got = []
    for x in DataExecutor(loader, num_steps=10):
        got.append(int(x[0, 0]))
        assert not _producers()
    assert got == list(range(10))


@pytest.mark.parametrize("workers", [1, 2])
def test_auto_prefetch_starts_the_producers_once_the_loader_is_slow(workers):
    """A loader that needs 2 ms per batch (over the 0.5 ms threshold) gets its producer
    threads after the first pulls (each worker's first not counted, then 4 timed pulls);
    from then on it runs ahead, and the batches are those of a run without prefetch."""
    from cstorch.utils.data.streamer import SLOW_LOADER_S, SLOW_WINDOW

    assert 2e-3 > SLOW_LOADER_S
    _backend("CSX", workers=workers)
    loader = DataLoader(Counting, 40, 2e-3)
    ex = DataExecutor(loader, num_steps=12)
    got, threads, ahead = [], [], []
    for i, x in enumerate(ex):
        got.append(int(x[0, 0]))
        threads.append(len(_producers()))
        time.sleep(5e-3)  # a producer, once started, pulls ahead meanwhile
        ahead.append(sum(ex.pipeline_stats.produced) - len(got))
    switch = workers + SLOW_WINDOW - 1  # the step whose pull started the producers
    assert threads[:switch] == [0] * switch and threads[switch] == workers
    assert ahead[:switch] == [0] * switch and max(ahead[switch:]) > 0
    assert got == [k // workers for k in range(12)]
    assert not _producers()  # joined at the end
    PERF.prefetch_batches = 0
    _backend("CSX", workers=workers)
    assert [int(x[0, 0]) for x in DataExecutor(DataLoader(Counting, 40), num_steps=12)] == got


def test_auto_prefetch_is_two_batches_from_the_start_off_the_host_cores():
    """On an accelerator (GPU backend, CSX on a gpu platform) "auto" is plain prefetch 2;
    an integer is taken as it is."""
    from types import SimpleNamespace

    from cstorch._backend import BackendType

    ex = DataExecutor.__new__(DataExecutor)
    for kind, platform, plan in [("GPU", "gpu", (2, False)), ("CSX", "gpu", (2, False)), ("CSX", "cpu", (2, True)),
                                 ("CPU", "cpu", (2, True))]:
        ex.backend = SimpleNamespace(backend_type=BackendType(kind), is_csx=kind == "CSX",
                                     run=SimpleNamespace(placement=SimpleNamespace(platform=platform)))
        assert ex._prefetch_plan("auto") == plan
        assert ex._prefetch_plan(3) == (3, False) and ex._prefetch_plan(0) == (0, False)


# -- errors and early exits ----------------------------------------------------------------
@pytest.mark.parametrize("prefetch", [0, 2])
def test_a_loader_error_surfaces_at_the_step_of_its_batch(prefetch):
    PERF.prefetch_batches = prefetch
    _backend("CPU")
    steps = []
    with pytest.raises(ValueError, match="broken sample 3") as info:
        for x in DataExecutor(DataLoader(Counting, 6, 0.0, 3), num_steps=6):
            steps.append(int(x[0, 0]))
    assert steps == [0, 1, 2]
    frames = [f.name for f in traceback.extract_tb(info.value.__traceback__)]
    assert "__iter__" in frames  # the loader's own frame is kept
    if prefetch:
        assert any("global batch 3" in n for n in info.value.__notes__)
    assert not _producers()


@pytest.mark.parametrize("prefetch", [2, "auto", 0])  # producer threads; pulls on the step thread
def test_an_error_in_worker_1_surfaces_at_its_global_step(prefetch):
    PERF.prefetch_batches = prefetch
    _backend("CSX", workers=2)
    calls = []

    def input_fn():
        rank = cstorch.distributed.get_streaming_rank()
        calls.append(rank)
        return Counting(4, 0.0, 2 if rank == 1 else None)  # worker 1's third batch is global batch 5

    steps = []
    with pytest.raises(ValueError, match="broken sample 2") as info:
        for x in DataExecutor(DataLoader(input_fn), num_steps=8):
            steps.append(int(x[0, 0]))
    assert calls == [0, 1] and steps == [0, 0, 1, 1, 2]
    assert any("input worker 1" in n and "global batch 5" in n for n in info.value.__notes__)


@pytest.mark.parametrize("delay", [0.0, 0.05])
def test_break_and_exceptions_stop_the_producers(delay):
    PERF.prefetch_batches = 2
    _backend("CSX", workers=2)
    start = time.monotonic()
    for i, _ in enumerate(DataExecutor(DataLoader(Counting, 1000, delay), num_steps=1000)):
        if i == 3:
            break
    assert not _producers()
    with pytest.raises(KeyError):
        for i, _ in enumerate(DataExecutor(DataLoader(Counting, 1000, delay), num_steps=1000)):
            if i == 3:
                raise KeyError("in the loop body")
    assert not _producers()
    assert time.monotonic() - start < 2.0
    with pytest.raises(RuntimeError, match="Detected that a data executor was not used"):
        cstorch.current_executor()  # both runs ended


def test_an_empty_loader_is_an_error_at_the_first_step():
    _backend("CPU")
    with pytest.raises(RuntimeError, match="did not return any values"):
        for _ in DataExecutor(DataLoader(lambda: []), num_steps=3):
            pass
    assert not _producers()


# -- data workers ---------------------------------------------------------------------------
def _sharded_input_fn(seen_ranks):
    def input_fn(n_samples):
        seen_ranks.append((cstorch.distributed.get_streaming_rank(), cstorch.distributed.num_streamers(),
                           cstorch.distributed.is_streamer()))
        data = torch.utils.data.TensorDataset(torch.arange(n_samples))
        return torch.utils.data.DataLoader(data, batch_sampler=DistributedSampler(data, seed=5, batch_size=4))

    return input_fn


@pytest.mark.parametrize("prefetch", [0, 2])
def test_three_workers_with_distributed_sampler_stream_the_one_worker_sequence(prefetch):
    PERF.prefetch_batches = prefetch
    runs = {}
    for workers in (1, 3):
        _backend("CSX", workers)
        ranks = []
        loader = DataLoader(_sharded_input_fn(ranks), 42)  # 10 batches, 2 samples carried per epoch
        assert len(loader) == 10 and loader.num_workers == workers
        runs[workers] = [b[0].tolist() for b in DataExecutor(loader, num_steps=25)]
        assert ranks == [(w, workers, True) for w in range(workers)]
    assert runs[3] == runs[1]
    stream = [i for e in range(3) for i in torch.randperm(42, generator=torch.Generator().manual_seed(5 + e))]
    assert runs[1] == [stream[4 * k:4 * k + 4] for k in range(25)]  # the sampler's closed form


def test_num_steps_defaults_to_the_sum_of_the_worker_lengths():
    _backend("CSX", workers=3)
    loader = DataLoader(lambda: Counting(4))  # each worker streams all of its 4 batches
    ex = DataExecutor(loader, num_steps=None)
    assert len(loader) == 12 and len(ex) == 12
    assert [int(x[0, 0]) for x in ex] == [k // 3 for k in range(12)]  # round robin over identical workers
    assert [int(x[0, 0]) for x in loader] == [k // 3 for k in range(12)]  # direct iteration: one pass
    assert ex.pipeline_stats.produced == [4, 4, 4]


def test_streaming_context_outside_and_inside_a_worker():
    d = cstorch.distributed
    assert (d.num_streamers(), d.get_streaming_rank(), d.is_streamer(), d.get_ordinal(), d.num_tasks()) == \
        (1, 0, False, 0, 1)
    assert d.get_streaming_batch_size(32) == 32 and d.get_streaming_batch_size(32, global_rank=1) == 32
    with pytest.raises(ValueError, match="positive integer"):
        d.get_streaming_batch_size(0)
    _backend("CSX", workers=0)  # 0 counts as one worker
    seen = []
    loader = DataLoader(lambda: seen.append((d.get_ordinal(), d.num_tasks())) or [torch.ones(1)])
    assert loader.num_workers == 1 and seen == [(0, 1)]


# -- restartable state with two workers ----------------------------------------------------
class Interleaved:
    """Worker w of W streams the global batches start + w, start + w + W, ... (as a
    sharded sampler does, a run's global batch k comes from worker k % W). Worker
    state: the run's start and the batches of this worker consumed; aggregated: the
    global position, which every worker of the next run starts from."""

    def __init__(self):
        self.rank, self.workers = cstorch.distributed.get_streaming_rank(), cstorch.distributed.num_streamers()
        self.start, self.states_seen = 0, []

    def __iter__(self):
        k = self.start + self.rank
        while True:
            yield torch.full((2,), float(k))
            k += self.workers

    def state_dict(self):
        w = cstorch.distributed.get_worker_state()
        self.states_seen.append(w)
        assert w.local_worker_id == self.rank == cstorch.distributed.get_streaming_rank()
        return {"start": self.start, "consumed": w.worker_step}

    def aggregate_state_dict(self, worker_states):
        return {"next": worker_states[0]["start"] + sum(s["consumed"] for s in worker_states)}

    def deaggregate_state_dict(self, state, strict=True):
        w = cstorch.distributed.get_worker_state()
        assert (w.local_worker_id, w.num_workers_per_csx) == (self.rank, self.workers)
        return {"start": state["next"]}

    def load_state_dict(self, state, strict=True):
        self.start = state["start"]


def test_restartable_state_with_two_workers_round_trips():
    _backend("CSX", workers=2)
    loader = DataLoader(Interleaved)
    states = []

    @cstorch.checkpoint_closure
    def save():
        states.append(loader.state_dict())

    whole = []
    for x in DataExecutor(loader, num_steps=9, checkpoint_steps=4):
        whole.append(int(x[0]))
        save()
    assert whole == list(range(9))
    assert states == [{"next": 4}, {"next": 8}, {"next": 9}]  # consumed, not prefetched
    last = [w.states_seen[-1] for w in loader.workers]
    assert [(s.worker_step, s.appliance_step, s.num_workers_per_csx) for s in last] == [(5, 9, 2), (4, 9, 2)]
    assert [s.samples_streamed for s in last] == [10, 8]

    for k, state in ((4, states[0]), (7, {"next": 7})):  # resume on an even and an odd position
        _backend("CSX", workers=2)
        resumed = DataLoader(Interleaved)
        resumed.load_state_dict(state)
        assert [int(x[0]) for x in DataExecutor(resumed, num_steps=9 - k)] == whole[k:]


# -- flags ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, value", [
    ("prefetch_batches", -1), ("prefetch_batches", 1.5), ("prefetch_batches", "2"), ("prefetch_batches", True),
    ("progress", "yes"), ("progress", 1), ("progress", None),
])
def test_bad_flag_values_are_refused(name, value):
    with pytest.raises(ValueError, match=rf"cstorch.backends.csx.performance.{name} must be"):
        setattr(PERF, name, value)
    assert (PERF.prefetch_batches, PERF.progress) == ("auto", "auto")


def test_unknown_flags_and_groups_are_refused():
    with pytest.raises(AttributeError, match="has no flag 'prefetch'"):
        PERF.prefetch = 3
    with pytest.raises(AttributeError, match="is a group of flags"):
        cstorch.backends.csx.performance = None


def test_changing_a_flag_during_a_run_is_refused():
    _backend("CPU")
    ex = DataExecutor(DataLoader(Counting), num_steps=3)
    it = iter(ex)
    with pytest.raises(RuntimeError, match="Detected changes in the backend flags during the execution run"):
        PERF.prefetch_batches = 0
    PERF.prefetch_batches = "auto"  # the same value is no change
    for _ in it:
        with pytest.raises(RuntimeError, match="Detected changes in the backend flags"):
            PERF.progress = False
    PERF.prefetch_batches = 0  # after the run
    assert PERF.prefetch_batches == 0


# -- pre-initial step, stats, progress -----------------------------------------------------
def test_iter_starts_the_run_at_the_pre_initial_step():
    _backend("CPU")
    ex = DataExecutor(DataLoader(Counting), num_steps=3)
    it = iter(ex)
    assert ex.iteration == -1 and ex.is_pre_initial_step and cstorch.current_executor() is ex
    assert int(next(it)[0, 0]) == 0 and ex.iteration == 0
    assert [int(x[0, 0]) for x in it] == [1, 2]
    with pytest.raises(RuntimeError, match="data executor was not used"):
        cstorch.current_executor()
    it = iter(DataExecutor(DataLoader(Counting), num_steps=3))
    del it  # never stepped: the run still ends
    with pytest.raises(RuntimeError, match="data executor was not used"):
        cstorch.current_executor()
    assert not _producers()


@pytest.mark.parametrize("prefetch", [0, 2])
def test_pipeline_stats_counts(prefetch):
    PERF.prefetch_batches = prefetch
    _backend("CSX", workers=2)
    delay, steps = 0.01, 7
    ex = DataExecutor(DataLoader(Counting, 10, delay), num_steps=steps)
    for i, _ in enumerate(ex):
        assert ex.pipeline_stats.steps == i
    s = ex.pipeline_stats
    assert s.steps == s.num_steps == steps and s.produced == [4, 3] and s.queued == [0, 0]
    assert s.queue_capacity == prefetch
    assert all(t >= n * delay for t, n in zip(s.loader_s, s.produced))
    assert s.elapsed_s >= s.input_wait_s >= (steps * delay if prefetch == 0 else 0.0)
    assert s.steps_per_s == pytest.approx(steps / s.elapsed_s) and 0 <= s.input_wait_share <= 1
    assert s.summary().endswith(f"queue 0/{2 * prefetch}")


@pytest.mark.parametrize("mode, shown", [(True, True), (False, False), ("auto", False)])
def test_progress_bar(mode, shown, capsys):
    PERF.progress = mode
    _backend("CPU")
    for _ in DataExecutor(DataLoader(Counting), num_steps=5):
        pass
    err = capsys.readouterr().err
    assert ("cstorch run" in err and "5/5" in err and "input wait" in err and "queue" in err) == shown
    assert shown or err == ""  # "auto": pytest's stderr is not a terminal
