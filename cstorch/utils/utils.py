"""Parameter filters by name (the real `cerebras.pytorch.utils.utils`).

* `FilterCallable`: the type of a parameter filter, `(name: str, param:
  torch.nn.Parameter) -> bool`.
* `convert_glob_to_regex(f)`: the compiled regular expression of the shell-style glob
  `f` (`fnmatch` syntax: `*`, `?`, `[seq]`, `[!seq]`), to be used with `fullmatch`
  (or `match`: the expression is anchored at the end). Anything but a str is a
  TypeError.
* `make_param_filter(param_filter)`: a filter from a glob, a list of globs (a name
  matches if it matches any of them; an empty list matches nothing) or a callable. A
  callable is returned as it is, provided its signature is annotated exactly as
  `FilterCallable` (two parameters annotated `str` and `torch.nn.Parameter`, returning
  `bool`); any other callable is a ValueError, as on the real system.
"""
import fnmatch
import inspect
import re
from typing import Callable, List, Union

import torch.nn as nn

FilterCallable = Callable[[str, nn.Parameter], bool]

_FILTER_PARAMS = (str, nn.Parameter)


def convert_glob_to_regex(f: str):
    """The compiled regular expression that matches the names the glob `f` matches."""
    if not isinstance(f, str):
        raise TypeError(f"filter must be a string or list of strings, got {type(f)}")
    return re.compile(fnmatch.translate(f))


def _is_filter_signature(fn: Callable) -> bool:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    params = list(sig.parameters.values())
    return (sig.return_annotation is bool and len(params) == len(_FILTER_PARAMS)
            and all(p.annotation is t for p, t in zip(params, _FILTER_PARAMS)))


def make_param_filter(param_filter: Union[str, List[str], FilterCallable]) -> FilterCallable:
    """A parameter filter `(name, param) -> bool` from globs or a filter callable (see
    the module's doc)."""
    if callable(param_filter):
        if not _is_filter_signature(param_filter):
            raise ValueError(
                f'Unknown `param_filter`: "{param_filter}". Valid options are a string, or a list of strings '
                f'representing the filter, or a function with signature {FilterCallable}.')
        return param_filter
    patterns = [param_filter] if isinstance(param_filter, str) else list(param_filter)
    regexes = [convert_glob_to_regex(p) for p in patterns]

    def glob_expression_param_filter(name: str, param: nn.Parameter) -> bool:
        return any(r.fullmatch(name) for r in regexes)

    return glob_expression_param_filter


__all__ = ["FilterCallable", "convert_glob_to_regex", "make_param_filter"]
