"""Evaluates the Booth function and records it (the program of ``utils.booth``).

``python -m torchx_core.apps.utils.booth_main --x1 X --x2 Y [--trial_idx N] [--tracker_base URL]``:
the arguments of TorchX's ``torchx.apps.utils.booth_main``. As there, the result is
``FsspecResultTracker(tracker_base)[trial_idx]["booth_eval"]``.
"""

from __future__ import annotations

import argparse
import sys


def booth(x1: float, x2: float) -> float:
    """``(x1 + 2*x2 - 7)^2 + (2*x1 + x2 - 5)^2`` (minimum 0 at (1, 3)).

    >>> booth(1, 3)
    0
    """
    return (x1 + 2 * x2 - 7) ** 2 + (2 * x1 + x2 - 5) ** 2


def main(argv: list[str] | None = None) -> int:
    """Records ``{"booth_eval": f(x1, x2)}`` under key ``trial_idx`` of the tracker; returns 0."""
    parser = argparse.ArgumentParser(description="evaluate the Booth function at (x1, x2)")
    parser.add_argument("--x1", type=float, required=True)
    parser.add_argument("--x2", type=float, required=True)
    parser.add_argument("--trial_idx", type=int, default=0, help="trial index (HPO)")
    parser.add_argument(
        "--tracker_base", default="/tmp/torchx-util-booth", help="the result tracker's base URL"
    )
    args = parser.parse_args(argv)
    from torchx_core.runtime.tracking import FsspecResultTracker

    value = booth(args.x1, args.x2)
    FsspecResultTracker(args.tracker_base)[args.trial_idx] = {"booth_eval": value}
    print(f"booth({args.x1}, {args.x2}) = {value} -> {args.tracker_base} [{args.trial_idx}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
