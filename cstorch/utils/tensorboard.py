"""TensorBoard writing and reading (``cerebras.pytorch.utils.tensorboard``).

This module must be imported explicitly (``import cstorch.utils.tensorboard``)
because it needs the optional ``tensorboard`` package.

* :class:`SummaryWriter` is ``torch.utils.tensorboard.SummaryWriter`` with a
  ``base_step`` used whenever a call passes ``global_step=None``, plus
  :meth:`SummaryWriter.add_tensor` to log whole tensors.
* :class:`SummaryReader` reads back the scalars and tensors of the event files
  under one or more directories.
"""

import os
from typing import Callable, Dict, Iterable, List, Optional, Tuple, Union

import numpy as np
import torch
from tensorboard.backend.event_processing import event_accumulator as _ea
from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
from tensorboard.util import tensor_util
from torch.utils.tensorboard import SummaryWriter as _TorchSummaryWriter

__all__ = ["SummaryWriter", "SummaryReader"]

#: Plugin name recorded in the metadata of summaries written by ``add_tensor``.
TENSOR_PLUGIN_NAME = "tensors"


class SummaryWriter(_TorchSummaryWriter):
    """``torch.utils.tensorboard.SummaryWriter`` with a default step.

    Contract: every positional and keyword argument other than ``base_step`` is
    forwarded unchanged to torch's ``SummaryWriter``. A call that passes an
    explicit ``global_step`` records exactly that step, as in torch. A call
    that passes ``global_step=None`` (or omits it) records ``base_step``
    instead of torch's default of 0. ``base_step`` is a public attribute and
    may be changed between calls.
    """

    def __init__(self, *args, base_step: int = 1, **kwargs):
        self.base_step = int(base_step)
        super().__init__(*args, **kwargs)

    def _get_file_writer(self):
        writer = super()._get_file_writer()
        if not getattr(writer, "_cstorch_base_step", False):
            original = writer.add_event

            def add_event(event, step=None, walltime=None):
                return original(
                    event, self.base_step if step is None else step, walltime
                )

            writer.add_event = add_event
            writer._cstorch_base_step = True
        return writer

    def add_scalars(self, main_tag, tag_scalar_dict, global_step=None, *args, **kwargs):
        # torch creates one extra FileWriter per tag here, bypassing
        # _get_file_writer, so resolve the default step before delegating.
        if global_step is None:
            global_step = self.base_step
        return super().add_scalars(main_tag, tag_scalar_dict, global_step, *args, **kwargs)

    def add_tensor(self, name: str, tensor: torch.Tensor, step: Optional[int] = None):
        """Write the whole ``tensor`` as a TensorBoard tensor summary.

        Args:
            name: Tag under which the tensor is recorded.
            tensor: A ``torch.Tensor``; it is detached and copied to host.
            step: Step to record; ``None`` means ``base_step``.

        Raises:
            TypeError: if ``name`` is not a str or ``tensor`` is not a
                ``torch.Tensor``.
        """
        if not isinstance(name, str):
            raise TypeError(f"add_tensor: 'name' must be a str, got {type(name).__name__}")
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(
                f"add_tensor: 'tensor' must be a torch.Tensor, got {type(tensor).__name__}"
            )
        array = tensor.detach().cpu().numpy()
        metadata = SummaryMetadata(
            plugin_data=SummaryMetadata.PluginData(plugin_name=TENSOR_PLUGIN_NAME)
        )
        summary = Summary(
            value=[
                Summary.Value(
                    tag=name,
                    metadata=metadata,
                    tensor=tensor_util.make_tensor_proto(array),
                )
            ]
        )
        self._get_file_writer().add_summary(summary, step)


def _event_dirs(root: str) -> List[str]:
    """Directories under ``root`` (inclusive) holding a tfevents file."""
    found = []
    for dirpath, _, filenames in os.walk(root):
        if any("tfevents" in f for f in filenames):
            found.append(dirpath)
    return sorted(found)


