"""`ClusterConfig`: where a CSX run executes. Fields and defaults follow the real
system's; on XLA `num_csx` is the number of devices of the data-parallel mesh."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Optional


@dataclass
class MountDir:
    path: str
    container_path: str


@dataclass
class NotificationTarget:
    mailto: list = field(default_factory=list)
    slack: list = field(default_factory=list)
    pagerduty: list = field(default_factory=list)
    severity_threshold: int = 3


@dataclass
class ClusterConfig:
    mgmt_address: Optional[str] = None
    mgmt_namespace: Optional[str] = None
    credentials_path: Optional[str] = None
    num_csx: int = 1
    max_wgt_servers: int = 0
    max_act_per_csx: int = 0
    num_workers_per_csx: int = 1
    cbcore_image: Optional[str] = None
    job_labels: list = field(default_factory=list)
    job_priority: str = "p2"
    job_time_sec: Optional[int] = None
    mount_dirs: list = field(default_factory=list)
    python_paths: list = field(default_factory=list)
    automount: bool = True
    mount_all: bool = True
    disable_mount_check: bool = True
    disable_version_check: bool = False
    workflow_id: Optional[str] = None
    notifications: list = field(default_factory=list)

    def __post_init__(self):
        for name in ("num_csx", "max_wgt_servers", "max_act_per_csx", "num_workers_per_csx"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"ClusterConfig.{name} must be an integer >= 0, got {v!r}")
        if self.mgmt_address is not None and not re.fullmatch(r"[^:\s]+:\d+", self.mgmt_address):
            raise ValueError(f"ClusterConfig.mgmt_address must look like '<name>:<port>', got {self.mgmt_address!r}")
        if self.job_priority not in ("p1", "p2", "p3"):
            raise ValueError(f"ClusterConfig.job_priority must be 'p1', 'p2' or 'p3', got {self.job_priority!r}")
        if self.job_time_sec is not None and self.job_time_sec <= 0:
            raise ValueError(f"ClusterConfig.job_time_sec must be positive, got {self.job_time_sec!r}")
        for label in self.job_labels:
            if not re.fullmatch(r"[^=\s]+=[^=\s]*", str(label)):
                raise ValueError(f"ClusterConfig.job_labels entries must look like 'key=value', got {label!r}")

    def get_default(self, key: str) -> Any:
        return ClusterConfig.__dataclass_fields__[key].default
