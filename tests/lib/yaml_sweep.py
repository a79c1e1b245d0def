"""yaml_sweep.py — malformed deltafin.yaml files against `deltafin run --config` (Python
standard library only).

usage: yaml_sweep.py DELTAFIN_BIN MODEL WORKDIR
Each case is a config file and what the error must say: the file name with a line number
("FILE:LINE:"), and the key, section or YAML problem. Syntax (quotes, indentation, tabs, flow
collections, directives, anchors and aliases incl. an alias bomb, binary, NUL, invalid UTF-8,
huge lines, deep nesting, 10^5 keys), structure (top-level scalar or list, unknown sections and
keys, duplicates, maps where scalars go) and values (wrong types, out of range, overflow, inf,
negative). A few valid files must still work. Exit 1 unless all cases are ok.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sweep import Sweep  # noqa: E402

BIN, MODEL, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
sw = Sweep("malformed YAML config")
F = os.path.join(WORK, "c.yaml")
LINE = r"c\.yaml:\d+: "

cases = [
    # syntax
    ("unclosed double quote", 'model:\n  path: "abc\n', r"YAML"),
    ("unclosed single quote", "model:\n  name: 'abc\n", r"YAML"),
    ("tab indentation", "hardware:\n\tthreads: 2\n", r"YAML syntax error"),
    ("bad indentation", "hardware:\n  threads: 2\n threads: 3\n", r"YAML"),
    ("unclosed flow sequence", "cache:\n  preload_experts: [1:2, 3:4\n", r"YAML"),
    ("unclosed flow mapping", "hardware: {threads: 2\n", r"YAML"),
    ("double colon", "hardware:\n  threads: : 2\n", r"(YAML|hardware\.threads)"),
    ("bad escape", 'model:\n  name: "a\\qb"\n', r"YAML"),
    ("two documents", "hardware:\n  threads: 2\n---\nhardware:\n  threads: 3\n", r"(document|YAML)"),
    ("YAML 9.9 directive", "%YAML 9.9\n---\nhardware:\n  threads: 2\n", r"YAML"),
    ("undefined alias", "hardware:\n  threads: *nope\n", r"YAML"),
    ("alias bomb", "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
                   "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n",
     r"(unknown section 'a'|alias)"),
    ("alias inside a section", "hardware: &h\n  threads: 2\ninference: *h\n", r"(alias|anchor|inference)"),
    ("merge key", "base: &b\n  threads: 2\nhardware:\n  <<: *b\n", r"(unknown section 'base'|<<|alias)"),
    ("complex key", "? [a, b]\n: 1\n", r"(YAML|key|section)"),
    ("binary junk", "\x01\x02\x03\x04\x05\xfe\xff", r"(YAML|UTF-8|control)"),
    ("NUL byte", "hardware:\n  threads: 2\x00\n", r"(NUL|YAML)"),
    ("invalid UTF-8", "model:\n  name: caf\xe9\n", r"(UTF-8|YAML)"),
    ("line of 1 MB", "model:\n  name: " + "x" * (1 << 20) + "\n", r"model\.name"),
    ("nested 10000 deep", "hardware:\n  threads: " + "[" * 10000 + "]" * 10000 + "\n", r"(YAML|hardware\.threads|deep|nest)"),
    ("10^5 keys", "hardware:\n" + "".join("  k%d: 1\n" % i for i in range(100000)), r"unknown key 'k0'"),
    # structure
    ("top-level scalar", "just a string\n", r"(mapping|sections|top)"),
    ("top-level list", "- hardware\n- model\n", r"(mapping|sections|top)"),
    ("unknown section", "hardwear:\n  threads: 2\n", r"unknown section 'hardwear'"),
    ("unknown key", "hardware:\n  thread: 2\n", r"unknown key 'thread'"),
    ("duplicate section", "hardware:\n  threads: 2\nhardware:\n  threads: 3\n", r"duplicate"),
    ("duplicate key", "hardware:\n  threads: 2\n  threads: 3\n", r"duplicate key 'threads'"),
    ("section is a scalar", "hardware: 4\n", r"hardware"),
    ("section is a list", "hardware:\n  - threads\n", r"hardware"),
    ("map where a number goes", "hardware:\n  threads:\n    a: 1\n", r"hardware\.threads"),
    ("list where a number goes", "hardware:\n  threads: [1, 2]\n", r"hardware\.threads"),
    ("empty value", "hardware:\n  threads:\n", r"hardware\.threads"),
    ("null value", "hardware:\n  threads: ~\n", r"hardware\.threads"),
    # values
    ("threads: four", "hardware:\n  threads: four\n", r"hardware\.threads: expected an integer, got 'four'"),
    ("threads: -3", "hardware:\n  threads: -3\n", r"hardware\.threads"),
    ("threads: 2^70", "hardware:\n  threads: 1180591620717411303424\n", r"hardware\.threads"),
    ("threads: 2.5", "hardware:\n  threads: 2.5\n", r"hardware\.threads"),
    ("memory_limit: lots", "hardware:\n  memory_limit: lots\n", r"hardware\.memory_limit"),
    ("memory_limit: 99999999E", "hardware:\n  memory_limit: 99999999E\n", r"hardware\.memory_limit"),
    ("io_engine: nvme", "hardware:\n  io_engine: nvme\n", r"hardware\.io_engine"),
    ("temperature: 1e999", "inference:\n  sampling:\n    temperature: 1e999\n", r"temperature"),
    ("temperature: nan", "inference:\n  sampling:\n    temperature: .nan\n", r"temperature"),
    ("top_p: 2", "inference:\n  sampling:\n    top_p: 2\n", r"top_p"),
    ("top_k: -5", "inference:\n  sampling:\n    top_k: -5\n", r"top_k"),
    ("seed: -1e30", "inference:\n  sampling:\n    seed: -1e30\n", r"seed"),
    ("batch_size: 0", "inference:\n  batch_size: 0\n", r"batch_size"),
    ("max_seq_len: 2^40", "inference:\n  max_seq_len: 1099511627776\n", r"max_seq_len"),
    ("prefetch: sometimes", "cache:\n  prefetch: sometimes\n", r"prefetch"),
    ("preload_experts: words", "cache:\n  preload_experts: [a, b]\n", r"cache\.preload_experts: expected \"layer:expert\" items, got 'a'"),
    ("preload_experts: '1:x'", "cache:\n  preload_experts: '1:2,1:x'\n", r"cache\.preload_experts: expected"),
    ("cache_size: -1G", "cache:\n  cache_size: -1G\n", r"cache\.size: expected a size"),
    ("model.path too long", "model:\n  path: " + "p" * 5000 + "\n", r"model\.path"),
]
for name, text, want in cases:
    open(F, "wb").write(text.encode("latin-1") if any(ord(c) > 127 for c in text) else text.encode())
    rc, out, err = sw.run([BIN, "run", "--config", F, "-m", MODEL, "-p", "x", "-n", "1", "-t", "1"], timeout=60)
    sw.judge(name, rc, out, err, must=(LINE if "binary" not in name and "UTF-8" not in name and "NUL" not in name else r"c\.yaml",
                                      want))

# files that are not files
for name, path, want in [("missing file", os.path.join(WORK, "nope.yaml"), r"nope\.yaml"),
                         ("a directory", WORK, r"(directory|Is a directory|read)")]:
    rc, out, err = sw.run([BIN, "run", "--config", path, "-m", MODEL, "-p", "x", "-n", "1"], timeout=60)
    sw.judge(name, rc, out, err, must=(want,))

# valid files still work (the sweep is not a refusal machine)
for name, text in [("empty file", ""), ("only comments", "# nothing\n# here\n"),
                   ("a full valid file", "model:\n  name: demo\ninference:\n  batch_size: 8\n  sampling:\n    temperature: 0\n"
                                         "hardware:\n  threads: 1\ncache:\n  prefetch: off\n"),
                   ("BOM then YAML", "\ufeffhardware:\n  threads: 1\n")]:
    open(F, "w", encoding="utf-8").write(text)
    rc, out, err = sw.run([BIN, "run", "--config", F, "-m", MODEL, "-p", "x", "-n", "1", "-t", "1"], timeout=60)
    sw.judge("valid: " + name, rc, out, err, want_fail=False)
    if rc != 0:
        sw.n["unclear"] += 1
        print("unclear valid: %s refused: %s" % (name, err.strip()[-200:]))
sys.exit(sw.finish())
