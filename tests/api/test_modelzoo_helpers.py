"""Behaviour of the `cerebras.pytorch` names the real Model Zoo uses beyond the public API
(see test_modelzoo_names.py for their existence and signatures): the `backend` module
beside the `backend` function, the parameter filters, `call_once`, the task view of
`cstorch.distributed`, and the wafer-only annotations and hooks, which must leave what
is computed unchanged."""
import fnmatch
import importlib
import inspect
import sys
import threading
import typing
from dataclasses import dataclass, fields
from typing import Any, Optional

import pytest
import torch

import cstorch
from cstorch.distributed.cluster_config import ClusterConfig
from cstorch.distributed.streaming import streaming_worker
from cstorch.unsupported import UnsupportedAPIError


# -- cerebras.pytorch.backend: a function and a module --------------------------------------

def test_backend_is_the_function_and_the_module_is_importable():
    from cerebras.pytorch.backend import Backend, BackendType, current_backend_impl, get_backend_args, use_cs
    import cerebras.pytorch.backend.ltc_backend  # noqa: F401 (under the alias, a second import of the module)
    from cerebras.pytorch.backend.ltc_backend import register_after_tensor_to_cpu  # noqa: F401

    import cerebras.pytorch

    for package in (cstorch, cerebras.pytorch):
        assert package.backend is cstorch._backend.backend  # still the function, after the module's imports
    assert sys.modules["cstorch.backend"].use_cs is use_cs is cstorch.use_cs
    assert Backend is cstorch.Backend and BackendType is cstorch.BackendType
    assert BackendType.from_str("csx") is BackendType.CSX and BackendType.from_str("XLA") is BackendType.CSX
    with pytest.raises(ValueError, match="Invalid Cerebras PyTorch backend type"):
        BackendType.from_str("tpu")

    assert not use_cs()
    with pytest.raises(RuntimeError, match="No active Cerebras backend"):
        current_backend_impl()
    assert current_backend_impl(raise_exception=False) is None
    b = cstorch.backend("CPU")  # the function works as before
    assert current_backend_impl() is b and current_backend_impl(False) is b and cstorch.backend() is b


@pytest.mark.parametrize("backend_type, names", [
    ("CSX", ["artifact_dir", "compile_dir", "compile_only", "validate_only", "cluster_config"]),
    ("cpu", ["artifact_dir"]),
    ("GPU", ["artifact_dir", "enable_distributed", "main_process_id", "dist_backend", "init_method",
             "sync_batchnorm"]),
])
def test_get_backend_args_lists_the_arguments_the_backend_takes(backend_type, names):
    from cerebras.pytorch.backend import get_backend_args

    params = get_backend_args(backend_type)
    assert list(params) == ["self", "backend_type", *names]  # the real constructor's order
    if backend_type == "GPU":
        return  # needs CUDA
    # the Model Zoo's pattern: keep the configured arguments the backend takes, then create it
    configured = {"artifact_dir": None, "compile_only": False, "not_an_argument": 1}
    args = {n: configured[n] for n in params if n not in ("self", "backend_type") and n in configured}
    b = cstorch.backend(backend_type, **args)
    assert b.backend_type is cstorch.BackendType.from_str(backend_type)
    with pytest.raises(ValueError):
        get_backend_args("TPU")


def test_tensor_to_cpu_hooks_register_in_order_and_remove():
    from cstorch.backend import ltc_backend

    seen = []
    first = ltc_backend.register_after_tensor_to_cpu(lambda t, name: seen.append(("a", name)))
    second = ltc_backend.register_after_tensor_to_cpu(lambda t, name: seen.append(("b", name)))
    before = ltc_backend.register_before_tensor_to_cpu(lambda t, name: seen.append(("before", name)))
    try:
        ltc_backend.run_before_tensor_to_cpu_hooks(torch.zeros(1), "x")
        ltc_backend.run_after_tensor_to_cpu_hooks(torch.zeros(1), "x")
        first.remove()
        ltc_backend.run_after_tensor_to_cpu_hooks(torch.zeros(1), "y")
    finally:
        for handle in (first, second, before):
            handle.remove()
    assert seen == [("before", "x"), ("a", "x"), ("b", "x"), ("b", "y")]
    with pytest.raises(TypeError):
        ltc_backend.register_after_tensor_to_cpu("not callable")


