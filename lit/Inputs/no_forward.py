"""Writes scripted modules that have a method but no forward, one file per
path on the command line."""
import sys

import torch


class NoForward(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 2)

    @torch.jit.export
    def predict(self, x):
        return self.fc(x)


for path in sys.argv[1:]:
    torch.jit.save(torch.jit.script(NoForward()), path)
