#!/usr/bin/env python3
"""Checks that each room of the product owns its state (issue 51, "Rooms").

Six rules, each measured on the source text:
  long-function   no function in product code is longer than 120 lines,
                  counted from its signature's first line to its closing brace
  using-namespace no header has a `using namespace` directive
  header-class-body
                  a class in a header that several .cpp files include has at
                  most 20 lines of member function bodies longer than a line
                  (interfaces and plain records; state and its code belong
                  to one .cpp)
  shared-class    a class's member functions are defined in one .cpp file
                  (a class body split over several files is one class
                  pretending to be several; interfaces and plain records have
                  no out-of-line members, so they pass by construction)
  flat-aggregator aggregator/ has no .cpp at its top level but main.cpp
  batch-by-hand   in the engine, only the batch path (sync_engine/feed_writer.h:
                  feed_writer.cpp, change_batch.cpp) builds a store::Batch

The parser is a brace counter over text with comments, strings and
preprocessor lines removed: good enough for this code base, which it is run
against in CI (ctest "rooms"). An allow-list file names findings still to be
fixed, one `rule path name` a line; a finding not on it fails the check, and
so does a line of it that no longer matches anything (the list only shrinks).

  tools/check_rooms.py [--root DIR] [--allow FILE] [--list]
"""
import argparse
import os
import re
import sys
from collections import defaultdict

PRODUCT_DIRS = ["common", "resourcesync", "store", "sync_engine", "republisher", "aggregator", "config", "tools"]
MAX_FUNCTION_LINES = 120
# Lines of in-class member function bodies (of more than one line each) a
# class in a shared header may have: a RAII record's constructor and
# destructor, say; one-line accessors are not counted.
MAX_INLINE_BODY_LINES = 20
BATCH_PATH = {"sync_engine/feed_writer.cpp", "sync_engine/change_batch.cpp"}

_TOKEN = re.compile(r'R"([^(\s]*)\(|//|/\*|"|\'')


def strip(text):
    """Returns text with comments, string and character literals and
    preprocessor lines blanked, newlines kept so line numbers hold."""
    out = []
    i = 0
    n = len(text)
    while i < n:
        m = _TOKEN.search(text, i)
        if not m:
            out.append(text[i:])
            break
        out.append(text[i:m.start()])
        tok = m.group(0)
        if tok.startswith('R"'):
            end_marker = ")" + m.group(1) + '"'
            j = text.find(end_marker, m.end())
            j = n if j < 0 else j + len(end_marker)
            out.append('""' + "\n" * text.count("\n", m.start(), j))
            i = j
        elif tok == "//":
            j = text.find("\n", m.end())
            i = n if j < 0 else j
        elif tok == "/*":
            j = text.find("*/", m.end())
            j = n if j < 0 else j + 2
            out.append(" " + "\n" * text.count("\n", m.start(), j))
            i = j
        else:
            quote = tok
            # A digit separator (1'000) is not a character literal.
            if quote == "'" and m.start() > 0 and text[m.start() - 1].isalnum():
                out.append("'")
                i = m.end()
                continue
            j = m.end()
            while j < n and text[j] != quote and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(quote + quote)
            i = min(j + 1, n)
    lines = "".join(out).split("\n")
    # Preprocessor lines, with their continuations.
    cont = False
    for k, line in enumerate(lines):
        if cont or line.lstrip().startswith("#"):
            cont = line.rstrip().endswith("\\")
            lines[k] = ""
    return "\n".join(lines)


_NAME = re.compile(r"([A-Za-z_~][\w:~<>,\s]*?(?:operator\s*[^\s(]+|[\w~]+))\s*\($")


def function_name(header):
    """The qualified name of a function from the text before its body."""
    depth = 0
    # Find the '(' that opens the parameter list: the first one at depth 0
    # that follows a name.
    for k, ch in enumerate(header):
        if ch == "(":
            m = re.search(r"((?:[\w~]+::)*(?:operator\s*\S+?|[\w~]+))\s*$", header[:k])
            if m and depth == 0:
                return m.group(1)
            depth += 1
        elif ch == ")":
            depth -= 1
    return "?"


