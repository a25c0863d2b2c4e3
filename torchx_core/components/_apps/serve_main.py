"""``python -m torchx_core.components._apps.serve_main``: register a model with TorchServe."""

from __future__ import annotations

import argparse
import sys
import urllib.error
import urllib.parse
import urllib.request


def registration_url(management_api: str, model_path: str, params: list[str]) -> str:
    """The ``POST /models`` URL registering ``model_path`` with ``params`` (``k=v`` strings)."""
    query: list[tuple[str, str]] = [("url", model_path)]
    for item in params:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--param {item!r} is not key=value")
        query.append((key, value))
    return f"{management_api.rstrip('/')}/models?{urllib.parse.urlencode(query)}"


def main(argv: list[str] | None = None) -> int:
    """Registers the model; returns the exit code."""
    parser = argparse.ArgumentParser(description="register a model with TorchServe")
    parser.add_argument("--model_path", required=True)
    parser.add_argument("--management_api", required=True)
    parser.add_argument("--param", action="append", default=[], help="key=value (repeatable)")
    parser.add_argument("--dryrun", action="store_true")
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args(argv)
    try:
        url = registration_url(args.management_api, args.model_path, args.param)
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    if args.dryrun:
        print(f"POST {url}")
        return 0
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, method="POST"), timeout=args.timeout
        ) as r:
            print(r.read().decode("utf-8", "replace"))
    except (urllib.error.URLError, OSError) as e:
        print(
            f"registering {args.model_path} at {args.management_api} failed: {e}", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
