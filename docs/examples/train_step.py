import torch
from torch import nn


def step_inputs(batch=64, device="cpu"):  # what step is called with, found by its name
    model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 10)).to(device)
    optimizer = torch.optim.AdamW(model.parameters())
    x, y = torch.randn(batch, 256, device=device), torch.randint(0, 10, (batch,), device=device)
    return model, optimizer, x, y


def step(model, optimizer, x, y):  # one training step: what memprof profiles
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
