"""The lab 03 training as a script: `torchrun --nproc_per_node=N -m lab_utils.torchrun_train` runs it unchanged."""
from __future__ import annotations

import argparse
import json

from . import ddp


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description="DDP training of the course CNN on the digits (run it under torchrun)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--global-batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    cfg = ddp.DDPConfig(epochs=args.epochs, global_batch=args.global_batch, lr=args.lr, seed=args.seed)
    ctx = ddp.setup(timeout_s=120)  # RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT come from torchrun
    try:
        result = ddp.run_ddp(ctx, cfg)
    except BaseException:
        ddp.teardown()
        raise
    ddp.teardown(wait_for_peers=True)
    if ctx.rank == 0:
        print(json.dumps({"world_size": ctx.world_size, "backend": ctx.backend, "device": ctx.device,
                          "test_accuracy": result["test_accuracy"], "samples_per_s": round(result["samples_per_s"], 1)}))


if __name__ == "__main__":
    main()
