"""Which nn.Module each ATen op of a captured step comes from.

While a step is traced, `record_module_paths()` keeps a stack of the modules whose
forward is running (global forward hooks). A module's path is the root module's class
name followed by the attribute names leading to it (`GPT2LMHeadModel.transformer.h.0.attn`).
When a forward returns, every autograd node created inside it, and not already claimed
by an inner module, is labelled with its path, so ops run by the backward pass are
attributed to the module whose forward they differentiate.

Each traced node gets `meta["nn_module_stack"] = {path: (path, class name)}` (innermost
module only) and, for backward ops, `meta["custom"]["cstorch_backward"] = True`: fields that
torch.fx copies from the current node metadata onto every node it creates in every supported
release (torch's own `autograd_backward` is copied only from 2.13 on), so the ops that
functionalization and the decompositions derive from an op (below the tagging mode, while
it dispatches) carry its tags.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import torch
import torch.fx.traceback as fx_traceback
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode


def _tensors(value) -> list[torch.Tensor]:
    """The tensors in a module's output (nested containers; transformers registers its
    ModelOutput classes with torch's pytree)."""
    return [t for t in pytree.tree_leaves(value) if isinstance(t, torch.Tensor)]


class _ModuleStack:
    def __init__(self) -> None:
        self.stack: list[tuple[torch.nn.Module, str]] = []
        self.grad_fn_paths: dict = {}
        self.names: dict[tuple[int, int], str | None] = {}

    def _name_under(self, module: torch.nn.Module) -> str:
        """Path of `module` below the innermost running module that owns it (a container
        such as ModuleList is owned, not called); its class name if none does."""
        for owner, owner_path in reversed(self.stack):
            key = (id(owner), id(module))
            if key not in self.names:
                self.names[key] = next((n for n, m in owner.named_modules() if m is module and n), None)
            if self.names[key] is not None:
                return f"{owner_path}.{self.names[key]}"
        return type(module).__name__

    def enter(self, module: torch.nn.Module, *_) -> None:
        self.stack.append((module, self._name_under(module)))

    def leave(self, module: torch.nn.Module, _args, output) -> None:
        if not self.stack or self.stack[-1][0] is not module:
            return
        _, path = self.stack.pop()
        todo = [t.grad_fn for t in _tensors(output) if t.grad_fn is not None]
        while todo:
            node = todo.pop()
            if node is None or node in self.grad_fn_paths:
                continue
            self.grad_fn_paths[node] = (path, type(module).__name__)
            todo.extend(fn for fn, _ in node.next_functions)

    def current(self) -> tuple[tuple[str, str] | None, bool]:
        """((path, class name) of the op being traced, whether it runs in backward)."""
        if self.stack:
            module, path = self.stack[-1]
            return (path, type(module).__name__), False
        node = torch._C._current_autograd_node()
        if node is not None:
            return self.grad_fn_paths.get(node), True
        return None, False


BACKWARD = "cstorch_backward"  # key in meta["custom"]: the op runs in the backward pass


class _TagOps(TorchDispatchMode):
    supports_higher_order_operators = True  # a higher-order op (torch.cond) is tagged like any op

    def __init__(self, modules: _ModuleStack) -> None:
        super().__init__()
        self.modules = modules

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        meta = fx_traceback.get_current_meta()
        where, backward = self.modules.current()
        if where is None:
            meta.pop("nn_module_stack", None)
        else:
            meta["nn_module_stack"] = {where[0]: where}
        custom = {k: v for k, v in meta.get("custom", {}).items() if k != BACKWARD}  # a new dict: nodes hold copies
        if backward:
            custom[BACKWARD] = True
        if custom:
            meta["custom"] = custom
        else:
            meta.pop("custom", None)
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def record_module_paths() -> Iterator[None]:
    """While a step is traced: tag every traced op with the module it comes from."""
    modules = _ModuleStack()
    pre = torch.nn.modules.module.register_module_forward_pre_hook(modules.enter)
    post = torch.nn.modules.module.register_module_forward_hook(modules.leave)
    try:
        with fx_traceback.preserve_node_meta(), _TagOps(modules):
            yield
    finally:
        pre.remove()
        post.remove()


def module_path(node: torch.fx.Node) -> str | None:
    """`path` or `path (backward)` of the module a node comes from, if known."""
    stack = node.meta.get("nn_module_stack")
    if not stack:
        return None
    path = next(reversed(stack.values()))[0]
    return f"{path} (backward)" if node.meta.get("custom", {}).get(BACKWARD) else path
