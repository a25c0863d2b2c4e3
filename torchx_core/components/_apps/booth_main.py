"""``python -m torchx_core.components._apps.booth_main``: evaluate the Booth function, save it."""

from __future__ import annotations

import argparse
import json
import sys


def booth(x1: float, x2: float) -> float:
    """``(x1 + 2*x2 - 7)^2 + (2*x1 + x2 - 5)^2`` (minimum 0 at (1, 3))."""
    return (x1 + 2 * x2 - 7) ** 2 + (2 * x1 + x2 - 5) ** 2


def main(argv: list[str] | None = None) -> int:
    """Writes ``{"booth_eval": f(x1, x2), ...}`` to ``{tracker_base}/{trial_idx}/result.json``."""
    parser = argparse.ArgumentParser(description="evaluate the Booth function")
    parser.add_argument("--x1", type=float, required=True)
    parser.add_argument("--x2", type=float, required=True)
    parser.add_argument("--trial_idx", type=int, default=0)
    parser.add_argument("--tracker_base", default="/tmp/torchx-util-booth")
    args = parser.parse_args(argv)
    import fsspec

    value = booth(args.x1, args.x2)
    url = f"{args.tracker_base.rstrip('/')}/{args.trial_idx}/result.json"
    with fsspec.open(url, "w", auto_mkdir=True) as f:
        json.dump({"booth_eval": value, "x1": args.x1, "x2": args.x2}, f)
    print(f"booth({args.x1}, {args.x2}) = {value} -> {url}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
