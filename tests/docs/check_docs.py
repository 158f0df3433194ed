#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks that README.md and docs/*.md do not drift from the repository.

1. Every relative Markdown link resolves to a file or folder inside the repository, and a
   link's #anchor names a heading of the target page (GitHub's heading ids).
2. Every repository path a page names (a relative `../x` path, a page name `x.md`) (`include/...`, `examples/...`, `tests/...`, ...,
   and header paths such as `vmx/cr_access.hpp` or <hvkit/vmx/cr_access.hpp>) exists.
3. Every qualified name a page mentions (`hvkit::vmx::evaluate_cr_write`, or
   `vmx::evaluate_cr_write` with a layer namespace first) exists: each of its components is
   an identifier declared somewhere in include/.

Usage: check_docs.py ROOT [--page FILE=AS ...]
Without --page: README.md and docs/*.md of ROOT. With it: FILE is read and resolved as if
it were ROOT/AS (the control test uses this). Prints one line per problem; exit 1 if any.
"""
import os
import re
import sys

LAYERS = ("x86", "paging", "cpuid", "vmx", "svm", "emulate")
TOP_DIRS = ("include", "examples", "tests", "scripts", "docs", "benchmarks", "fuzz", "cmake")
# Files generated at configure time: named in the docs, absent from the source tree.
GENERATED = {"include/version.hpp"}

LINK = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")
REPO_PATH = re.compile(r"(?<![\w./<>$-])((?:%s)/[\w./+-]*)" % "|".join(TOP_DIRS))
HEADER = re.compile(r"(?<![\w./-])(?:hvkit/)?((?:%s)/[\w/]+\.hpp)" % "|".join(LAYERS))
QUALIFIED = re.compile(r"(?<![\w:])((?:hvkit::)?(?:%s)(?:::[A-Za-z_]\w*)+|hvkit::[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*)"
                       % "|".join(LAYERS))
# A page named in prose ("see linux-guest.md") or a relative path ("../include/x86/cr.hpp").
MD_NAME = re.compile(r"(?<![\w./-])([\w-]+\.md)\b")
DOTDOT = re.compile(r"(?<![\w./-])(\.\./[\w./-]+\.(?:md|hpp|cpp|h|cmake|sh|txt|py))\b")
CODE_FENCE = re.compile(r"^(```|~~~)")


def slug(heading):
  """GitHub's id for a heading: lower case, punctuation dropped, spaces to hyphens."""
  text = re.sub(r"`", "", heading.strip()).lower()
  text = re.sub(r"[^\w\- ]", "", text)
  return text.replace(" ", "-")


def anchors(path, cache={}):
  if path not in cache:
    ids, seen, fenced = set(), {}, False
    with open(path, encoding="utf-8") as f:
      for line in f:
        if CODE_FENCE.match(line):
          fenced = not fenced
          continue
        m = None if fenced else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
          base = slug(m.group(1))
          n = seen.get(base, 0)
          ids.add(base if n == 0 else "%s-%d" % (base, n))
          seen[base] = n + 1
    cache[path] = ids
  return cache[path]


def identifiers(root):
  words = set()
  for d, _, files in os.walk(os.path.join(root, "include")):
    for name in files:
      if name.endswith((".hpp", ".h", ".in")):
        with open(os.path.join(d, name), encoding="utf-8", errors="replace") as f:
          words.update(re.findall(r"[A-Za-z_]\w*", f.read()))
  return words


def suffix_exists(root, rel, cache={}):
  if root not in cache:
    files = set()
    for d, dirs, names in os.walk(root):
      dirs[:] = [x for x in dirs if not x.startswith(".") and not x.startswith("build")]
      files.update(os.path.relpath(os.path.join(d, n), root) for n in names)
    cache[root] = files
  return any(f == rel or f.endswith("/" + rel) for f in cache[root])


def check_page(root, text, as_path, words, problems):
  page_dir = os.path.dirname(os.path.join(root, as_path))
  real_root = os.path.realpath(root)

  def report(line_no, what):
    problems.append("%s:%d: %s" % (as_path, line_no, what))

  def exists_in_repo(rel):
    target = os.path.realpath(os.path.join(root, rel))
    return (target == real_root or target.startswith(real_root + os.sep)) and os.path.exists(target)

  fenced = False
  for line_no, line in enumerate(text.split("\n"), 1):
    if CODE_FENCE.match(line):
      fenced = not fenced
    for target in LINK.findall(line) + IMAGE.findall(line):
      if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
        continue
      path, _, anchor = target.partition("#")
      dest = os.path.join(root, as_path) if not path else os.path.normpath(os.path.join(page_dir, path))
      rel = os.path.relpath(dest, root)
      if rel.startswith("..") or not exists_in_repo(rel):
        report(line_no, "link target does not exist in the repository: %s" % target)
      elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
        report(line_no, "link anchor names no heading of %s: #%s" % (rel, anchor))
    # Repository paths and headers are checked in prose and code alike; names too.
    for m in REPO_PATH.finditer(line):
      rel = m.group(1).rstrip(".,;:")
      if rel.startswith("docs/") and not fenced and "](" in line[max(0, m.start() - 2):m.start()]:
        continue  # a link target: checked above, relative to the page
      if rel not in GENERATED and not exists_in_repo(rel):
        report(line_no, "path does not exist in the repository: %s" % rel)
    for m in HEADER.finditer(line):
      rel = "include/" + m.group(1)
      # A layer header, or a file of that name elsewhere (examples/hypervisor/svm/svm.hpp).
      if rel not in GENERATED and not exists_in_repo(rel) and not suffix_exists(root, m.group(1)):
        report(line_no, "header does not exist: %s" % m.group(1))
    for m in MD_NAME.finditer(line):
      name = m.group(1)
      if not (exists_in_repo(name) or exists_in_repo("docs/" + name)
              or os.path.exists(os.path.join(page_dir, name))):
        report(line_no, "page does not exist in the repository: %s" % name)
    for m in DOTDOT.finditer(line):
      rel = os.path.relpath(os.path.normpath(os.path.join(page_dir, m.group(1).rstrip(".,;:"))), root)
      if rel.startswith("..") or not exists_in_repo(rel):
        report(line_no, "relative path leaves the repository or does not exist: %s" % m.group(1))
    for m in QUALIFIED.finditer(line):
      missing = [c for c in m.group(1).split("::") if c not in words]
      if missing:
        report(line_no, "name does not exist in include/: %s (%s)" % (m.group(1), ", ".join(missing)))


def main(argv):
  if len(argv) < 2:
    print(__doc__, file=sys.stderr)
    return 2
  root = argv[1]
  pages = []
  args = argv[2:]
  while args:
    if args[0] != "--page" or len(args) < 2 or "=" not in args[1]:
      print("usage: check_docs.py ROOT [--page FILE=AS ...]", file=sys.stderr)
      return 2
    src, _, as_path = args[1].partition("=")
    pages.append((src, as_path))
    args = args[2:]
  if not pages:
    pages.append((os.path.join(root, "README.md"), "README.md"))
    for name in sorted(os.listdir(os.path.join(root, "docs"))):
      if name.endswith(".md"):
        pages.append((os.path.join(root, "docs", name), "docs/" + name))
  words = identifiers(root)
  problems = []
  for src, as_path in pages:
    with open(src, encoding="utf-8") as f:
      check_page(root, f.read(), as_path, words, problems)
  for p in problems:
    print(p)
  print("checked %d pages: %d problems" % (len(pages), len(problems)))
  return 1 if problems else 0


if __name__ == "__main__":
  sys.exit(main(sys.argv))
