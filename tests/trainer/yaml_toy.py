"""The model and data processor the YAML tests name (`toy.py:Toy`, `toy.py:ToyData`):
the `toy_dir` fixture (conftest.py) copies this file to `<tmp>/toy.py`, where a YAML's
file-relative names find it."""
import torch


class Toy(torch.nn.Module):
    def __init__(self, width: int = 4):
        super().__init__()
        self.lin = torch.nn.Linear(width, 1)
        self.norm = torch.nn.LayerNorm(width)

    def forward(self, batch):
        x, y = batch
        return torch.nn.functional.mse_loss(self.lin(self.norm(x)).squeeze(-1), y)


class ToyData:
    """`num_batches` batches of (x, sum of x), seeded."""

    def __init__(self, batch_size: int = 4, split: str = "train", shuffle: bool = False, seed: int = 0,
                 width: int = 4, num_batches: int = 4):
        self.batch_size, self.shuffle, self.seed = batch_size, shuffle, seed
        self.width, self.num_batches = width, num_batches

    def create_dataloader(self):
        g = torch.Generator().manual_seed(self.seed)
        x = torch.randn(self.batch_size * self.num_batches, self.width, generator=g)
        return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x.sum(-1)),
                                           batch_size=self.batch_size, drop_last=True)
