"""torchvision.datasets.MNIST over local data (package doc): scikit-learn's 1797 8x8
digits, scaled to 28x28 uint8 images, split 80/20 (fixed, stratified) into train
(`train=True`) and test. Items are `(image HxW uint8 array, int label)` passed through
`transform` / `target_transform`, as torchvision's MNIST gives a PIL image and an int.
Nothing is downloaded: `download` is accepted and has nothing to fetch."""
import functools

import numpy as np
import torch
import torch.nn.functional as F


@functools.lru_cache(maxsize=None)
def _split(train: bool):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    images = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
    images = F.interpolate(images, size=(28, 28), mode="bilinear", align_corners=False)
    images = (images.clamp(0, 1) * 255).round().to(torch.uint8).squeeze(1).numpy()
    train_idx, test_idx = train_test_split(np.arange(len(digits.target)), test_size=0.2, random_state=0,
                                           stratify=digits.target)
    idx = train_idx if train else test_idx
    return images[idx], digits.target[idx].astype(np.int64)


class MNIST(torch.utils.data.Dataset):
    def __init__(self, root, train=True, transform=None, target_transform=None, download=False):
        self.root, self.train = root, train
        self.transform, self.target_transform = transform, target_transform
        self.data, self.targets = _split(bool(train))

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, index):
        image, target = self.data[index], int(self.targets[index])
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return image, target
