"""Copies one file between fsspec URLs (the program of ``utils.copy``).

``python -m torchx_core.apps.utils.copy_main --src URL --dst URL [--bufsize N]``: the arguments
of TorchX's ``torchx.apps.utils.copy_main``.
"""

from __future__ import annotations

import argparse
import shutil
import sys


def main(argv: list[str] | None = None) -> int:
    """Copies ``--src`` to ``--dst`` (any fsspec URLs, parent directories created).

    Returns the exit code: 0, or 1 (with the reason on stderr) when the copy fails.
    """
    parser = argparse.ArgumentParser(description="copy a file between fsspec URLs")
    parser.add_argument("--src", required=True, help="source URL")
    parser.add_argument("--dst", required=True, help="destination URL")
    parser.add_argument("--bufsize", type=int, default=1 << 20, help="bytes copied per read")
    args = parser.parse_args(argv)
    import fsspec

    try:
        with (
            fsspec.open(args.src, "rb") as src,
            fsspec.open(args.dst, "wb", auto_mkdir=True) as dst,
        ):
            shutil.copyfileobj(src, dst, length=args.bufsize)
    except (OSError, ValueError) as e:
        print(f"copy {args.src} -> {args.dst} failed: {e}", file=sys.stderr)
        return 1
    print(f"copied {args.src} -> {args.dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