def scan(text):
    """Yields (name, first_line, last_line, class_scope) of every function body,
    and (class_name, None, None, None) markers are not needed: member
    definitions are found by their qualified names."""
    s = strip(text)
    stack = []  # kinds: 'ns', 'class', 'func', 'other'
    classes = []  # names of the classes open on the stack
    head_start = 0  # index where the text before the next '{' starts
    i = 0
    n = len(s)
    results = []
    func_depth = None
    func_info = None

    def line_of(idx):
        return s.count("\n", 0, idx) + 1

    while i < n:
        ch = s[i]
        if ch in ";":
            if not stack or stack[-1] in ("ns", "class"):
                head_start = i + 1
        elif ch == "{":
            at_scope = not stack or stack[-1] in ("ns", "class")
            if at_scope:
                head = s[head_start:i]
                flat = " ".join(head.split())
                kind = "other"
                if re.match(r"^(inline\s+)?namespace\b", flat) or re.match(r'^extern\s*""', flat):
                    kind = "ns"
                elif re.search(r"\b(class|struct|union|enum)\b", flat) and ")" not in flat.split("{")[0] \
                        and not re.search(r"\)\s*$", flat):
                    kind = "class"
                elif ")" in flat and not re.match(r"^[^(]*=", flat):
                    # A constructor's member initialisers (m_a{a}) open braces
                    # of their own before the body.
                    paren_close = flat.rfind(")")
                    tail = flat[paren_close + 1:]
                    init_list = re.search(r"\)\s*:\s*[\w:]", flat) is not None
                    prev = flat.rstrip()[-1:] if flat.rstrip() else ""
                    if init_list and (prev.isalnum() or prev in "_>"):
                        # skip the initialiser's braces
                        depth = 1
                        j = i + 1
                        while j < n and depth:
                            if s[j] == "{":
                                depth += 1
                            elif s[j] == "}":
                                depth -= 1
                            j += 1
                        i = j
                        continue
                    del tail
                    kind = "func"
                if kind == "func":
                    first = head_start + (len(head) - len(head.lstrip()))
                    name = function_name(flat)
                    if "class" in stack:
                        # A template's body must be in its header: not counted.
                        name = classes[-1] + "::" + name + ("@template" if flat.startswith("template") else "@inline")
                    func_info = (name, line_of(first))
                    func_depth = len(stack)
                if kind == "class":
                    m = re.search(r"\b(?:class|struct|union|enum)\s+(?:\w+\s+)?(\w+(?:::\w+)*)\s*(?:final\s*)?(?::|$)", flat)
                    classes.append(m.group(1) if m else "?")
                stack.append(kind)
                if kind in ("ns", "class"):
                    head_start = i + 1
            else:
                stack.append("other")
        elif ch == "}":
            if stack:
                kind = stack.pop()
                if kind == "class" and classes:
                    classes.pop()
                if kind == "func" and func_depth == len(stack):
                    results.append((func_info[0], func_info[1], line_of(i)))
                    func_info = None
                    func_depth = None
            if not stack or stack[-1] in ("ns", "class"):
                head_start = i + 1
        elif ch == ":" and stack and stack[-1] == "class":
            # public: / private: / protected: end a declaration's head.
            if re.search(r"\b(public|private|protected)\s*$", s[head_start:i]):
                head_start = i + 1
        i += 1
    return results


def count_includers(root):
    """How many .cpp files of the product and its tests include each header,
    directly or through other headers."""
    direct = defaultdict(set)
    files = list(product_files(root))
    for d in ("tests", "bench"):
        for dirpath, _, names in os.walk(os.path.join(root, d)):
            files += [os.path.relpath(os.path.join(dirpath, f), root) for f in names if f.endswith((".cpp", ".h"))]
    for rel in files:
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as fh:
            for m in re.finditer(r'^\s*#\s*include\s+"([^"]+)"', fh.read(), re.M):
                direct[rel].add(m.group(1))
    out = defaultdict(int)
    for rel in files:
        if not rel.endswith(".cpp"):
            continue
        seen = set()
        todo = list(direct[rel])
        while todo:
            h = todo.pop()
            if h not in seen:
                seen.add(h)
                todo += list(direct.get(h, ()))
        for h in seen:
            out[h] += 1
    return out


def product_files(root):
    for d in PRODUCT_DIRS:
        base = os.path.join(root, d)
        for dirpath, _, files in os.walk(base):
            for f in sorted(files):
                if f.endswith((".cpp", ".h")):
                    yield os.path.relpath(os.path.join(dirpath, f), root)


