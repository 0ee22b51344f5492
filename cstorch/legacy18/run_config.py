"""`configure(...)` of the 1.8 API.

`configure` records ONE process-wide run configuration (the 1.8 API runs one
configuration per process); `compile` (`compiled_model`) turns it into the process's
one backend and registers the model with it (`cstorch.compile`):

    1.8 argument                  2.x object it becomes
    ----------------------------  -------------------------------------------------------
    backend="wse_ws"              cstorch.backend("CSX", ...)   (weight streaming)
    backend="cpu" / "gpu"         cstorch.backend("CPU" / "GPU", artifact_dir=model_dir)
    model_dir                     the backend's artifact_dir
    compile_dir, compile_only,    the CSX backend's arguments of the same names
      validate_only
    num_csx, max_wgt_servers,     ClusterConfig fields of the same names
      max_act_per_csx,
      num_workers_per_csx,
      mount_dirs, python_paths,
      job_labels, mgmt_address,
      credentials_path,
      job_time_sec,
      disable_version_check
    transfer_processes            cstorch.backends.csx.performance.transfer_processes
                                  (the threads that prepare tensors for cstorch.save)
    checkpoint_steps              read by `cstorch.utils.data.DataLoader` (1.8): the steps
                                  on which weights can be fetched (see `utils/data.py`)
    seed                          torch.manual_seed at configure, cstorch.manual_seed
                                  once the backend exists
    debug_args                    accepted, no effect (compiler debug settings)

Order (as the porting guide asks): `configure` once, before the model is compiled;
a second call, or a call once a backend exists, is a RuntimeError. `compile` without
`configure` uses the defaults below.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

import torch

import cstorch
from cstorch.distributed import ClusterConfig


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """The arguments of `configure`, with the 1.8 defaults."""

    model_dir: str = "./"
    compile_dir: str = "/opt/cerebras/cached_compile"
    compile_only: bool = False
    validate_only: bool = False
    checkpoint_steps: int = 0
    num_csx: int = 1
    max_wgt_servers: int = 24
    mount_dirs: Optional[list] = None
    python_paths: Optional[list] = None
    transfer_processes: int = 5
    num_workers_per_csx: int = 1
    job_labels: Optional[list] = None
    max_act_per_csx: int = 1
    mgmt_address: Optional[str] = None
    credentials_path: Optional[str] = None
    job_time_sec: Optional[int] = None
    disable_version_check: bool = False
    seed: Optional[int] = None
    debug_args: object = None

    def __post_init__(self):
        for name in ("model_dir", "compile_dir"):
            _check(name, getattr(self, name), str, "a path string")
        for name in ("compile_only", "validate_only", "disable_version_check"):
            _check(name, getattr(self, name), bool, "True or False")
        if self.compile_only and self.validate_only:
            raise ValueError("configure: set at most one of compile_only and validate_only.")
        for name, low in (("checkpoint_steps", 0), ("num_csx", 1), ("max_wgt_servers", 0), ("transfer_processes", 1),
                          ("num_workers_per_csx", 0), ("max_act_per_csx", 0)):
            _check_int(name, getattr(self, name), low)
        for name in ("mount_dirs", "python_paths", "job_labels"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, (list, tuple)) or
                                      not all(isinstance(v, str) for v in value)):
                raise TypeError(f"configure: {name} must be a list of strings or None, got {value!r}.")
        if self.seed is not None:
            _check_int("seed", self.seed, 0)
        if self.job_time_sec is not None:
            _check_int("job_time_sec", self.job_time_sec, 1)

    def cluster_config(self) -> ClusterConfig:
        """The ClusterConfig of a CSX backend (validated by ClusterConfig itself)."""
        return ClusterConfig(
            mgmt_address=self.mgmt_address, credentials_path=self.credentials_path, num_csx=self.num_csx,
            max_wgt_servers=self.max_wgt_servers, max_act_per_csx=self.max_act_per_csx,
            num_workers_per_csx=self.num_workers_per_csx, job_labels=list(self.job_labels or []),
            job_time_sec=self.job_time_sec, mount_dirs=list(self.mount_dirs or []),
            python_paths=list(self.python_paths or []), disable_version_check=self.disable_version_check)


def _check(name: str, value, kind, what: str) -> None:
    if not isinstance(value, kind):
        raise TypeError(f"configure: {name} must be {what}, got {value!r}.")


def _check_int(name: str, value, low: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ValueError(f"configure: {name} must be an integer >= {low}, got {value!r}.")


_CONFIG: Optional[RunConfig] = None  # what configure() set; None: not called


def configure(model_dir: str = "./", compile_dir: str = "/opt/cerebras/cached_compile", compile_only: bool = False,
              validate_only: bool = False, checkpoint_steps: int = 0, num_csx: int = 1, max_wgt_servers: int = 24,
              mount_dirs: Optional[list] = None, python_paths: Optional[list] = None, transfer_processes: int = 5,
              num_workers_per_csx: int = 1, job_labels: Optional[list] = None, max_act_per_csx: int = 1,
              mgmt_address: Optional[str] = None, *, credentials_path: Optional[str] = None,
              job_time_sec: Optional[int] = None, disable_version_check: bool = False, seed: Optional[int] = None,
              debug_args=None) -> None:
    """Set the process's run configuration, once per process, before `compile`: the 1.8
    defaults; it becomes the backend's arguments and its `ClusterConfig` (the module's
    table says what each argument becomes). A second call, or one once a backend exists,
    is a `RuntimeError`; the `ClusterConfig` checks run now.

    Args:
        model_dir: the backend's artifact folder.
        compile_dir: the CSX backend's compile directory (recorded, not used).
        compile_only: the CSX backend captures and compiles one step and runs none.
        validate_only: like `compile_only` (not with it).
        checkpoint_steps: N: the steps on which weights can be fetched (see the 1.8 DataLoader); 0: only the
            last step.
        num_csx: ClusterConfig.num_csx: the devices of the data-parallel mesh.
        max_wgt_servers: ClusterConfig.max_wgt_servers (no effect here).
        mount_dirs: ClusterConfig.mount_dirs (no effect here).
        python_paths: ClusterConfig.python_paths (no effect here).
        transfer_processes: `cstorch.backends.csx.performance.transfer_processes`: the threads that prepare
            tensors for `cstorch.save`.
        num_workers_per_csx: ClusterConfig.num_workers_per_csx: the data workers.
        job_labels: ClusterConfig.job_labels (no effect here).
        max_act_per_csx: ClusterConfig.max_act_per_csx (no effect here).
        mgmt_address: ClusterConfig.mgmt_address: the coordinator of a multi-process run.
        credentials_path: ClusterConfig.credentials_path (no effect here).
        job_time_sec: ClusterConfig.job_time_sec (no effect here).
        disable_version_check: ClusterConfig.disable_version_check (no effect here).
        seed: seeds torch now and the backend's random numbers once it exists.
        debug_args: the compiler's debug settings (no effect here).

    Differences from the real system:
        A call after the model was built but before `compile` cannot be detected (only a
        backend's existence is checked). `transfer_processes` sets
        `cstorch.backends.csx.performance.transfer_processes` when `compile` creates a CSX
        backend. `debug_args` is accepted and has no effect.
    """
    global _CONFIG
    if _CONFIG is not None:
        raise RuntimeError(
            "cstorch.configure was already called in this process. The configuration is global and set once: "
            "runs with different configurations must run in separate processes."
        )
    b = cstorch.backend()
    if b is not None:
        raise RuntimeError(
            f"cstorch.configure must be called before the model is built and compiled, but a "
            f"{b.backend_type.name} backend already exists in this process (cstorch.compile or cstorch.backend "
            f"created it). Call cstorch.configure(...) first."
        )
    config = RunConfig(model_dir, compile_dir, compile_only, validate_only, checkpoint_steps, num_csx,
                       max_wgt_servers, mount_dirs, python_paths, transfer_processes, num_workers_per_csx,
                       job_labels, max_act_per_csx, mgmt_address, credentials_path, job_time_sec,
                       disable_version_check, seed, debug_args)
    config.cluster_config()  # ClusterConfig's own checks (mgmt_address, job_labels) fail now, not at compile
    if seed is not None:
        torch.manual_seed(seed)
    _CONFIG = config


def current_config() -> RunConfig:
    """What `configure` set, or the defaults when it was not called."""
    return _CONFIG if _CONFIG is not None else RunConfig()


def configured() -> bool:
    """Whether `configure` was called in this process."""
    return _CONFIG is not None


def _reset() -> None:
    """Forget the configuration (tests that run several 1.8 scripts in one process)."""
    global _CONFIG
    _CONFIG = None
