#!/bin/sh
# test_doc_refs.sh — every section the code (and docs/) cites as "formats.md §N" / "kimi-k3.md §N" (also
# "section N", a bare "formats.md N.M", and ranges such as "§1-§2" or "§3, §6") must exist as a
# numbered heading in docs/formats.md / docs/kimi-k3.md. Fails naming the file:line of each
# citation that does not resolve. Pure text processing; well under a second.
cd "$(dirname "$0")/.." || exit 1
command -v python3 >/dev/null 2>&1 || { echo "test_doc_refs: python3 missing"; exit 1; }
python3 - <<'EOF'
import os, re, sys

DOCS = {"formats.md": "docs/formats.md", "kimi-k3.md": "docs/kimi-k3.md"}
DIRS = ["src", "app", "dev", "scripts", "tests", "fuzz", "include", "docs"]
SKIP = {os.path.join("tests", "test_doc_refs.sh")}

heads = {}
for name, path in DOCS.items():
    if not os.path.isfile(path):
        print(f"test_doc_refs: FAIL: {path} is missing")
        sys.exit(1)
    secs = set()
    for line in open(path, encoding="utf-8"):
        m = re.match(r"#{2,4}\s+(\d+(?:\.\d+)*)\.?\s", line)
        if m:
            secs.add(m.group(1))
    heads[name] = secs

cite = re.compile(r"(formats|kimi-k3)\.md")
# section tokens right after the citation: "§3.0", "§1-§2", "§3, §6", "section 9", "2.3", "4.6"
tok = re.compile(r"\s*(?:§|section\s+)?(\d+(?:\.\d+)?)(?:\s*-\s*§?(\d+(?:\.\d+)?))?")

bad, n_cites, n_secs = [], 0, 0
for d in DIRS:
    for root, _, files in os.walk(d):
        for fn in files:
            p = os.path.join(root, fn)
            if p in SKIP:
                continue
            try:
                text = open(p, encoding="utf-8").read()
            except (UnicodeDecodeError, OSError):
                continue
            for ln, line in enumerate(text.splitlines(), 1):
                for m in cite.finditer(line):
                    n_cites += 1
                    doc = m.group(1) + ".md"
                    rest = line[m.end():].lstrip("`")   # `formats.md` §3.0 in the docs
                    pos = 0
                    while True:
                        t = tok.match(rest, pos)
                        if not t:
                            break
                        a, b = t.group(1), t.group(2)
                        for s in ([a] if not b else [a, b]):
                            n_secs += 1
                            if s not in heads[doc]:
                                bad.append(f"{p}:{ln}: {doc} §{s} has no heading in {DOCS[doc]}")
                        pos = t.end()
                        # continue only through a list: ", §6" or ", 3.2"
                        nxt = re.match(r"\s*,\s*(?=§|\d)", rest[pos:])
                        if not nxt:
                            break
                        pos += nxt.end()
if n_cites == 0:
    print("test_doc_refs: FAIL: no citations found (pattern broken?)")
    sys.exit(1)
for b in bad:
    print("test_doc_refs: FAIL:", b)
print(f"test_doc_refs: {n_cites} citations, {n_secs} section references, {len(bad)} unresolved")
sys.exit(1 if bad else 0)
EOF
