"""Copies one file (fsspec).

``python -m torchx_core.components._apps.copy_main --src URL --dst URL``
"""

from __future__ import annotations

import argparse
import shutil
import sys


def main(argv: list[str] | None = None) -> int:
    """Copies ``--src`` to ``--dst`` (any fsspec URLs); returns the exit code."""
    parser = argparse.ArgumentParser(description="copy a file between fsspec URLs")
    parser.add_argument("--src", required=True, help="source URL")
    parser.add_argument("--dst", required=True, help="destination URL")
    args = parser.parse_args(argv)
    import fsspec

    try:
        with (
            fsspec.open(args.src, "rb") as src,
            fsspec.open(args.dst, "wb", auto_mkdir=True) as dst,
        ):
            shutil.copyfileobj(src, dst, length=1 << 20)
    except (OSError, ValueError) as e:
        print(f"copy {args.src} -> {args.dst} failed: {e}", file=sys.stderr)
        return 1
    print(f"copied {args.src} -> {args.dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
