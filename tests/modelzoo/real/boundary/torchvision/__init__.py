"""The data boundary of the real fc_mnist data processor, for tests: the two torchvision
modules `fc_mnist/data.py` imports (`from torchvision import datasets, transforms`).

torchvision is not a dependency of cstorch, and its PyPI wheels are built against
torch's CUDA build (with the CPU torch of this project its import fails registering its
C++ operators), so the tests put this package first on PYTHONPATH instead. It replaces
only what sits at the data boundary: `datasets.MNIST` serves scikit-learn's bundled
8x8 digits scaled up to 28x28 (the download of MNIST replaced by local data), and
`transforms` has the four transforms `data.py` composes, with torchvision's semantics
(`ToTensor`: HxW uint8 -> 1xHxW float in [0, 1]; `Normalize`: (x - mean) / std per
channel; `Compose`; `Lambda`)."""
from . import datasets, transforms  # noqa: F401

__version__ = "0.0+cstorch.tests.boundary"