def findings(root):
    found = []
    owners = defaultdict(set)
    inline_lines = defaultdict(int)
    for rel in product_files(root):
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        if rel.endswith(".h"):
            stripped = strip(text)
            for k, line in enumerate(stripped.split("\n"), 1):
                if re.search(r"\busing\s+namespace\b", line):
                    found.append(("using-namespace", rel, "directive", f"{rel}:{k}: `using namespace` in a header"))
        if rel.startswith("sync_engine/") and rel not in BATCH_PATH:
            for k, line in enumerate(strip(text).split("\n"), 1):
                if re.search(r"\bstore::Batch\s+\w+\s*[;{(=]", line):
                    found.append(("batch-by-hand", rel, "store::Batch",
                                  f"{rel}:{k}: a store::Batch built outside the batch path (sync_engine/feed_writer.h)"))
        for name, first, last in scan(text):
            length = last - first + 1
            inline = name.endswith("@inline")
            template = name.endswith("@template")
            name = name.rsplit("@", 1)[0] if inline or template else name
            if length > MAX_FUNCTION_LINES:
                found.append(("long-function", rel, name,
                              f"{rel}:{first}: {name} is {length} lines (at most {MAX_FUNCTION_LINES})"))
            if inline and rel.endswith(".h") and length > 1:
                # One-line accessors are a record's; bodies of more are code.
                inline_lines[(rel, name.rsplit("::", 1)[0])] += length
            if rel.endswith(".cpp") and "::" in name and not inline and not template:
                cls = name.rsplit("::", 1)[0]
                # Only member functions of our own classes: a qualifier that
                # names a namespace is not a class.
                owners[cls].add(rel)
    includers = count_includers(root)
    for (rel, cls), lines in sorted(inline_lines.items()):
        users = includers.get(rel, 0)
        if lines > MAX_INLINE_BODY_LINES and users > 1:
            found.append(("header-class-body", rel, cls,
                          f"{rel}: {cls} has {lines} lines of member function bodies in a header "
                          f"{users} .cpp files include (at most {MAX_INLINE_BODY_LINES}: interfaces and plain records)"))
    for cls, files in sorted(owners.items()):
        if len(files) > 1 and not is_namespace(root, cls):
            found.append(("shared-class", ",".join(sorted(files)), cls,
                          f"{cls}: member functions defined in {len(files)} files: {', '.join(sorted(files))}"))
    agg = os.path.join(root, "aggregator")
    if os.path.isdir(agg):
        for f in sorted(os.listdir(agg)):
            if f.endswith(".cpp") and f != "main.cpp":
                found.append(("flat-aggregator", "aggregator/" + f, f,
                              f"aggregator/{f}: aggregator/ keeps only main.cpp at its top level"))
    return found


_namespaces = None


def is_namespace(root, qualified):
    global _namespaces
    if _namespaces is None:
        _namespaces = set()
        for rel in product_files(root):
            with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as fh:
                for m in re.finditer(r"\bnamespace\s+([\w:]+)\s*(?:\{|=)", fh.read()):
                    for part in m.group(1).split("::"):
                        _namespaces.add(part)
    last = qualified.split("::")[-1]
    return last in _namespaces


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--allow", help="allow-list of findings still to be fixed")
    ap.add_argument("--list", action="store_true", help="print every finding, allowed or not")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    allowed = set()
    if args.allow:
        with open(args.allow, encoding="utf-8") as fh:
            for line in fh:
                line = line.split("#", 1)[0].strip()
                if line:
                    allowed.add(tuple(line.split(None, 2)))
    found = findings(root)
    seen = set()
    bad = 0
    for rule, where, name, message in found:
        key = (rule, where, name)
        seen.add(key)
        if key in allowed:
            if args.list:
                print(f"allowed: [{rule}] {message}")
            continue
        print(f"[{rule}] {message}")
        bad += 1
    for key in sorted(allowed - seen):
        print(f"[allow-list] '{' '.join(key)}' matches nothing now: take it off the list")
        bad += 1
    counts = defaultdict(int)
    for rule, *_ in found:
        counts[rule] += 1
    summary = ", ".join(f"{r} {counts[r]}" for r in ("long-function", "using-namespace", "shared-class", "header-class-body",
                                                      "flat-aggregator", "batch-by-hand"))
    print(f"check_rooms: {len(found)} findings ({summary}); {len(found) - bad if bad <= len(found) else 0} allowed; "
          f"{bad} failing")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
