"""FakeData as torchvision's: a fixed random image per index, label 0-9."""

import torch


class FakeData(torch.utils.data.Dataset):
    def __init__(self, size=1000, image_size=(3, 224, 224), num_classes=10, transform=None):
        self.size, self.image_size, self.num_classes = size, image_size, num_classes
        self.transform = transform

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        g = torch.Generator().manual_seed(index)
        image = torch.rand(self.image_size, generator=g)
        target = int(torch.randint(0, self.num_classes, (1,), generator=g))
        return (self.transform(image) if self.transform else image), target
