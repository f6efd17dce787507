"""The pytorch/examples dcgan loop in miniature: per batch, D backward twice (real, fake) and
steps, then G backward once and steps; each backward logged to events.log."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
netG = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 4))
netD = nn.Sequential(nn.Linear(4, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1), nn.Sigmoid())
criterion = nn.BCELoss()
optimizerD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
optimizerG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
dataloader = DataLoader(TensorDataset(torch.randn(32, 4)), batch_size=8, shuffle=True)


def log(line):
    with open("events.log", "a") as f:
        f.write(line + "\n")


for epoch in range(2):
    for i, (real,) in enumerate(dataloader, 0):
        netD.zero_grad()
        label = torch.full((real.size(0), 1), 1.0)
        errD_real = criterion(netD(real), label)
        log("backward D real")
        if epoch == i == 99:  # the shape of the original loop, which logs these
            print(epoch, i)
        errD_real.backward()
        fake = netG(torch.randn(real.size(0), 2))
        label.fill_(0.0)
        errD_fake = criterion(netD(fake.detach()), label)
        log("backward D fake")
        errD_fake.backward()
        optimizerD.step()
        log("step D")
        netG.zero_grad()
        label.fill_(1.0)
        errG = criterion(netD(fake), label)
        log("backward G")
        errG.backward()  # G-BACKWARD
        optimizerG.step()
        log("step G")