# -- cstorch.sparse: the base class and the default filter only ---------------------------------

def test_sparse_configure_stays_the_unsupported_function():
    from cerebras.pytorch.sparse.configure import default_sparse_param_filter
    import cerebras.pytorch.sparse.configure  # noqa: F401 (the alias's own import of the module)

    assert callable(default_sparse_param_filter)
    with pytest.raises(UnsupportedAPIError, match="Sparse training is out of scope"):
        cstorch.sparse.configure  # noqa: B018 (the real attribute is the function configure(config))
    with pytest.raises(UnsupportedAPIError):
        cstorch.sparse.map_sparsity_algorithm  # noqa: B018


@pytest.mark.parametrize("name, shape, sparse", [
    ("fc1.weight", (4, 4), True),
    ("fc1.bias", (4,), False),
    ("embedding.word.weight", (10, 4), False),
    ("Transformer.LayerNorm.weight", (4, 4), False),  # case-insensitive
    ("lm_head.weight", (10, 4), False),
    ("decoder.pe_helper.weight", (3, 4), False),
    ("attn.conv", (2, 3, 3), True),
])
def test_default_sparse_param_filter(name, shape, sparse):
    from cstorch.sparse.configure import default_sparse_param_filter

    assert default_sparse_param_filter(name, torch.nn.Parameter(torch.zeros(shape))) is sparse
    assert default_sparse_param_filter(name, None) is False


def test_sparsity_algorithm_is_a_type_that_cannot_be_made():
    SparsityAlgorithm = cstorch.sparse.SparsityAlgorithm

    class MyAlgorithm(SparsityAlgorithm):
        def update(self, optimizer=None):
            pass

    assert issubclass(MyAlgorithm, SparsityAlgorithm) and MyAlgorithm in SparsityAlgorithm.__subclasses__()
    assert not isinstance(object(), SparsityAlgorithm)
    assert typing.Optional[SparsityAlgorithm]  # usable in annotations, as the Model Zoo does
    with pytest.raises(UnsupportedAPIError, match="MyAlgorithm is not supported"):
        MyAlgorithm(0.5)


def test_sparsity_algorithms_are_declared_for_config_builders():
    """The Model Zoo validates every configuration against a pydantic model of each concrete
    algorithm's constructor (sparse or not): the real algorithms are there, with
    constructors pydantic can read; making one raises."""
    pydantic = pytest.importorskip("pydantic")

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    concrete = {c for c in subclasses(cstorch.sparse.SparsityAlgorithm) if not inspect.isabstract(c)
                and c.__module__.startswith("cstorch.")}
    assert {c.__name__ for c in concrete} == {"Static", "GMP", "SET", "RigL", "Group"}
    assert inspect.isabstract(cstorch.sparse.DynamicSparsityAlgorithm)
    for cls in concrete:
        assert getattr(cstorch.sparse, cls.__name__) is cls
        params = list(inspect.signature(cls.__init__).parameters.values())[1:]
        fields = {p.name: (Any if p.annotation is p.empty else p.annotation, p.default)
                  for p in params if p.kind is not p.VAR_KEYWORD}
        model = pydantic.create_model(cls.__name__, __config__=pydantic.ConfigDict(arbitrary_types_allowed=True),
                                      **fields)
        model()  # the defaults
        with pytest.raises(UnsupportedAPIError, match=f"{cls.__name__} is not supported"):
            cls()
    assert cstorch.sparse.RigL.__init__.__annotations__["balance_in_groups"] == Optional[int]


# -- cerebras.pytorch.utils.utils: parameter filters --------------------------------------------

