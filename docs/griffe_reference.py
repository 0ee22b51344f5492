"""A griffe extension for the API reference (mkdocs.yml loads it into mkdocstrings): what the
reference shows of a class is its signature, its documented parameters and its documented
members, never lines of its implementation.

What it changes in the objects griffe reads from the source, package by package:

- Instance attributes without a docstring (``self.x = ...`` in a method) are dropped: they are
  the implementation's state, not documented API. An attribute documented with a docstring
  (a string literal after the assignment) stays, and so do the fields a class body declares.
  It runs after griffe's dataclasses extension (mkdocs.yml lists that one first), which
  reads the fields' defaults from their values.
- Attribute values that are not literals (``initial_val = _alias(...)``, ``backend =
  _backend.current_backend_impl()``) are not shown; a literal (a number, a string, ``None``,
  a tuple of them) is. An undocumented class attribute whose live value is a property with a
  docstring (an alias made by a helper) gets that docstring.
- Classes that exist only at run time (the built-in optimizers of ``cstorch.optim``, made by
  ``build_optimizer_class``; the loss classes ``_torch_loss`` makes), which griffe reads as
  module attributes or not at all, are added from the live objects (of the modules already
  imported): their docstring and the signature of their ``__init__``.
- A class whose constructor griffe cannot see (inherited from ``object`` or from a class
  outside the loaded packages), or whose ``__init__`` takes only ``*args, **kwargs`` while
  its ``__new__`` names the arguments, gets the live class's signature as its ``__init__``.
- A dataclass field whose default is made by a private helper (``num_csx: int =
  _IntAtLeast(1, 0)``, a validating descriptor) shows the value a default-constructed
  instance holds (``1``).
- A constructor parameter that a class's own docstring does not describe takes the
  description of the same-named parameter of the nearest base class that describes it (the
  weight-decay schedulers pass theirs through to the closed-form schedulers).
"""
from __future__ import annotations

import ast
import enum
import inspect
import re
import sys

import griffe
from griffe import (Attribute, Class, Docstring, DocstringParameter, DocstringSectionParameters, Function,
                    Parameter, ParameterKind, Parameters)

_KINDS = {
    inspect.Parameter.POSITIONAL_ONLY: ParameterKind.positional_only,
    inspect.Parameter.POSITIONAL_OR_KEYWORD: ParameterKind.positional_or_keyword,
    inspect.Parameter.VAR_POSITIONAL: ParameterKind.var_positional,
    inspect.Parameter.KEYWORD_ONLY: ParameterKind.keyword_only,
    inspect.Parameter.VAR_KEYWORD: ParameterKind.var_keyword,
}
#: module prefixes left out of annotations read from live objects (`torch.Tensor` -> `Tensor`)
_PREFIXES = re.compile(r"\b(?:collections\.abc|typing|torch\.nn\.modules\.module|torch|builtins)\.")


def _is_literal(value) -> bool:
    """Whether an attribute's value (as griffe holds it: an expression or its source text) is
    a literal worth showing."""
    try:
        ast.literal_eval(str(value))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False
    return True


def _live(path: str):
    try:
        return griffe.dynamic_import(path)
    except Exception:  # noqa: BLE001  (an object griffe found that cannot be imported: leave it as read)
        return None


def _annotation(annotation) -> str | None:
    if annotation is inspect.Parameter.empty:
        return None
    text = annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)
    return _PREFIXES.sub("", text)


def _init_from_signature(cls: Class, signature: inspect.Signature) -> Function:
    """An `__init__` for `cls` whose parameters are `signature`'s (the live class's)."""
    parameters = [Parameter("self", kind=ParameterKind.positional_or_keyword)]
    for p in signature.parameters.values():
        if p.name == "self":
            continue
        default = None if p.default is inspect.Parameter.empty else _PREFIXES.sub("", repr(p.default))
        parameters.append(Parameter(p.name, annotation=_annotation(p.annotation), kind=_KINDS[p.kind],
                                    default=default))
    init = Function("__init__", parameters=Parameters(*parameters), parent=cls)
    init.labels.add("instance-method")
    return init


