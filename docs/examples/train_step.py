import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(256, 1024)
        self.out = nn.Linear(1024, 10)

    def forward(self, x):
        return self.out(torch.relu(self.hidden(x)))


def step_inputs(batch=64, device="cpu"):
    """What `step` is called with: memprof finds `<function>_inputs` by its name."""
    model = Net().to(device)
    optimizer = torch.optim.AdamW(model.parameters())
    x = torch.randn(batch, 256, device=device)
    y = torch.randint(0, 10, (batch,), device=device)
    return model, optimizer, x, y


def step(model, optimizer, x, y):
    """One training step: what memprof profiles."""
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss.detach()