NAMES = ["fc1.weight", "fc1.bias", "layer.0.weight", "layer.1.weight", "layer.10.weight", "lm_head.weight",
         "xy", "ay", "embedding.weight"]
GLOBS = ["*.bias", "layer.[0-1].weight", "layer.*.weight", "?y", "[!a]*", "*", "fc1.weight", "*head*"]


@pytest.mark.parametrize("glob", GLOBS)
def test_convert_glob_to_regex_matches_as_fnmatch(glob):
    from cerebras.pytorch.utils.utils import convert_glob_to_regex

    regex = convert_glob_to_regex(glob)
    for name in NAMES:
        assert bool(regex.fullmatch(name)) == fnmatch.fnmatchcase(name, glob), (glob, name)
        assert bool(regex.match(name)) == fnmatch.fnmatchcase(name, glob), (glob, name)  # anchored at the end


def test_make_param_filter_from_globs():
    from cerebras.pytorch.utils.utils import make_param_filter

    p = torch.nn.Parameter(torch.zeros(1))
    for glob in GLOBS:
        keep = make_param_filter(glob)
        assert [n for n in NAMES if keep(n, p)] == [n for n in NAMES if fnmatch.fnmatchcase(n, glob)]
    both = make_param_filter(["*.bias", "lm_head.*"])
    assert [n for n in NAMES if both(n, p)] == ["fc1.bias", "lm_head.weight"]
    assert not any(make_param_filter([])(n, p) for n in NAMES)
    # the Model Zoo's use: pick parameters of a model by name
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.LayerNorm(2))
    picked = make_param_filter("0.*")
    assert [n for n, q in model.named_parameters() if picked(n, q)] == ["0.weight", "0.bias"]
    with pytest.raises(TypeError):
        make_param_filter(["*.bias", 3])


def test_make_param_filter_takes_only_callables_typed_as_a_filter():
    from cerebras.pytorch.utils.utils import FilterCallable, make_param_filter

    def typed(name: str, param: torch.nn.Parameter) -> bool:
        return name.endswith("bias")

    def untyped(name, param):
        return True

    def wrong_return(name: str, param: torch.nn.Parameter) -> int:
        return 1

    assert make_param_filter(typed) is typed
    assert typing.get_origin(FilterCallable) is not None
    for bad in (untyped, wrong_return, lambda name, param: True):
        with pytest.raises(ValueError, match="Unknown `param_filter`"):
            make_param_filter(bad)


# -- cerebras.pytorch.utils.call_once -------------------------------------------------------------

def test_call_once_runs_the_function_once_and_keeps_its_result():
    from cerebras.pytorch.utils.call_once import call_once

    calls = []

    @call_once()
    def setup(x):
        calls.append(x)
        return [x]

    first = setup(1)
    assert setup(2) is first and setup(x=3) is first and calls == [1]
    assert setup.__name__ == "setup"

    errors = []

    @call_once(lambda: errors.append("again"))
    def once():
        return 5

    assert once() == 5 and errors == []
    assert once() == 5 and errors == ["again"]

    def refuse():
        raise RuntimeError("only once")

    @call_once(refuse)
    def strict():
        return 1

    strict()
    with pytest.raises(RuntimeError, match="only once"):
        strict()


def test_call_once_retries_after_a_failure_and_is_thread_safe():
    from cerebras.pytorch.utils.call_once import call_once

    attempts = []

    @call_once()
    def flaky():
        attempts.append(1)
        if len(attempts) == 1:
            raise ValueError("first try")
        return "ok"

    with pytest.raises(ValueError):
        flaky()
    assert flaky() == "ok" and flaky() == "ok" and len(attempts) == 2

    runs = []
    start = threading.Barrier(8)

    @call_once()
    def slow():
        runs.append(1)
        return object()

    results = []

    def worker():
        start.wait()
        results.append(slow())

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(runs) == 1 and len({id(r) for r in results}) == 1


