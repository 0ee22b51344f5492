"""torchvision.transforms' Compose, ToTensor, Normalize and Lambda (package doc)."""
import numpy as np
import torch


class Compose:
    def __init__(self, transforms):
        self.transforms = list(transforms)

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x


class ToTensor:
    """HxW or HxWxC uint8 array -> CxHxW float32 tensor in [0, 1]."""

    def __call__(self, pic):
        array = np.asarray(pic)
        if array.ndim == 2:
            array = array[:, :, None]
        tensor = torch.from_numpy(np.ascontiguousarray(array.transpose(2, 0, 1)))
        return tensor.to(torch.float32).div(255) if array.dtype == np.uint8 else tensor.to(torch.float32)


class Normalize:
    """(x - mean[c]) / std[c] per channel c of a CxHxW tensor."""

    def __init__(self, mean, std):
        self.mean, self.std = mean, std

    def __call__(self, tensor):
        mean = torch.as_tensor(self.mean, dtype=tensor.dtype).view(-1, 1, 1)
        std = torch.as_tensor(self.std, dtype=tensor.dtype).view(-1, 1, 1)
        return (tensor - mean) / std


class Lambda:
    def __init__(self, lambd):
        self.lambd = lambd

    def __call__(self, x):
        return self.lambd(x)
