#!/usr/bin/python3
"""Cross-check the C chat-template engine against Python jinja2 (HF settings) on any folder of
.jinja templates (e.g. llama.cpp's models/templates) with every conversation in
tests/data/chat/conversations. Prints each difference; exit status 1 if any render differs or
only one side fails.

    make build/libdeltafin.a
    /usr/bin/python3 scripts/chat_crosscheck.py /work/llama.cpp/models/templates ['glob*']

Known, intended difference: select/selectattr/map return lists in the C engine (llama.cpp does
the same) where Python returns generators, so `x|map(...)|tojson` renders instead of failing.
"""
import glob
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import render_chat_expected as R  # noqa: E402
from jinja2.sandbox import SandboxedEnvironment  # noqa: E402

ROOT = R.ROOT


def main():
    tdir = sys.argv[1]
    pat = sys.argv[2] if len(sys.argv) > 2 else "*"
    tmp = tempfile.mkdtemp(prefix="chatx")
    drv = os.path.join(tmp, "drv")
    subprocess.run(["gcc", "-std=c11", "-D_GNU_SOURCE", "-O1", "-g", "-I" + ROOT + "/include", "-I" + ROOT + "/src",
                    "-o", drv, ROOT + "/scripts/chat_render_drv.c", ROOT + "/build/libdeltafin.a",
                    "-lcjson", "-lxxhash", "-lpcre2-8", "-lm", "-lpthread"], check=True)
    env = R.make_env(SandboxedEnvironment)
    convs = sorted(glob.glob(os.path.join(R.DATA, "conversations", "*.json")))
    stats = {}
    for tp in sorted(glob.glob(os.path.join(tdir, pat + ".jinja"))):
        with open(tp, encoding="utf-8", newline="") as f:
            src = f.read()
        for cp in convs:
            with open(cp, encoding="utf-8") as f:
                conv = json.load(f)
            files = {}
            for key, val in (("m", conv["messages"]), ("t", conv.get("tools")), ("e", conv.get("extra"))):
                if val is None:
                    files[key] = "-"
                    continue
                files[key] = os.path.join(tmp, key + ".json")
                with open(files[key], "w", encoding="utf-8") as f:
                    json.dump(val, f, ensure_ascii=False)
            try:
                py, pe = R.render(env, src, conv, "<s>", "</s>"), None
            except Exception as e:  # noqa: BLE001 - any failure counts as "rejected"
                py, pe = None, f"{type(e).__name__}: {e}"
            r = subprocess.run([drv, tp, files["m"], files["t"], "1" if conv.get("add_generation_prompt") else "0",
                                files["e"], "<s>", "</s>"], capture_output=True)
            name = f"{os.path.basename(tp)} / {os.path.basename(cp)}"
            if r.returncode not in (0, 1):
                key = "crash"
                print("CRASH", name, r.stderr.decode(errors="replace")[-1500:])
            elif py is not None and r.returncode == 0:
                c = r.stdout.decode("utf-8", "replace")
                key = "same" if c == py else "differ"
                if c != py:
                    i = 0
                    while i < min(len(py), len(c)) and py[i] == c[i]:
                        i += 1
                    print("DIFF", name, "at", i, "\n  py:", repr(py[max(0, i - 60):i + 60]),
                          "\n  c :", repr(c[max(0, i - 60):i + 60]))
            elif py is None and r.returncode == 1:
                key = "both-rejected"
            elif py is None:
                key = "python-only-rejected"
                print("PY-ONLY-ERROR", name, pe[:200])
            else:
                key = "c-only-rejected"
                print("C-ONLY-ERROR", name, r.stderr.decode(errors="replace").strip()[:300])
            stats[key] = stats.get(key, 0) + 1
    print(stats)
    bad = sum(v for k, v in stats.items() if k not in ("same", "both-rejected"))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