# -- cerebras.pytorch.distributed: ranks and the task view ----------------------------------------

def test_rank_and_world_size_of_a_one_process_run():
    import cerebras.pytorch.distributed as dist

    assert dist.get_rank() == 0 and dist.get_world_size() == 1
    cstorch.backend("CSX")
    assert dist.get_rank() == 0 and dist.get_world_size() == 1


def test_the_task_view_agrees_with_the_streaming_context():
    import cerebras.pytorch.distributed as dist
    import cerebras.pytorch.distributed.service_resolver  # noqa: F401 (the module, under the alias)
    from cerebras.pytorch.distributed.cluster_resolver import TaskRole

    assert callable(dist.service_resolver) and dist.service_resolver is cstorch.distributed.service_resolver

    def check(expected_tasks, role):
        resolver = dist.service_resolver()
        spec = resolver.cluster_spec
        assert spec.num_tasks() == dist.num_tasks() == expected_tasks
        assert spec.rank == spec.task().rank == dist.get_ordinal()
        assert (dist.get_ordinal() in resolver.streamer_ordinals()) == dist.is_streamer()
        assert (dist.get_ordinal() in resolver.receiver_ordinals()) == dist.is_receiver()
        assert resolver.cluster_resolver.assumes_role(role)
        return spec

    spec = check(1, TaskRole.MASTER)
    assert (spec.num_csx, spec.num_workers_per_csx) == (1, 0)
    assert dist.service_resolver().cluster_resolver.master_task.rank == 0
    for w in range(3):
        with streaming_worker(w, 3):
            spec = check(3, TaskRole.WORKER)
            assert spec.rank == w and spec.num_workers_per_csx == 3
            assert [t.rank for t in spec.filter_tasks_by_role(TaskRole.WORKER)] == [0, 1, 2]


def test_data_workers_see_their_share_in_the_task_view():
    """The Model Zoo's HDF5 dataset shards its files by `service_resolver().cluster_spec`
    inside each data worker of a CSX run."""
    import cerebras.pytorch.distributed as dist

    seen = []

    def input_fn():
        spec = dist.service_resolver().cluster_spec
        seen.append((spec.num_tasks(), spec.task().rank, dist.get_streaming_rank()))
        return [torch.zeros(2, 1)]

    cstorch.backend("CSX", cluster_config=ClusterConfig(num_workers_per_csx=2))
    loader = cstorch.utils.data.DataLoader(input_fn)
    assert len(loader.workers) == 2
    assert seen == [(2, 0, 0), (2, 1, 1)]


def test_cluster_and_task_specs_check_their_fields():
    from cerebras.pytorch.distributed.cluster_resolver import ClusterSpec, TaskRole, TaskSpec

    # the Model Zoo's own description of a one-process run
    task = TaskSpec(rank=0, local_rank=0, wse_id=0, node_name="unknown")
    spec = ClusterSpec([task], 0, 1, 1)
    assert spec.num_tasks() == 1 and spec.task() is task and spec.filter_tasks_by_role(TaskRole.WORKER) == []
    with pytest.raises(ValueError, match="Invalid task rank 3"):
        spec.task(3)
    for bad in (dict(rank=-1, local_rank=0, wse_id=0, node_name="n"),
                dict(rank=0, local_rank=0, wse_id=-2, node_name="n"),
                dict(rank=0, local_rank=0, wse_id=0, node_name="")):
        with pytest.raises(ValueError):
            TaskSpec(**bad)
    tasks = [TaskSpec(i, i, 0, "n") for i in range(2)]
    for args in (([], 0, 1, 1), (tasks, 2, 1, 1), (tasks[::-1], 0, 1, 1), (tasks, 0, 1, -1)):
        with pytest.raises(ValueError):
            ClusterSpec(*args)


# -- wafer-only annotations: the same numbers --------------------------------------------------------

