"""The fenced code blocks of README.md and docs/**/*.md, and the markers that say which are not
run by the docs' own runner (tests/docrun.py).

A page is a session: its ```bash and ```python blocks run in order. Every fence names its
language, so a command cannot slip past as an unlabelled block; ``sh``, ``shell``,
``console`` and ``py`` are refused (write ``bash`` or ``python``, or ``text`` for output).

The line right before a fence may carry one marker:

- ``<!-- not run: <why> -->``: what cannot run on one machine (several hosts, Kubernetes,
  a spark-submit to a remote master); the reason is required.
- ``<!-- run by tests/<file>.py::<test> -->``: a test that runs the block itself, checking
  more than its exit status; that test reads the block through :func:`blocks_run_by`, so the
  marker and the test cannot part without one of them failing.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN = ("bash", "python")
NOT_CODE = ("text", "toml", "yaml", "json", "java", "mermaid")  # shown, never run here
# The pages whose blocks start Spark: run by tests/spark/test_docs_blocks.py, one JVM each.
SPARK_PAGES = ("README.md", "docs/spark/index.md", "docs/spark/stateful.md")
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_MARKER = re.compile(r"^\s*<!--\s*(?P<kind>not run|run by)\b:?(?P<rest>.*?)-->\s*$")
_COMMENT = re.compile(r"^\s*<!--.*-->\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced block: its page (relative to the repository), the line of its opening
    fence, its language, its text (dedented, as a user copies it) and its marker."""

    page: str
    line: int
    lang: str
    text: str
    marker: str = ""  # "", "not run" or "run by"
    note: str = ""  # the reason (not run) or the test id (run by)
    comment_before: str = ""  # a one-line HTML comment right before the fence that is no marker

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def runs_here(self) -> bool:
        return self.lang in RUN and not self.marker


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def page_blocks(page: Path) -> list[Block]:
    lines = page.read_text().splitlines()
    name = str(page.relative_to(ROOT))
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        fence, indent = opening["fence"], opening["indent"]
        end = index + 1
        closing = re.compile(re.escape(fence[0]) + "{" + str(len(fence)) + ",}")
        while end < len(lines) and not closing.fullmatch(lines[end].strip()):
            end += 1
        assert end < len(lines), f"{name}:{index + 1}: a fence that is never closed"
        body = "\n".join(line.removeprefix(indent) for line in lines[index + 1 : end])
        before = lines[index - 1] if index else ""
        marker = _MARKER.match(before)
        found.append(
            Block(
                page=name,
                line=index + 1,
                lang=(opening["info"].split() or [""])[0],
                text=textwrap.dedent(body) + "\n",
                marker=marker["kind"] if marker else "",
                note=marker["rest"].strip() if marker else "",
                comment_before=before.strip() if not marker and _COMMENT.match(before) else "",
            )
        )
        index = end + 1
    return found


def all_blocks() -> list[Block]:
    return [block for page in pages() for block in page_blocks(page)]


def runnable_pages(*, spark: bool) -> list[str]:
    """The pages with a block the runner runs: the Spark pages, or every other one."""
    names = sorted({block.page for block in all_blocks() if block.runs_here})
    return [name for name in names if (name in SPARK_PAGES) == spark]


def blocks_run_by(test_id: str) -> list[Block]:
    """The blocks whose marker names ``test_id`` (``tests/integration/test_cli.py::test_x``)."""
    return [block for block in all_blocks() if block.marker == "run by" and block.note.split()[0] == test_id]


def names_a_test(test_id: str) -> bool:
    """Whether ``path::name`` names a test function defined in that file."""
    path, _, name = test_id.partition("::")
    file = ROOT / path
    if not name or not file.is_file():
        return False
    tree = ast.parse(file.read_text())
    return any(isinstance(node, ast.FunctionDef) and node.name == name for node in tree.body)


def logical_lines(script: str) -> list[str]:
    """A shell script's lines with backslash continuations joined, as bash reads them."""
    joined: list[str] = []
    pending = ""
    for line in script.splitlines():
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        joined.append(pending + line)
        pending = ""
    if pending:
        joined.append(pending)
    return joined
