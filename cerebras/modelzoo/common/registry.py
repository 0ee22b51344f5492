"""`cerebras.modelzoo.common.registry.registry`: where Model Zoo 2.0-2.3 code imports the
registry from; the same object as `cerebras.modelzoo.registry.registry`."""
from cerebras.modelzoo.registry import Registry, registry

__all__ = ["registry", "Registry"]
