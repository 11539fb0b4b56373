"""Check that every relative markdown link in README.md and docs/ resolves to a file.

Usage: python3 scripts/check_doc_links.py  (exit 1 and one line per broken link).
Links to URLs (scheme:), pure anchors (#...) and docs/results are not checked.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~)")


def links(path: Path) -> list[tuple[int, str]]:
    """The (line number, target) of every markdown link outside code fences."""
    found, fenced = [], False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            found.extend((number, m.group(1)) for m in LINK.finditer(line))
    return found


def broken(path: Path) -> list[str]:
    """One message per link of ``path`` whose file does not exist."""
    out = []
    for number, target in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue
        file = target.split("#", 1)[0]
        if not (path.parent / file).exists():
            out.append(f"{path.relative_to(ROOT)}:{number}: broken link {target}")
    return out


def main() -> int:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    files = [f for f in files if "results" not in f.relative_to(ROOT).parts]
    problems = [p for f in files for p in broken(f)]
    print("\n".join(problems) if problems else f"{len(files)} files, every link resolves")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
