"""The agent skill: the agent instructions, shipped as ``memoree/skill/SKILL.md``.

Agents that install skills read the same text ``memoree instructions`` prints. Regenerate it
after changing the instructions or the op declarations (a test keeps the shipped file equal):

    python -m memoree.service.skill --write-skill
"""

from __future__ import annotations

import sys
from pathlib import Path

from memoree.protocol.ops import OPS
from memoree.service.discovery import instructions_markdown

__all__ = ["REGENERATE", "SKILL_PATH", "main", "skill_markdown"]

REGENERATE = "python -m memoree.service.skill --write-skill"
SKILL_PATH = Path(__file__).resolve().parent.parent / "skill" / "SKILL.md"
_SKILL_FRONTMATTER = (
    "---\n"
    "name: memoree\n"
    "description: Local, event-sourced memory for AI agents. Use it to recall what a project "
    "already knows, store evidence, and record claims that cite exact bytes of that evidence.\n"
    "---\n\n"
)


def skill_markdown() -> str:
    """The skill file's text: a frontmatter header plus the generated Markdown instructions."""
    return _SKILL_FRONTMATTER + instructions_markdown(OPS)


def main(argv: list[str]) -> int:
    """``--write-skill`` regenerates the shipped SKILL.md; ``--check-skill`` reports drift."""
    if argv == ["--write-skill"]:
        SKILL_PATH.parent.mkdir(parents=True, exist_ok=True)
        SKILL_PATH.write_text(skill_markdown(), encoding="utf-8")
        print(f"wrote {SKILL_PATH}", file=sys.stderr)
        return 0
    if argv == ["--check-skill"]:
        current = SKILL_PATH.read_text("utf-8") if SKILL_PATH.is_file() else ""
        if current != skill_markdown():
            print(f"{SKILL_PATH} is stale; run: {REGENERATE}", file=sys.stderr)
            return 1
        return 0
    print("usage: python -m memoree.service.skill --write-skill | --check-skill", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
