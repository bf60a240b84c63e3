#!/usr/bin/env bash
# The manual: builds docs/ with MkDocs in strict mode (a broken link or anchor, or a page left out
# of mkdocs.yml's nav, fails), then checks that every relative link in README.md (outside docs/,
# so MkDocs does not see it) names a file or folder of this repository and, with #anchor, a
# heading of that Markdown file. Usage: bash .ci/docs.sh
set -euo pipefail
cd "$(dirname "$0")/.."

python -c "import mkdocs, sys; sys.exit(mkdocs.__version__ != '1.6.1')" 2>/dev/null \
    || python -m pip install "mkdocs==1.6.1"

site="$(mktemp -d)"
trap 'rm -rf "$site"' EXIT
python -m mkdocs build --strict --clean --site-dir "$site"

python - README.md <<'PY'
"""Relative links of the given Markdown files: the target must exist; #anchor must be a heading."""
import re
import sys
from pathlib import Path


def slug(heading: str) -> str:
    """Python-Markdown's toc slug (MkDocs' anchors): lowercase, punctuation dropped, spaces -> -."""
    text = re.sub(r"[`*_]", "", heading).strip().lower()
    text = re.sub(r"[^\w\s-]", "", text)
    return re.sub(r"[-\s]+", "-", text).strip("-")


def anchors(path: Path) -> set[str]:
    out, fenced = set(), False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"#{1,6}\s+(.*)", line)):
            out.add(slug(m.group(1)))
    return out


bad = []
for name in sys.argv[1:]:
    src = Path(name)
    text = re.sub(r"```.*?```", "", src.read_text(), flags=re.S)  # no links in code blocks
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        path, _, anchor = target.partition("#")
        dest = (src.parent / path) if path else src
        if not dest.exists():
            bad.append(f"{src}: {target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{src}: {target}: no heading with that anchor")
if bad:
    sys.exit("broken links:\n  " + "\n  ".join(bad))
print(f"relative links ok: {', '.join(sys.argv[1:])}")
PY