def _runtime_class(module: griffe.Module, name: str, live: type) -> Class:
    """A griffe class for a class that exists only at run time: its docstring, bases and
    `__init__` signature, read from the live class."""
    bases = [b.__qualname__ if b.__module__.startswith(("cstorch", "cerebras")) else f"{b.__module__}.{b.__qualname__}"
             for b in live.__bases__]
    cls = Class(name, parent=module, bases=bases)
    if live.__doc__:
        cls.docstring = Docstring(inspect.cleandoc(live.__doc__), parent=cls, parser=module.docstring.parser
                                  if module.docstring else "google",
                                  parser_options=module.docstring.parser_options if module.docstring else {})
    cls.set_member("__init__", _init_from_signature(cls, inspect.signature(live.__init__)))
    return cls


def _documented(sections) -> dict[str, DocstringParameter]:
    found = {}
    for section in sections:
        if isinstance(section, DocstringSectionParameters):
            found.update((p.name.lstrip("*"), p) for p in section.value)
    return found


def _parameter_docs(cls: Class) -> dict[str, DocstringParameter]:
    """The constructor parameters `cls`'s own docstring and `__init__` docstring describe."""
    found = _documented(cls.docstring.parsed) if cls.docstring else {}
    init = cls.members.get("__init__")
    if init is not None and not init.is_alias and init.docstring:
        found.update(_documented(init.docstring.parsed))
    return found


