"""Writes the run-option tables of the documentation from the schedulers' own option definitions.

    .venv/bin/python scripts/runopts_markdown.py           # rewrite the tables in docs/
    .venv/bin/python scripts/runopts_markdown.py --check   # exit 1 if a table is out of date

Each table sits between ``<!-- runopts:NAME -->`` and ``<!-- /runopts:NAME -->`` in a page of
``docs/`` (the scheduler pages, ``docs/schedulers/<name>.md``); NAME is a scheduler name.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from torchx_core.runner import get_runner

DOCS = Path(__file__).resolve().parent.parent / "docs"
_BLOCK = re.compile(r"(<!-- runopts:([a-z_]+) -->\n).*?(<!-- /runopts:\2 -->)", re.DOTALL)


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
    return _BLOCK.sub(lambda m: m.group(1) + table(m.group(2)) + "\n" + m.group(3), text)


def pages() -> dict[Path, str]:
    """Every page of ``docs/`` holding a runopts block, with its text."""
    found = {p: p.read_text() for p in sorted(DOCS.rglob("*.md"))}
    return {p: text for p, text in found.items() if _BLOCK.search(text)}


def main(argv: list[str]) -> int:
    stale = []
    for page, current in pages().items():
        wanted = render(current)
        if wanted == current:
            continue
        stale.append(str(page.relative_to(DOCS.parent)))
        if "--check" not in argv:
            page.write_text(wanted)
    if stale and "--check" in argv:
        print(
            f"run-option tables out of date in {', '.join(stale)}: run scripts/runopts_markdown.py"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