class SummaryReader:
    """Reads scalars and tensors from TensorBoard event files.

    Args:
        log_dirs: A directory or a list of directories. Every directory below
            them (recursively) that contains event files is loaded, in full.
        filter: Optional callable ``tag -> bool``; only tags for which it
            returns true are visible through this reader.

    Tensor tags are those of tensor summaries with numeric or boolean values
    (string tensors, such as ``add_text`` output, are not listed).
    Values of the same tag from several directories are merged. Results are
    lists of ``(step, value)`` sorted by step; if a step was recorded more
    than once, the value with the latest wall time wins. torch's
    ``add_scalars`` writes each series to its own subdirectory under one tag,
    so those series merge too: read each subdirectory with its own reader to
    keep them apart.

    Raises:
        FileNotFoundError: if a given directory does not exist.
    """

    def __init__(
        self,
        log_dirs: Union[str, os.PathLike, Iterable[Union[str, os.PathLike]]],
        filter: Optional[Callable[[str], bool]] = None,
    ):
        if isinstance(log_dirs, (str, os.PathLike)):
            log_dirs = [log_dirs]
        self._log_dirs = [os.fspath(d) for d in log_dirs]
        for d in self._log_dirs:
            if not os.path.isdir(d):
                raise FileNotFoundError(f"SummaryReader: log directory {d!r} does not exist")
        self._filter = filter
        self._scalars: Dict[str, List[Tuple[int, float]]] = {}
        self._tensors: Dict[str, List[Tuple[int, torch.Tensor]]] = {}
        self._load()

    def _visible(self, tag: str) -> bool:
        return self._filter is None or bool(self._filter(tag))

    def _load(self):
        guidance = {_ea.SCALARS: 0, _ea.TENSORS: 0}
        scalars: Dict[str, Dict[int, tuple]] = {}
        tensors: Dict[str, Dict[int, tuple]] = {}
        for root in self._log_dirs:
            for d in _event_dirs(root):
                acc = _ea.EventAccumulator(d, size_guidance=guidance)
                acc.Reload()
                tags = acc.Tags()
                for tag in tags.get(_ea.SCALARS, []):
                    if self._visible(tag):
                        for ev in acc.Scalars(tag):
                            _keep_latest(scalars.setdefault(tag, {}), ev, ev.value)
                for tag in tags.get(_ea.TENSORS, []):
                    if self._visible(tag):
                        for ev in acc.Tensors(tag):
                            arr = np.array(tensor_util.make_ndarray(ev.tensor_proto))
                            if arr.dtype.kind not in "biufc":
                                break  # e.g. text summaries: not a torch tensor
                            _keep_latest(tensors.setdefault(tag, {}), ev, torch.as_tensor(arr))
        self._scalars = {t: [(s, v) for s, (_, v) in sorted(m.items())] for t, m in scalars.items()}
        self._tensors = {t: [(s, v) for s, (_, v) in sorted(m.items())] for t, m in tensors.items()}

    def scalar_names(self) -> List[str]:
        """Sorted list of visible scalar tags."""
        return sorted(self._scalars)

    def tensor_names(self) -> List[str]:
        """Sorted list of visible tensor tags."""
        return sorted(self._tensors)

    @staticmethod
    def _read(kind: str, table: dict, name: str, step: Optional[int]):
        if name not in table:
            raise KeyError(f"No {kind} with tag {name!r}; available: {sorted(table)}")
        values = table[name]
        if step is None:
            return list(values)
        for s, v in values:
            if s == step:
                return v
        raise KeyError(
            f"{kind.capitalize()} {name!r} has no value at step {step}; "
            f"steps present: {[s for s, _ in values]}"
        )

    def read_scalar(self, name: str, step: Optional[int] = None):
        """``[(step, float)]`` sorted by step, or the value at ``step``.

        Raises:
            KeyError: if the tag, or the requested step of it, is absent.
        """
        return self._read("scalar", self._scalars, name, step)

    def read_tensor(self, name: str, step: Optional[int] = None):
        """``[(step, torch.Tensor)]`` sorted by step, or the tensor at ``step``.

        Raises:
            KeyError: if the tag, or the requested step of it, is absent.
        """
        return self._read("tensor", self._tensors, name, step)

    def Scalars(self) -> Dict[str, List[Tuple[int, float]]]:
        """All visible scalars: ``{tag: [(step, value), ...]}``."""
        return {t: list(v) for t, v in self._scalars.items()}

    def Tensors(self) -> Dict[str, List[Tuple[int, torch.Tensor]]]:
        """All visible tensors: ``{tag: [(step, tensor), ...]}``."""
        return {t: list(v) for t, v in self._tensors.items()}


def _keep_latest(by_step: dict, event, value):
    prev = by_step.get(event.step)
    if prev is None or event.wall_time >= prev[0]:
        by_step[event.step] = (event.wall_time, value)