def _zoo_annotations():
    """Decorators made the way the Model Zoo makes them."""
    from cerebras.pytorch.core.annotation import AnnotationMode, create_annotation
    from cerebras.pytorch.utils.kernel import kernel_annotater
    from cerebras.pytorch.utils.num_kv_groups import groups_annotater

    @dataclass
    class NamedConfig(AnnotationMode.Config):
        name: Optional[str]

    def get_attribute(config, is_backward: bool):
        return AnnotationMode.Attribute("named_matmul", f"{config.name}.{'bwd' if is_backward else 'fwd'}")

    named = create_annotation(NamedConfig, get_attribute, name="qk", enable_fwd=True, enable_bwd=True)
    return [kernel_annotater("flash"), groups_annotater(2), named]


class _Attention(torch.nn.Module):
    def __init__(self, annotations):
        super().__init__()
        self.q = torch.nn.Linear(4, 4)
        self.k = torch.nn.Linear(4, 4)
        self.annotations = annotations

    def forward(self, x):
        matmul = torch.matmul
        for annotate in self.annotations:
            matmul = annotate(matmul)
        return torch.softmax(matmul(self.q(x), self.k(x).transpose(-1, -2)), dim=-1).sum(-1)


@pytest.mark.parametrize("backend_type", [None, "CPU", "CSX"])
def test_annotations_leave_outputs_and_gradients_unchanged(backend_type):
    if backend_type is not None:
        cstorch.backend(backend_type)
    annotations = _zoo_annotations()
    for annotate in annotations:
        assert annotate(torch.matmul) is torch.matmul  # the function itself comes back

    torch.manual_seed(0)
    plain = _Attention([])
    annotated = _Attention(annotations)
    annotated.load_state_dict(plain.state_dict())
    x = torch.randn(3, 5, 4)
    outs = []
    for model in (plain, annotated):
        out = model(x)
        out.sum().backward()
        outs.append((out, [p.grad for p in model.parameters()]))
    torch.testing.assert_close(outs[0][0], outs[1][0], rtol=0, atol=0)
    for g0, g1 in zip(outs[0][1], outs[1][1]):
        torch.testing.assert_close(g0, g1, rtol=0, atol=0)


def test_annotation_configs_are_checked_as_on_the_real_system():
    from cerebras.pytorch.core.annotation import AnnotationMode, create_annotation
    from cerebras.pytorch.utils.kernel import KernelConfig, kernel_annotater
    from cerebras.pytorch.utils.num_kv_groups import groups_annotater

    assert [f.name for f in fields(AnnotationMode.Config)] == ["enable_fwd", "enable_bwd"]
    assert kernel_annotater(3)(abs) is abs  # off the CSX backend nothing is checked, as there
    cstorch.backend("CSX")
    with pytest.raises(TypeError, match="Expected `kernel`"):
        kernel_annotater(3)
    with pytest.raises(TypeError, match="Expected `num_kv_groups`"):
        groups_annotater("two")
    with pytest.raises(TypeError):
        create_annotation(KernelConfig, lambda c, b: None, not_a_field=1)
    with pytest.raises(TypeError):
        create_annotation(dict, lambda c, b: None)


def test_annotation_mode_swaps_the_active_config_of_its_kind():
    from cerebras.pytorch.core.annotation import AnnotationMode, annotation_registry, create_annotation
    from cstorch.utils.kernel import KernelConfig, get_attribute

    create_annotation(KernelConfig, get_attribute, kernel="a")
    Mode = annotation_registry[KernelConfig]  # the AnnotationMode class of this kind of annotation
    outer, inner = Mode(KernelConfig(kernel="a"), get_attribute), Mode(KernelConfig(kernel="b"), get_attribute)
    assert isinstance(outer, AnnotationMode) and outer.config is None
    with outer:
        assert outer.config.kernel == "a"
        with inner:
            assert outer.config.kernel == "b"
            assert inner.get_attribute(inner.config, False) == AnnotationMode.Attribute("kernel", "b")
        assert outer.config.kernel == "a"
    assert outer.config is None
    assert outer.enable_bwd_annotation((torch.zeros(1),)) == []


