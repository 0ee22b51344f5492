"""The optimizer algorithms, one module each (see `cstorch_jax.optim.spec`).

Importing this package imports every module in it, and each registers its algorithm
and public classes: adding an optimizer is adding one module here (and its test).
"""
import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
