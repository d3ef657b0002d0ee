"""The documentation's pages as data for the tests: their fenced code blocks, and running a tutorial's blocks as
written in a fresh folder (files from the blocks with a ``title``, commands from the ``bash`` blocks), with the
vendors' URLs pointed at the simulator. A block preceded by ``<!-- not run: REASON -->`` is shown, not run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.locust_runs import ROOT, clean_env

DOCS = ROOT / "docs"
TUTORIALS = DOCS / "tutorials"
_FENCE = re.compile(r'^```(\w*)(?:\s+title="([^"]+)")?\s*$')
_NOT_RUN = re.compile(r"^<!-- not run: (.+) -->$")


@dataclass(frozen=True)
class Block:
    page: str
    line: int  # 1-based line of the opening fence
    lang: str
    title: str | None  # a file the reader writes (```yaml title="my-vendors.yaml")
    text: str
    not_run: str | None  # why it is only shown

    @property
    def runs(self) -> bool:
        return self.not_run is None and (self.lang == "bash" or self.title is not None)


def blocks(page: Path) -> list[Block]:
    """Every fenced block of a page, in order (blocks indented in a list or an admonition included)."""
    out: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i].strip())
        if not match or lines[i].strip() == "```":
            i += 1
            continue
        previous = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        reason = _NOT_RUN.match(previous)
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
        indent = len(lines[i]) - len(lines[i].lstrip())
        text = "\n".join(line[indent:] for line in lines[i + 1:end]) + "\n"
        out.append(Block(page.name, i + 1, match.group(1), match.group(2), text, reason.group(1) if reason else None))
        i = end + 1
    return out


@dataclass(frozen=True)
class Step:
    block: Block
    returncode: int
    output: str  # stdout and stderr


def run_tutorial(page: Path, workdir: Path, urls: dict[str, str] | None = None, timeout: float = 420) -> list[Step]:
    """Write the page's files and run its bash blocks in order in ``workdir`` (a fresh folder holding a link to the
    checkout's ``samples/``), each URL of ``urls`` replaced in the files. Stops at the first block that fails."""
    (workdir / "samples").symlink_to(ROOT / "samples")
    env = clean_env()
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["LOCUST_AVV_NO_HTML"] = "true"
    steps = []
    for block in blocks(page):
        if not block.runs:
            continue
        if block.title is not None:
            text = block.text
            for written, served in (urls or {}).items():
                text = text.replace(written, served)
            target = workdir / block.title
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            continue
        proc = subprocess.run(["bash", "-e", "-c", block.text], cwd=workdir, env=env, capture_output=True,
                              text=True, timeout=timeout)
        steps.append(Step(block, proc.returncode, proc.stdout + proc.stderr))
        if proc.returncode != 0:
            break
    return steps
