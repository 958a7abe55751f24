#!/usr/bin/env python3
"""Run Megatron-LM's own parse_args() and validate_args() on a rendered launch.

Usage: megatron_validate.py MEGATRON_DIR WORLD_SIZE -- <Megatron flags as rendered>
Prints "ok" and exits 0 when Megatron accepts them; otherwise Megatron's error and exit 1.
Needs PyTorch 2.x (Megatron imports torch.distributed.checkpoint); the C++ test skips when it
is missing. Rank 0's view: RANK=0, LOCAL_RANK=0, WORLD_SIZE as given (no GPU is touched:
validate_args only checks the arguments).
"""
import os
import sys


def main():
    root, world = sys.argv[1], sys.argv[2]
    assert sys.argv[3] == "--", "usage: megatron_validate.py DIR WORLD -- FLAGS..."
    os.environ["WORLD_SIZE"] = world
    os.environ["RANK"] = "0"
    os.environ["LOCAL_RANK"] = "0"
    sys.path.insert(0, root)
    sys.argv = ["pretrain_gpt.py"] + sys.argv[4:]
    from megatron.training.arguments import parse_args, validate_args
    args = parse_args()
    validate_args(args, {})
    print("ok")


if __name__ == "__main__":
    main()
