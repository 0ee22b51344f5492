"""`ClusterConfig`: where a CSX run executes.

Fields, annotations (with their element types: `List[str]`, ...), defaults and
validation follow the real system's (`cerebras.appliance.cluster_config` 2.10): every
assignment, in the constructor or later, is checked with the real error message, and
assigning `ClusterConfig.DEFAULT` restores a field's default. On XLA `num_csx` is the
number of devices of the data-parallel mesh and `num_workers_per_csx` the number of
data workers; `mgmt_address` is the coordinator of a multi-process run. The other fields
describe the wafer cluster's job (servers, images, labels, mounts, notifications): they
are validated and kept, with no effect here.
"""
import re
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, List, NamedTuple, Optional

_UNSET = object()


class MountDir(NamedTuple):
    """A local path and where the cluster's containers see it.

    Args:
        path: the local path.
        container_path: where the cluster's containers see it.
    """
    path: str
    container_path: str


@dataclass(frozen=True)
class NotificationTarget:
    """Who is told about cluster-side events of the job.

    Args:
        mailto: e-mail addresses to notify.
        slack: Slack targets to notify.
        pagerduty: PagerDuty targets to notify.
        severity_threshold: the least severity of an event that is notified.
    """
    mailto: List[str] = field(default_factory=list)
    slack: List[str] = field(default_factory=list)
    pagerduty: List[str] = field(default_factory=list)
    severity_threshold: int = 3


class _Checked:
    """A validated field: `check(value) -> stored value`, the default when unset."""

    def __init__(self, default=_UNSET, factory=None):
        self.factory = factory if factory is not None else (lambda: default)

    def __set_name__(self, owner, name):
        self.name, self.attr = name, "_value_" + name

    def __get__(self, obj, owner=None):
        if obj is None:
            return _UNSET  # what the dataclass records as the field default: "unset"
        return getattr(obj, self.attr)

    def __set__(self, obj, value):
        if value is _UNSET or value is ClusterConfig.DEFAULT:
            value = self.factory()
        else:
            value = self.check(value)
        object.__setattr__(obj, self.attr, value)

    def check(self, value):
        return value


class _IntAtLeast(_Checked):
    """An int >= `low` (None: the default)."""

    def __init__(self, default, low: int):
        super().__init__(default)
        self.low = low

    def check(self, value):
        if value is None:
            return self.factory()
        if not isinstance(value, int) or value < self.low:
            kind = "non-negative" if self.low == 0 else "positive"
            raise ValueError(f"{self.name} must be a {kind} integer or None. Got {value}")
        return value


class _MgmtAddress(_Checked):
    pattern = re.compile(r".+:[0-9]+")

    def check(self, value):
        if value is not None and self.pattern.match(value) is None:
            raise ValueError(f"mgmt_address '{value}' should be in the form of '<name>:<port>'")
        return value


VALID_JOB_PRIORITIES = ["p1", "p2", "p3"]


class _JobPriority(_Checked):
    def check(self, value):
        if value not in VALID_JOB_PRIORITIES:
            raise ValueError(f"Invalid job priority value: {value} (should be one of {VALID_JOB_PRIORITIES})")
        return value


class _JobLabels(_Checked):
    token = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$")

    def check(self, value):
        labels = list(value or [])
        for label in labels:
            parts = str(label).split("=")
            if len(parts) != 2:
                raise ValueError(
                    f"'{label}' is an invalid label. Expecting the label key and the label value to be separated by "
                    f"a single equal sign(=) character.")
            for part in parts:
                if self.token.match(part) is None:
                    raise ValueError(
                        f"'{label}' is an invalid label. Expecting the label key and the label value to match regex "
                        f"'{self.token.pattern}'.")
        return labels


def _unique(items: list) -> list:
    return list(dict.fromkeys(items))


class _MountDirs(_Checked):
    def check(self, value):
        out = []
        for md in value or []:
            if isinstance(md, (str, Path)):
                real = Path(md).resolve()
                if not real.exists():
                    raise ValueError(f"Mount dir {real} does not exist")
                md = MountDir(path=str(md), container_path=str(md))
            elif not isinstance(md, MountDir):
                raise TypeError(f"mount_dirs takes paths (str) or MountDir(path, container_path), got "
                                f"{type(md).__name__}")
            out.append(md)
        return _unique(out)


class _PythonPaths(_Checked):
    def check(self, value):
        out = []
        for p in value or []:
            real = Path(p).resolve()
            if not real.exists():
                raise ValueError(f"{real} does not exist")
            out.append(str(real))
        return _unique(out)


