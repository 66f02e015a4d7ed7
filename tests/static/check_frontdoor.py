#!/usr/bin/env python3
"""The front door stays a front door: checks on the tracked text of a tree.

  - every relative link of README.md, docs/ and tests/README.md resolves
    (a file, a folder, and for "page.md#anchor" a heading of that page);
  - every path a tracked text cites ("docs/tuner.md", "worker/kvw.h",
    "ARCHITECTURE.md") is a file or folder of the tree;
  - every section citation (README "Key lists", docs/gpu.md "Refusals")
    names a heading the page has;
  - no session-diary words outside CHANGELOG.md: "stop" followed by a
    number, "this host", "VM boot", a clock time followed by UTC;
  - README.md has at most 300 lines, docs/ at most 40 files and
    docs/figures/ at most 12.

Usage: check_frontdoor.py [--root DIR] [--list FILE]
The files are `git ls-files` of DIR (default .), or the lines of FILE.
Prints one line per problem, "file:line: what", and exits 1 if any.
"""
import argparse
import os
import re
import subprocess
import sys

README_MAX = 300
DOCS_MAX = 40
FIGURES_MAX = 12

# Binary or generated inputs where none of this applies.
SKIP_PREFIXES = ("tests/fuzz/corpus/",
                 # the front-door check itself: it names and plants them
                 "tests/static/check_frontdoor.py",
                 "tests/static/test_frontdoor.sh")
# Checkers whose self-tests feed them made-up paths: diary words only.
NO_PATH_CHECK = re.compile(r"tests/static/check_[a-z_]+\.py$")
TEXT_EXT = (".md", ".c", ".h", ".cu", ".py", ".sh", ".1", ".proto", ".txt",
            ".js", ".yaml", ".yml", ".toml", ".cfg", ".in")
TEXT_NAMES = ("Makefile", "run", "psched-launch", "VERSION", "LICENSE")

DIARY = re.compile(
    r"\bstop [0-9]+\b|\bthis host\b|\bVM boot|\b[0-9]{1,2}:[0-9]{2}(:[0-9]{2})? ?UTC\b",
    re.I)
MD_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
# A path into the tree: a top-level folder, then more of it, ending in a
# name with an extension, or a bare UPPERCASE.md at the top.
PATH_TOKEN = re.compile(
    r"(?<![\w./$~-])((?:[A-Za-z0-9_][A-Za-z0-9_.+-]*/)+[A-Za-z0-9_][A-Za-z0-9_.+-]*"
    r"\.(?:md|c|h|cu|py|sh|proto|txt|1|js|yaml|csv|png))(?![\w/*-])")
BARE_MD = re.compile(r"(?<![\w./$-])([A-Z][A-Z0-9_-]+\.md)\b")
SECTION = re.compile(
    r"(?<![\w/.-])(README(?:\.md)?|(?:tests/)?README\.md|docs/[A-Za-z0-9_.-]+\.md),?"
    r" \(?\\?\"([^\"$\\]+)\\?\"")


def tracked(root, listfile):
    if listfile:
        with open(listfile) as f:
            names = [l.strip() for l in f if l.strip()]
    else:
        out = subprocess.run(["git", "-C", root, "ls-files"],
                             capture_output=True, text=True, check=True)
        names = out.stdout.split("\n")
    return [n for n in names if n and not n.startswith(SKIP_PREFIXES)]


def is_text(name):
    base = os.path.basename(name)
    return name.endswith(TEXT_EXT) or base in TEXT_NAMES or "/.ci/" in "/" + name


def slug(heading):
    """GitHub's anchor for a heading: lower case, spaces to '-', no
    punctuation but '-' and '_'."""
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def headings(text):
    out = []
    fence = False
    for line in text.split("\n"):
        if line.startswith("```"):
            fence = not fence
        elif not fence and re.match(r"#{1,6} ", line):
            out.append(re.sub(r"^#+ ", "", line).strip())
    return out


