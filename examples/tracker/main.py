"""A training app that records its run through the tracker API (TorchX's tracker example, adapted).

TorchX's ``examples/apps/tracker/main.py`` trains on MNIST; this copy keeps its tracker calls and
its command line, and trains a tiny regression on synthetic data so it runs anywhere on CPU.
The only change a TorchX user makes is the import (``torchx.tracker`` -> ``torchx_core.tracker``).

Run it with trackers configured in ``.torchxconfig`` (see ``torchx_core.tracker``)::

    torchx run --wait utils.python --script examples/tracker/main.py -- --epochs 2 --save-model
    torchx tracker list metadata <app handle printed by run>
"""

from __future__ import annotations

import argparse
import os
import pathlib

import torch
import torch.nn.functional as F
from torch import nn, optim

from torchx_core import tracker


def _data(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    return x, x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="tracked tiny regression")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--gamma", type=float, default=0.7)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--save-model", action="store_true", default=False)
    parser.add_argument("--tb-log-path", type=str, default=None)
    parser.add_argument("--data-path", type=str, default="data")
    args = parser.parse_args(argv)

    torch.manual_seed(args.seed)
    model = nn.Linear(4, 1)
    optimizer = optim.SGD(model.parameters(), lr=args.lr)
    scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=args.gamma)
    os.makedirs(args.data_path, exist_ok=True)

    # the tracker calls of TorchX's example
    app_run = tracker.app_run_from_env()
    app_run.add_metadata(batch_size=args.batch_size)
    app_run.add_metadata(lr=args.lr, gamma=args.gamma)
    app_run.add_metadata(data_path=args.data_path)
    if args.tb_log_path:
        os.makedirs(args.tb_log_path, exist_ok=True)
        app_run.add_artifact("tensorboard", args.tb_log_path)

    x, y = _data(512, args.seed)
    loss = torch.tensor(0.0)
    for epoch in range(1, args.epochs + 1):
        for i in range(0, len(x), args.batch_size):
            optimizer.zero_grad()
            loss = F.mse_loss(model(x[i : i + args.batch_size]), y[i : i + args.batch_size])
            loss.backward()
            optimizer.step()
        scheduler.step()
        print(f"epoch {epoch} loss {loss.item():.4f}", flush=True)
    app_run.add_metadata(final_loss=round(loss.item(), 6))

    if args.save_model:
        torch.save(model.state_dict(), "model.pt")
        app_run.add_artifact("model", f"{pathlib.Path.cwd()}/model.pt", {"epochs": args.epochs})


if __name__ == "__main__":
    main()