class _Notifications(_Checked):
    def check(self, value):
        targets = []
        for item in value or []:
            if isinstance(item, dict):
                item = NotificationTarget(**item)
            if not isinstance(item, NotificationTarget):
                raise TypeError(f"Invalid notification target. Expected a dict or `NotificationTarget`. Got type "
                                f"{type(item)}.")
            targets.append(item)
        return targets


@dataclass
class ClusterConfig:
    """The wafer cluster of a CSX run (see the module docstring for what each field does
    here).

    Args:
        mgmt_address: the coordinator of a multi-process run, `"<name>:<port>"`; None: none.
        mgmt_namespace: the wafer cluster's namespace (no effect here).
        credentials_path: the cluster's credentials (no effect here).
        num_csx: the number of XLA devices of the data-parallel mesh (an integer >= 1 on CSX).
        max_wgt_servers: the wafer cluster's weight servers (no effect here).
        max_act_per_csx: the wafer cluster's activation servers per system (no effect here).
        num_workers_per_csx: the number of data workers W (threads of this process); 0 counts as 1.
        cbcore_image: the cluster's container image (no effect here).
        job_labels: "key=value" labels of the cluster job (validated; no effect here).
        job_priority: "p1", "p2" or "p3" (no effect here).
        job_time_sec: the job's time limit in seconds (no effect here).
        mount_dirs: paths or MountDir entries the cluster mounts (each path must exist; no effect here).
        python_paths: paths added to the cluster's Python path (each must exist; no effect here).
        automount: the cluster's automount setting (no effect here).
        mount_all: the cluster's mount-all setting (no effect here).
        disable_mount_check: the cluster's mount check setting (no effect here).
        disable_version_check: the cluster's version check setting (no effect here).
        workflow_id: the cluster workflow the job joins (no effect here).
        notifications: NotificationTarget entries or dicts of their fields (no effect here).

    Differences from the real system:
        Fields other than `num_csx`, `num_workers_per_csx` and `mgmt_address` are
        accepted, validated and ignored, and the
        `CEREBRAS_WAFER_SCALE_CLUSTER_DEFAULTS` file is not read. `num_csx=N` runs
        the step data-parallel on N XLA devices (on CPU,
        `XLA_FLAGS=--xla_force_host_platform_device_count=N` before JAX starts); the
        step sees the global batch, so BatchNorm statistics span all devices. A global
        batch that N does not divide, or N above the device count, is a clear error.
    """

    DEFAULT = object()

    mgmt_address: Optional[str] = _MgmtAddress(None)
    mgmt_namespace: Optional[str] = None
    credentials_path: Optional[str] = None

    num_csx: int = _IntAtLeast(1, 0)
    max_wgt_servers: int = _IntAtLeast(0, 0)
    max_act_per_csx: int = _IntAtLeast(0, 0)
    num_workers_per_csx: int = _IntAtLeast(1, 0)

    cbcore_image: Optional[str] = None
    job_labels: List[str] = _JobLabels(factory=list)
    job_priority: str = _JobPriority("p2")
    job_time_sec: Optional[int] = _IntAtLeast(None, 1)

    mount_dirs: List[MountDir] = _MountDirs(factory=list)
    python_paths: List[str] = _PythonPaths(factory=list)
    automount: bool = True
    mount_all: bool = True
    disable_mount_check: bool = True

    disable_version_check: bool = False
    workflow_id: Optional[str] = None

    notifications: List[NotificationTarget] = _Notifications(factory=list)

    def __setattr__(self, key, value):
        if value is ClusterConfig.DEFAULT:
            value = self.get_default(key)
        super().__setattr__(key, value)

    def __hash__(self):
        return hash(tuple(tuple(v) if isinstance(v, list) else v
                          for f in fields(self) if (v := getattr(self, f.name, None))))

    @classmethod
    def get_default(cls, key: str) -> Any:
        """The default value of field `key`."""
        for f in fields(cls):
            if f.name == key:
                checked = cls.__dict__.get(key)
                if isinstance(checked, _Checked):
                    return checked.factory()
                if f.default is not MISSING:
                    return f.default
                return f.default_factory()
        raise AttributeError(f"Field {key} not found in ClusterConfig")


__all__ = ["ClusterConfig", "MountDir", "NotificationTarget", "VALID_JOB_PRIORITIES"]
