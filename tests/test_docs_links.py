"""Relative links in the repository's Markdown lead somewhere: every `[text](path)` and `[text](path#anchor)`
names an existing file or folder, and an anchor names a heading of its target (GitHub's slugs). Links with
a scheme (https:, mailto:, ...) are not followed. Stdlib and pytest only: runs with --noconftest."""

from __future__ import annotations

import functools
import os
import re
import subprocess
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())

FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+).+?\1")
INLINE_LINK = re.compile(r"\]\(\s*<?([^)\s>]*)>?(?:\s+[\"'(][^)]*)?\)")
REFERENCE_DEFINITION = re.compile(r" {0,3}\[[^\]]+\]:\s*<?([^\s>]+)")
HEADING = re.compile(r" {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*")
HTML_ANCHOR = re.compile(r"<a\s[^>]*?(?:name|id)=\"([^\"]+)\"", re.IGNORECASE)
SCHEME = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*:")
LINE_ANCHOR = re.compile(r"L\d+(-L\d+)?")


def markdown_files() -> list[Path]:
    """Tracked and new (not ignored) *.md files; without git, every *.md outside dot folders."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "*.md"],
                                cwd=ROOT, capture_output=True, check=True, timeout=30).stdout.decode()
        files = {ROOT / name for name in listed.split("\0") if name}
    except (OSError, subprocess.SubprocessError):
        files = {p for p in ROOT.rglob("*.md") if not any(s.startswith(".") for s in p.relative_to(ROOT).parts)}
    return sorted(p for p in files if p.is_file())


def outside_fences(text: str):
    """(line number, line) for the lines outside fenced code blocks."""
    fence = ""
    for number, line in enumerate(text.splitlines(), 1):
        marker = FENCE.match(line)
        if not fence and marker:
            fence = marker.group(1)
        elif fence:
            if marker and marker.group(1).startswith(fence) and not line.strip().strip(fence[0]):
                fence = ""
        else:
            yield number, line


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: its text lowercased, punctuation except '-' and '_' dropped,
    each space a '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link counts as its text
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@functools.cache
def anchors(path: Path) -> frozenset[str]:
    """A Markdown file's anchors: its headings' slugs (a repeated slug gets -1, -2, ...) and explicit
    <a name=...> / id=... anchors."""
    found, seen = set(), {}
    for _, line in outside_fences(path.read_text(encoding="utf-8")):
        found.update(HTML_ANCHOR.findall(line))
        if heading := HEADING.fullmatch(line):
            base = slug(heading.group(1))
            found.add(f"{base}-{seen[base]}" if base in seen else base)
            seen[base] = seen.get(base, 0) + 1
    return frozenset(found)


def broken_links(path: Path, root: Path = ROOT) -> list[str]:
    """What is wrong with each relative link of one Markdown file, as `line N: target: reason`."""
    problems = []
    for number, line in outside_fences(path.read_text(encoding="utf-8")):
        line = CODE_SPAN.sub("", line)
        for target in INLINE_LINK.findall(line) + REFERENCE_DEFINITION.findall(line):
            if not target or SCHEME.match(target):
                continue
            name, _, anchor = target.partition("#")
            name = unquote(name)
            if not name:
                linked = path
            elif name.startswith("/"):  # GitHub reads /x as the repository's x
                linked = root / name.lstrip("/")
            else:
                linked = path.parent / name
            shown = os.path.relpath(linked, root)
            if not linked.exists():
                problems.append(f"line {number}: {target}: no such file {shown}")
            elif anchor and linked.suffix.lower() == ".md" and unquote(anchor).lower() not in anchors(linked):
                problems.append(f"line {number}: {target}: no heading #{anchor} in {shown}")
            elif anchor and linked.suffix.lower() != ".md" and not LINE_ANCHOR.fullmatch(anchor):
                problems.append(f"line {number}: {target}: #{anchor} in a file that is not Markdown")
    return problems


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_lead_somewhere(path):
    problems = broken_links(path)
    assert not problems, "\n".join(problems)


def test_slugs_are_githubs():
    assert slug("Consumer groups (KIP-848)") == "consumer-groups-kip-848"
    assert slug("Workers (`groupd serve --workers N`)") == "workers-groupd-serve---workers-n"
    assert slug("The `__consumer_offsets` log, v2.1") == "the-__consumer_offsets-log-v21"
    assert slug("See [the spec](spec.md)!") == "see-the-spec"


def test_broken_links_are_found(tmp_path):
    (tmp_path / "other.md").write_text("# Other page\n\n## Twice\n\n## Twice\n\n```\n# not a heading\n```\n")
    page = tmp_path / "page.md"
    page.write_text("# Page\n\n"
                    "[ok](other.md) [ok](other.md#other-page) [ok](other.md#twice-1) [ok](#page) [ok](https://x.y/z)\n"
                    "`[in code](missing.md)`\n```\n[in a fence](missing.md)\n```\n"
                    "[gone](missing.md) [no heading](other.md#nowhere) [in a fence](other.md#not-a-heading)\n"
                    "[ref]: also-missing.md\n")
    assert broken_links(page, root=tmp_path) == [
        "line 8: missing.md: no such file missing.md",
        "line 8: other.md#nowhere: no heading #nowhere in other.md",
        "line 8: other.md#not-a-heading: no heading #not-a-heading in other.md",
        "line 9: also-missing.md: no such file also-missing.md",
    ]