class Checker:
    def __init__(self, root, files):
        self.root = root
        self.files = files
        self.fileset = set(files)
        self.dirs = set()
        for f in files:
            d = os.path.dirname(f)
            while d:
                self.dirs.add(d)
                d = os.path.dirname(d)
        self.tops = {f.split("/")[0] for f in files if "/" in f}
        self.problems = []
        self.cache = {}

    def text(self, name):
        if name not in self.cache:
            try:
                with open(os.path.join(self.root, name), encoding="utf-8",
                          errors="replace") as f:
                    self.cache[name] = f.read()
            except OSError:
                self.cache[name] = None
        return self.cache[name]

    def bad(self, name, lineno, what):
        self.problems.append("%s:%d: %s" % (name, lineno, what))

    def exists(self, path):
        path = os.path.normpath(path)
        return path in self.fileset or path in self.dirs

    def check_link(self, name, lineno, target):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("//"):
            return  # http:, https:, mailto:, chrome:
        path, _, anchor = target.partition("#")
        if path:
            full = os.path.normpath(os.path.join(os.path.dirname(name), path))
            if full.startswith(".."):
                self.bad(name, lineno, "link leaves the tree: %s" % target)
                return
            if not self.exists(full):
                self.bad(name, lineno, "broken link: %s" % target)
                return
        else:
            full = name
        if anchor and full.endswith(".md"):
            text = self.text(full) or ""
            if anchor not in [slug(h) for h in headings(text)]:
                self.bad(name, lineno, "no heading for anchor: %s" % target)

    def check_path(self, name, lineno, token):
        if any(c in token for c in "*<>{}%"):
            return
        top = token.split("/")[0]
        if top not in self.tops:
            return  # build/, /usr/..., a path inside some other tree
        if self.exists(token):
            return
        self.bad(name, lineno, "cites a file the tree lacks: %s" % token)

    def check_bare_md(self, name, lineno, token):
        here = os.path.join(os.path.dirname(name), token)
        if self.exists(here) or self.exists(token) or \
           self.exists(os.path.join("docs", token)):
            return
        self.bad(name, lineno, "cites a file the tree lacks: %s" % token)

    def check_section(self, name, lineno, page, section):
        if page in ("README", "README.md"):
            page = "README.md"
        text = self.text(page) if page in self.fileset else None
        if text is None:
            self.bad(name, lineno, "cites a section of a missing page: %s" % page)
            return
        want = section.lower()
        if not any(want in h.lower() for h in headings(text)):
            self.bad(name, lineno, 'cites a section %s lacks: "%s"' % (page, section))

    def run(self):
        for name in self.files:
            if not is_text(name):
                continue
            text = self.text(name)
            if text is None:
                continue
            md = name.endswith(".md")
            for lineno, line in enumerate(text.split("\n"), 1):
                if name != "CHANGELOG.md" and DIARY.search(line):
                    self.bad(name, lineno, "session-diary words: %s"
                             % DIARY.search(line).group(0))
                if md and (name == "README.md" or name.startswith("docs/")
                           or name.endswith("/README.md")):
                    for target in MD_LINK.findall(line):
                        self.check_link(name, lineno, target)
                if NO_PATH_CHECK.match(name):
                    continue
                for token in PATH_TOKEN.findall(line):
                    self.check_path(name, lineno, token)
                for token in BARE_MD.findall(line):
                    self.check_bare_md(name, lineno, token)
                for page, section in SECTION.findall(line):
                    self.check_section(name, lineno, page, section)
        self.check_sizes()
        return self.problems

    def check_sizes(self):
        readme = self.text("README.md")
        if readme is not None:
            n = readme.count("\n")
            if n > README_MAX:
                self.bad("README.md", n, "README has %d lines, at most %d"
                         % (n, README_MAX))
        docs = [f for f in self.files if f.startswith("docs/")]
        if len(docs) > DOCS_MAX:
            self.bad("docs", 0, "docs/ holds %d files, at most %d"
                     % (len(docs), DOCS_MAX))
        figs = [f for f in docs if f.startswith("docs/figures/")]
        if len(figs) > FIGURES_MAX:
            self.bad("docs/figures", 0, "docs/figures/ holds %d files, at most %d"
                     % (len(figs), FIGURES_MAX))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=".")
    ap.add_argument("--list")
    args = ap.parse_args()
    problems = Checker(args.root, tracked(args.root, args.list)).run()
    for p in problems:
        print(p)
    if problems:
        print("%d problem(s)" % len(problems))
        return 1
    print("front door: no problems")
    return 0


if __name__ == "__main__":
    sys.exit(main())