class ReferenceExtension(griffe.Extension):
    """See the module's docstring."""

    def on_package(self, *, pkg: griffe.Module, **kwargs) -> None:
        if pkg.name not in ("cstorch", "cstorch_jax", "cerebras", "cerebras_pytorch"):
            return
        self._add_runtime_classes(pkg)
        for module in self._modules(pkg):
            self._clean_members(module)
        classes = list(self._classes(pkg))
        for cls in classes:
            self._clean_members(cls)
        for cls in classes:
            self._add_missing_init(cls)
            self._show_live_defaults(cls)
        for cls in classes:
            self._inherit_parameter_docs(cls)

    def _modules(self, obj):
        yield obj
        for member in list(obj.members.values()):
            if not member.is_alias and member.is_module:
                yield from self._modules(member)

    def _classes(self, obj):
        for member in list(obj.members.values()):
            if member.is_alias:
                continue
            if member.is_class:
                yield member
                yield from self._classes(member)
            elif member.is_module:
                yield from self._classes(member)

    def _add_runtime_classes(self, module: griffe.Module) -> None:
        """Classes made at run time: a name of `module` whose live value is a class made
        there under that name (by `type()` or a class factory), which griffe reads as an
        attribute or not at all, becomes a class."""
        live_module = sys.modules.get(module.path)
        if live_module is not None:
            names = set(getattr(live_module, "__all__", ())) | set(module.members)
            for name in sorted(names):
                member = module.members.get(name)
                if member is not None and (member.is_alias or not isinstance(member, Attribute)):
                    continue
                live = getattr(live_module, name, None)
                if inspect.isclass(live) and live.__module__ == module.path and live.__qualname__ == name:
                    module.set_member(name, _runtime_class(module, name, live))
        for member in list(module.members.values()):
            if not member.is_alias and member.is_module:
                self._add_runtime_classes(member)

    def _clean_members(self, cls) -> None:
        """Drops and hides what the module's docstring says, in a class or a module."""
        live = None
        methods = [m for m in cls.members.values() if not m.is_alias and m.is_function and m.lineno]
        for name, member in list(cls.members.items()):
            if member.is_alias or not isinstance(member, Attribute):
                continue
            in_method = member.lineno and any(m.lineno <= member.lineno <= (m.endlineno or m.lineno)
                                              for m in methods)
            if in_method and "class-attribute" not in member.labels and not member.docstring:
                cls.del_member(name)
                continue
            if member.value is not None and not _is_literal(member.value):
                member.value = None
            if not member.docstring and "class-attribute" in member.labels:
                live = live if live is not None else _live(cls.path)
                value = inspect.getattr_static(live, name, None) if live is not None else None
                if isinstance(value, property) and value.__doc__:
                    member.docstring = Docstring(value.__doc__, parent=member, parser=self._parser(cls),
                                                 parser_options=self._parser_options(cls))
                    member.labels -= {"class-attribute", "instance-attribute"}
                    member.labels.add("property")

    def _add_missing_init(self, cls: Class) -> None:
        try:
            members = cls.all_members
        except Exception:  # noqa: BLE001  (a base griffe cannot resolve: judge by the class's own members)
            members = cls.members
        init = members.get("__init__")
        if init is not None and not init.is_alias and any(
                p.kind not in (ParameterKind.var_positional, ParameterKind.var_keyword)
                for p in init.parameters if p.name != "self"):
            return  # griffe reads a constructor with named parameters
        if init is not None and init.is_alias:
            return  # inherited from a class griffe reads
        live = _live(cls.path)
        if live is None or not inspect.isclass(live) or issubclass(live, (enum.Enum, BaseException)) \
                or getattr(live, "_is_protocol", False) or any(
                    f"{b.__module__}.{b.__qualname__}" == "torch.autograd.function.Function" for b in live.__mro__):
            return  # not constructed: an enum, a protocol, an autograd Function (`apply`); an exception takes *args
        try:
            signature = inspect.signature(live)
        except (TypeError, ValueError):
            return
        if init is not None and all(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in signature.parameters.values()):
            return  # the live class takes `*args, **kwargs` too
        made = _init_from_signature(cls, signature)
        if init is not None:
            made.docstring = init.docstring
        cls.set_member("__init__", made)

    def _show_live_defaults(self, cls: Class) -> None:
        init = cls.members.get("__init__")
        if init is None or init.is_alias:
            return
        private = [p for p in init.parameters if p.default is not None and re.match(r"_\w*\(", str(p.default))]
        if not private:
            return
        live = _live(cls.path)
        try:
            instance = live()
        except Exception:  # noqa: BLE001  (it needs arguments: leave the defaults as written)
            return
        for p in private:
            p.default = repr(getattr(instance, p.name))

    def _inherit_parameter_docs(self, cls: Class) -> None:
        try:
            init = cls.all_members.get("__init__")
            mro = cls.mro()
        except Exception:  # noqa: BLE001
            return
        if init is None or cls.docstring is None:
            return
        try:
            names = [p.name for p in init.parameters if p.name not in ("self", "cls")]
        except Exception:  # noqa: BLE001
            return
        own = _parameter_docs(cls)
        missing = [n for n in names if n not in own]
        if not missing:
            return
        inherited = {}
        for base in mro:
            if not base.docstring:
                continue
            docs = _parameter_docs(base)
            for name in missing:
                if name in docs and name not in inherited:
                    inherited[name] = docs[name]
        if not inherited:
            return
        sections = cls.docstring.parsed
        params = next((s for s in sections if isinstance(s, DocstringSectionParameters)), None)
        if params is None:
            params = DocstringSectionParameters([])
            sections.insert(1 if sections and sections[0].kind.value == "text" else 0, params)
        signature = {p.name: p for p in init.parameters}
        for name in names:  # in the signature's order
            if name in inherited:
                doc = inherited[name]
                p = signature[name]
                params.value.append(DocstringParameter(doc.name, description=doc.description,
                                                       annotation=p.annotation, value=p.default))
        order = {n: i for i, n in enumerate(names)}
        params.value.sort(key=lambda p: order.get(p.name.lstrip("*"), len(order)))

    @staticmethod
    def _parser(cls: Class):
        return cls.docstring.parser if cls.docstring else "google"

    @staticmethod
    def _parser_options(cls: Class):
        return cls.docstring.parser_options if cls.docstring else {}