def test_set_attribute_and_traced_tensor_hooks_change_nothing():
    from cerebras.pytorch.experimental.listener import register_traced_tensor_hook
    from cerebras.pytorch.lib import cerebras_pytorch_lib

    t = torch.arange(3.0)
    assert cerebras_pytorch_lib.set_attribute(t, "cs.internal", {"source_vars": ["x.fwd"]}) is None
    assert torch.equal(t, torch.arange(3.0))
    with pytest.raises(TypeError):
        cerebras_pytorch_lib.set_attribute(t, "cs.internal", object())
    with pytest.raises(UnsupportedAPIError, match="compiled core library"):
        cerebras_pytorch_lib.get_appliance_data  # noqa: B018

    seen = []
    handle = register_traced_tensor_hook(lambda tensor, name: seen.append(name))
    try:
        model = torch.nn.Linear(2, 2)
        model(torch.ones(1, 2)).sum().backward()
    finally:
        handle.remove()
    from cstorch.experimental import listener
    assert seen == [] and handle.id not in listener._global_traced_tensor_hooks
    assert cstorch.experimental.listener is listener


# -- small names ---------------------------------------------------------------------------------------

def test_storage_constants_name_the_attributes_a_checkpoint_has(tmp_path):
    h5py = pytest.importorskip("h5py")
    from cerebras.pytorch.storage import constants

    path = tmp_path / "ckpt.mdl"
    cstorch.save({"w": torch.ones(2)}, path)
    with h5py.File(path, "r") as f:
        attrs = dict(f.attrs)
    assert attrs[constants.__VERSION__] == constants.CURRENT_CKPT_FORMAT_VERSION
    assert attrs[constants.__CSTORCH_VERSION__] == cstorch.__version__
    assert constants.__SPEC__ in attrs and f"w.{constants.__METADATA__}" in attrs
    assert cstorch.storage.constants is constants


def test_use_external_link_saves_the_same_state(tmp_path):
    first = tmp_path / "a.mdl"
    cstorch.save({"w": torch.arange(4.0)}, first)
    state = cstorch.load(first)
    assert not cstorch.storage.serializers.use_external_link
    with cstorch.storage.serializers.use_external_link(True):
        assert bool(cstorch.storage.serializers.use_external_link)
        cstorch.save(state, tmp_path / "b.mdl")
    first.unlink()  # the copy does not depend on the file it was loaded from
    assert torch.equal(cstorch.load(tmp_path / "b.mdl")["w"], torch.arange(4.0))


def test_small_names():
    from cerebras.pytorch import _generating_docs
    from cerebras.pytorch.utils.data.data_executor import MbsSetting

    assert _generating_docs is False
    # the type of the micro_batch_size flag (the module; `cstorch.backends` is the flag tree)
    assert MbsSetting is importlib.import_module("cstorch.backends").MicroBatchSize
    assert typing.Literal["explore", "auto"] in typing.get_args(MbsSetting)


def test_debug_args_merge_from_follows_protobuf_rules():
    debug = cstorch.backends.csx.debug
    try:
        debug.debug_args = {"ini": {"a": 1}, "tags": ["x"], "level": 1}
        debug.debug_args.MergeFrom({"ini": {"b": 2}, "tags": ["y"], "level": 3})
        assert debug.debug_args == {"ini": {"a": 1, "b": 2}, "tags": ["x", "y"], "level": 3}
        descriptor_pb2 = pytest.importorskip("google.protobuf.descriptor_pb2")
        message = descriptor_pb2.FileDescriptorProto(name="n.proto", dependency=["z"])
        debug.debug_args.MergeFrom(message)  # a protobuf message: its set fields, by name
        assert debug.debug_args["name"] == "n.proto" and debug.debug_args["dependency"] == ["z"]
        with pytest.raises(TypeError):
            debug.debug_args.MergeFrom(3)
    finally:
        debug.debug_args = cstorch.backends.DEFAULT
