"""Builds cstorch_jax/native/gemm.cc, the BLAS GEMM behind an XLA FFI custom call (see
cstorch_jax/native/__init__.py). Everything else about the package is in pyproject.toml.

The handler needs only g++ and XLA's header-only FFI API, vendored under
cstorch_jax/native/third_party. It is optional: where it does not build, the install
goes on and cstorch uses XLA's own dot (a warning says so at the first compiled step).
"""
from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "cstorch_jax.native._gemm",
            sources=["cstorch_jax/native/gemm.cc"],
            include_dirs=["cstorch_jax/native/third_party"],
            extra_compile_args=["-O3", "-std=c++17", "-w"],
            language="c++",
            optional=True,
        )
    ],
)
