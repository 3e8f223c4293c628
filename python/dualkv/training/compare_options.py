"""The flags of `python -m dualkv.training.compare` and their defaults.

This module imports argparse and nothing else, so that scripts/train_demo.sh can print them
(`--help`) without loading torch: it runs this file by its path.
"""

from __future__ import annotations

import argparse

DESCRIPTION = (
    "One GRPO/DAPO policy update of a tiny random-weight model on the CPU, on the packed batch and on "
    "the N-copy batch a standard trainer runs: both losses, gradient norms, the largest per-parameter "
    "gradient difference, the token reduction, then EQUAL or DIFFERENT (exit status 1)."
)


def parser() -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(
        prog="python -m dualkv.training.compare",
        description=DESCRIPTION,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    options.add_argument(
        "--model", default="tiny-qwen3", help="random-weight model shape (dualkv.training.models.MODEL_CONFIGS)"
    )
    options.add_argument("--groups", type=int, default=3, help="prompt groups")
    options.add_argument("--responses", type=int, default=8, help="responses per group N")
    options.add_argument("--prompt-length", type=int, default=256, help="prompt tokens P")
    options.add_argument(
        "--response-length", type=int, nargs=2, default=(16, 64), metavar=("MIN", "MAX"), help="response tokens R"
    )
    options.add_argument("--loss", choices=("grpo", "dapo"), default="dapo", help="policy loss")
    options.add_argument("--max-tokens", type=int, default=8192, help="packed tokens per micro-batch")
    options.add_argument("--seed", type=int, default=0, help="seed of the weights and rollouts")
    return options


if __name__ == "__main__":
    parser().parse_args()
