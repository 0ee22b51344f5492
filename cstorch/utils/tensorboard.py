"""TensorBoard writing and reading (``cerebras.pytorch.utils.tensorboard``).

This module must be imported explicitly (``import cstorch.utils.tensorboard``)
because it needs the optional ``tensorboard`` package.

* :class:`SummaryWriter` is ``torch.utils.tensorboard.SummaryWriter`` with a
  ``base_step`` used whenever a call passes ``global_step=None``, plus
  :meth:`SummaryWriter.add_tensor` to log whole tensors.
* :class:`SummaryReader` reads back the scalars and tensors of the event files
  under one or more directories.
"""

import fnmatch
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

    Args:
        *args: torch's SummaryWriter arguments (`log_dir` first).
        base_step: the step recorded by a call without `global_step`.
        **kwargs: torch's SummaryWriter keyword arguments.

    Differences from the real system:
        A call without ``global_step`` records ``base_step``.
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
        filter: Optional; only the visible tags are read. A string keeps the
            tags of the groups starting with it (``f"{filter}*/*"``, as the
            real reader); a callable ``tag -> bool`` keeps those it accepts.
        kwargs: passed to tensorboard's ``EventAccumulator`` (e.g.
            ``size_guidance``).

    Text summaries (``add_text``, tags ``<name>/text_summary``) are listed by
    ``text_summary_names()`` and read with ``read_text_summary(name, step)``.
    ``reload()`` reads the files again; ``Tags()`` gives ``{"scalars": [...],
    "tensors": [...]}`` and ``scalar_groups()`` the tags' first components.

    Tensor tags are those of tensor summaries with numeric or boolean values
    (string tensors, such as ``add_text`` output, are not listed).
    Values of the same tag from several directories are merged. Results are
    lists of ``(step, value)`` sorted by step; if a step was recorded more
    than once, the value with the latest wall time wins. torch's
    ``add_scalars`` writes each series to its own subdirectory under one tag,
    so those series merge too: read each subdirectory with its own reader to
    keep them apart.

    Differences from the real system:
        The ``add_scalars`` series (one subdirectory each) are read back merged
        under their tag.

    Raises:
        FileNotFoundError: if a given directory does not exist.
    """

    def __init__(
        self,
        log_dirs: Union[str, os.PathLike, Iterable[Union[str, os.PathLike]]],
        filter: Union[str, Callable[[str], bool], None] = None,
        **kwargs,
    ):
        if isinstance(log_dirs, (str, os.PathLike)):
            log_dirs = [log_dirs]
        self._log_dirs = [os.fspath(d) for d in log_dirs]
        for d in self._log_dirs:
            if not os.path.isdir(d):
                raise FileNotFoundError(f"SummaryReader: log directory {d!r} does not exist")
        self._filter = filter
        self._accumulator_kwargs = kwargs
        self._scalars: Dict[str, List[Tuple[int, float]]] = {}
        self._tensors: Dict[str, List[Tuple[int, torch.Tensor]]] = {}
        self._texts: Dict[str, List[Tuple[int, str]]] = {}
        self._load()

    def _visible(self, tag: str) -> bool:
        if self._filter is None:
            return True
        if isinstance(self._filter, str):
            return fnmatch.fnmatch(tag, f"{self._filter}*/*")
        return bool(self._filter(tag))

    def reload(self) -> None:
        """Read the event files again (new events and files included)."""
        self._load()

    def _load(self):
        kwargs = dict(self._accumulator_kwargs)
        kwargs.setdefault("size_guidance", {_ea.SCALARS: 0, _ea.TENSORS: 0})
        scalars: Dict[str, Dict[int, tuple]] = {}
        tensors: Dict[str, Dict[int, tuple]] = {}
        texts: Dict[str, Dict[int, tuple]] = {}
        for root in self._log_dirs:
            for d in _event_dirs(root):
                acc = _ea.EventAccumulator(d, **kwargs)
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
                            if arr.dtype.kind in "SUO":  # text summaries
                                text = arr.reshape(-1)[0] if arr.size else b""
                                text = text.decode() if isinstance(text, bytes) else str(text)
                                _keep_latest(texts.setdefault(tag, {}), ev, text)
                                continue
                            if arr.dtype.kind not in "biufc":
                                break
                            _keep_latest(tensors.setdefault(tag, {}), ev, torch.as_tensor(arr))
        by_step = lambda table: {t: [(s, v) for s, (_, v) in sorted(m.items())] for t, m in table.items()}  # noqa
        self._scalars, self._tensors, self._texts = by_step(scalars), by_step(tensors), by_step(texts)

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

    def read_tensor(self, name: str, step: Optional[int] = None, latest_only: bool = True):
        """``[(step, torch.Tensor)]`` sorted by step, or the tensor at ``step``. A
        step recorded more than once gives its latest value (``latest_only=False``
        gives the same: earlier values of a step are not kept).

        Raises:
            KeyError: if the tag, or the requested step of it, is absent.
        """
        return self._read("tensor", self._tensors, name, step)

    def scalar_groups(self) -> set:
        """The first component (before "/") of every visible scalar tag."""
        return {name.partition("/")[0] for name in self._scalars}

    def text_summary_names(self) -> set:
        """The visible text summary tags (``<name>/text_summary``)."""
        return set(self._texts)

    def read_text_summary(self, name: str, step: Optional[int] = None):
        """``[(step, str)]`` of the text summary ``name`` (``/text_summary`` may be
        left out), or its text at ``step``."""
        if not name.endswith("/text_summary"):
            name = f"{name}/text_summary"
        if name not in self._texts:
            raise RuntimeError(f"Could not find text summary {name}. Valid text summary names:\n"
                               f"{', '.join(sorted(self._texts))}")
        if step is None:
            return list(self._texts[name])
        for s, text in self._texts[name]:
            if s == step:
                return text
        raise RuntimeError(f"Could not find text_summary {name} at step {step}")

    def Tags(self) -> Dict[str, List[str]]:
        """The visible tags by kind: ``{"scalars": [...], "tensors": [...]}`` (text
        summaries are tensors)."""
        tags = {"scalars": sorted(self._scalars), "tensors": sorted([*self._tensors, *self._texts])}
        return {k: v for k, v in tags.items() if v}

    def Scalars(self, name: Optional[str] = None):
        """``read_scalar(name)``; without a name, all visible scalars as
        ``{tag: [(step, value), ...]}``."""
        if name is not None:
            return self.read_scalar(name)
        return {t: list(v) for t, v in self._scalars.items()}

    def Tensors(self) -> Dict[str, List[Tuple[int, torch.Tensor]]]:
        """All visible tensors: ``{tag: [(step, tensor), ...]}``."""
        return {t: list(v) for t, v in self._tensors.items()}


def _keep_latest(by_step: dict, event, value):
    prev = by_step.get(event.step)
    if prev is None or event.wall_time >= prev[0]:
        by_step[event.step] = (event.wall_time, value)
