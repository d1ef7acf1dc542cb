"""A small transformer training step (AdamW), the workload of ``transformer-step.json``.

Regenerate the report (eager vs compiled, CPU) from this folder with:

    memprof run transformer_step.py:step --compare-compile --json transformer-step.json

then shorten its timelines as ``tests/test_terminal.py`` says (the file keeps 200 points per run).
"""

import torch
from torch import nn

WIDTH, HEADS, LAYERS, TOKENS, BATCH, VOCAB = 128, 4, 2, 64, 8, 1000


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, WIDTH)
        layer = nn.TransformerEncoderLayer(WIDTH, HEADS, 4 * WIDTH, batch_first=True, dropout=0.0)
        self.encoder = nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(self.embedding(tokens)))


def step(model: Model, optimizer: torch.optim.Optimizer, tokens: torch.Tensor, targets: torch.Tensor):
    optimizer.zero_grad(set_to_none=True)
    loss = nn.functional.cross_entropy(model(tokens).flatten(0, 1), targets.flatten())
    loss.backward()
    optimizer.step()
    return loss.detach()


def step_inputs():
    torch.manual_seed(0)
    model = Model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = torch.randint(0, VOCAB, (BATCH, TOKENS))
    targets = torch.randint(0, VOCAB, (BATCH, TOKENS))
    return model, optimizer, tokens, targets
