"""The docs name only what exists: every repository path in README.md and docs/*.md is there,
and every snake_case name they cite in backquotes is defined in the code (or is another
library's, named below with its owner)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CODE = "\n".join(p.read_text() for d in ("fluid", "tests", "experiments", "examples", "tools")
                 for p in sorted((ROOT / d).rglob("*.py")))
#: Names the docs cite from other libraries or from formulas, each with its owner.
ELSEWHERE = {
    "min_workers": "Ray's cluster launcher (a node type's field)",
    "setup_commands": "Ray's cluster launcher (a cluster YAML's field)",
    "available_node_types": "Ray's cluster launcher (a cluster YAML's field)",
    "runtime_env": "Ray's runtime environments",
    "trials_to_unpause": "Ray's HyperBand (why ResourceChangingScheduler hangs around it)",
    "compute_w": "a symbol of the simulator's gang formula",
}


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_the_paths_a_doc_names_exist(doc):
    text = doc.read_text()
    paths = re.findall(r"`((?:fluid|tests|experiments|examples|tools|docs)/[\w/.\-]+)", text)
    assert paths or doc.name != "README.md"
    assert [p for p in paths if not (ROOT / p.split("::")[0]).exists()] == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_the_code_names_a_doc_cites_are_defined(doc):
    names = set(re.findall(r"`([a-z_][a-z0-9]*_[a-z0-9_]*[a-z0-9])`", doc.read_text()))
    undefined = sorted(n for n in names - ELSEWHERE.keys()
                       if not re.search(rf"\b{re.escape(n)}\b", CODE))
    assert undefined == []


def _anchors(text: str) -> set[str]:
    """GitHub's anchors of a Markdown page's headings (code blocks left out)."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.*)$", text, re.M)}


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_the_links_a_doc_has_resolve(doc):
    text = re.sub(r"```.*?```", "", doc.read_text(), flags=re.S)
    broken = []
    for link in re.findall(r"\]\(([^)\s]+)\)", text):
        if link.startswith(("http://", "https://")):
            continue
        file, _, anchor = link.partition("#")
        target = (doc.parent / file).resolve() if file else doc
        if not target.exists() or (anchor and anchor not in _anchors(target.read_text())):
            broken.append(link)
    assert broken == []
