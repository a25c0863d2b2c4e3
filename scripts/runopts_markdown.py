"""Writes the run-option tables of the README from the schedulers' own option definitions.

    .venv/bin/python scripts/runopts_markdown.py           # rewrite the tables in README.md
    .venv/bin/python scripts/runopts_markdown.py --check   # exit 1 if README.md is out of date

Each table sits between ``<!-- runopts:NAME -->`` and ``<!-- /runopts:NAME -->`` in README.md.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from torchx_core.runner import get_runner

README = Path(__file__).resolve().parent.parent / "README.md"
SCHEDULERS = ("local_cwd", "slurm", "lsf")


def table(scheduler: str) -> str:
    """The markdown table of ``scheduler``'s run options."""
    with get_runner("docs") as runner:
        opts = runner.scheduler_run_opts(scheduler)
    rows = ["| option | type | default | help |", "| --- | --- | --- | --- |"]
    for name, opt in opts:
        generic = getattr(opt.opt_type, "__args__", None)  # list[str] -> "list[str]", not "list"
        type_name = (
            str(opt.opt_type) if generic else getattr(opt.opt_type, "__name__", str(opt.opt_type))
        )
        default = "required" if opt.is_required else f"`{opt.default}`"
        help_text = " ".join(opt.help.split()).replace("|", "\\|")
        rows.append(f"| `{name}` | {type_name} | {default} | {help_text} |")
    return "\n".join(rows)


def render(text: str) -> str:
    """``text`` with every runopts block regenerated."""
    for name in SCHEDULERS:
        pattern = re.compile(
            rf"(<!-- runopts:{name} -->\n).*?(<!-- /runopts:{name} -->)", re.DOTALL
        )
        if not pattern.search(text):
            raise SystemExit(f"README.md has no <!-- runopts:{name} --> block")
        text = pattern.sub(lambda m, n=name: m.group(1) + table(n) + "\n" + m.group(2), text)
    return text


def main(argv: list[str]) -> int:
    current = README.read_text()
    wanted = render(current)
    if "--check" in argv:
        if wanted != current:
            print("README.md run-option tables are out of date: run scripts/runopts_markdown.py")
            return 1
        return 0
    README.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
