#!/bin/sh
# test_realwidth.sh — greedy parity with llama.cpp at the REAL hidden width 7168 (few layers),
# against outputs recorded by tests/data/expected/realwidth/make.sh (no llama.cpp needed here):
#   k3-q8_0-mxfp4  kimi-k3 at Kimi K3 geometry (KDA + MLA layer, Q8_0, MXFP4 experts), ~1.0 GB
#   k2-q8_0        deepseek2 at Kimi K2 geometry (dense + MoE MLA layer, Q8_0), ~0.88 GB
#   1. gen-random rebuilds each model bit for bit (sha256)
#   2. greedy ids of `deltafin run --temp 0 -n 32` (2 prompts) equal llama.cpp's; a first
#      difference passes only where llama.cpp's recorded top-1 minus top-2 logit gap is a
#      near-tie (< 0.01: tests/lib/dfcheck.py greedy_verdict)
# deltafin runs in ggml's float order (its only one); ONLY=REGEX checks only the models whose
# names match.
# One model on disk at a time, deleted at once; the folder is /tmp (or the build folder when /tmp
# is a tmpfs) and is removed at exit. Skipped, with a message, with < 3 GiB free there.
# ~1 minute on 2 cores (release), ~2 minutes under ASan.
cd "$(dirname "$0")/.." || exit 1
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
exec "$PY" - "$@" <<'PYEOF'
import hashlib, os, re, shutil, subprocess, sys, tempfile, time

BIN = os.environ.get("DELTAFIN_BIN") or os.path.abspath("build/deltafin")
FIX = os.environ.get("DELTAFIN_FIXTURES") or os.path.abspath("../shared/fixtures")
BUILD = os.environ.get("DELTAFIN_BUILD") or "build"
EXP = "tests/data/expected/realwidth"
FREE_MIN = 3 << 30
# Open discrepancies vs llama.cpp, printed as KNOWN with their numbers, not counted as failures
# (none: k2-q8_0 'Once upon a time' was one in deltafin's earlier float order, where it parts at
# step 26 with a gap of 0.12; with ggml's orders, the default since bc0af4c, all 32 ids match).
KNOWN = set()
env = dict(os.environ, DELTAFIN_FIXTURES=FIX)
for k in ("DELTAFIN_STREAM", "DELTAFIN_EXPERT_CACHE"):
    env.pop(k, None)
sys.path.insert(0, "tests/lib")
from dfcheck import Checker
C = Checker("realwidth", BIN, env)
report, run, run_dev, last, read_tsv, greedy = C.report, C.run, C.run_dev, C.last, C.read_tsv, C.greedy

def fstype(path):
    p = subprocess.run(["stat", "-f", "-c", "%T", path], capture_output=True, text=True)
    return p.stdout.strip()

base = tempfile.gettempdir()
if fstype(base) == "tmpfs":  # ~1 GB files: keep them out of RAM
    os.makedirs(BUILD, exist_ok=True)
    base = os.path.abspath(BUILD)
st = os.statvfs(base)
if st.f_bavail * st.f_frsize < FREE_MIN:
    print(f"realwidth: SKIP: {st.f_bavail * st.f_frsize / 2**30:.1f} GiB free in {base}, "
          f"the models need {FREE_MIN >> 30} GiB (1 GB each, one at a time)")
    sys.exit(0)
print(f"realwidth: work folder {base}", flush=True)
tmp = tempfile.mkdtemp(prefix="df_realwidth_", dir=base)
t0 = time.time()
try:
    C.bin, dev = os.path.join(tmp, "deltafin"), C.dev
    C.dev = os.path.join(tmp, "deltafin-dev")
    for _ in range(30):  # private copies: a concurrent make may be relinking them
        try:
            shutil.copy2(BIN, C.bin)
            shutil.copy2(dev, C.dev)
            if os.access(C.bin, os.X_OK) and run(["--help"])[0] == 0 and run_dev(["--help"])[0] == 0: break
        except OSError:
            pass
        time.sleep(2)
    rows = read_tsv(f"{C.recorded(EXP, ('greedy.tsv',))}/greedy.tsv")
    for m in read_tsv(f"{EXP}/models.tsv"):
        name = m["name"]
        if not re.match(os.environ.get("ONLY") or ".", name): continue
        f = os.path.join(tmp, name + ".gguf")
        rc, _, err = run_dev(["gen-random"] + m["gen_random_args"].replace("@FIX@", FIX).split() + [f])
        if rc != 0:
            report(False, f"{name} build", last(err))
            continue
        try:
            h = hashlib.sha256()
            with open(f, "rb") as fh:
                for b in iter(lambda: fh.read(1 << 22), b""):
                    h.update(b)
            sha = h.hexdigest()
            report(sha == m["sha256"], f"{name} rebuilt bit for bit ({os.path.getsize(f) / 1e9:.2f} GB)",
                   "" if sha == m["sha256"] else f"sha {sha}")
            if sha != m["sha256"]:
                continue
            for r in rows:
                if r["name"] != name: continue
                what = f"{name} greedy '{r['prompt']}'"
                got, e = greedy(f, r["prompt"])
                if e:
                    report(False, what, e); continue
                ok, msg = C.greedy_verdict(got, r)
                if not ok and what in KNOWN:
                    print(f"realwidth: KNOWN {what}: {msg}", flush=True)
                    continue
                report(ok, what, msg + (" (a KNOWN entry: remove it)" if ok and what in KNOWN else ""))
        finally:
            os.unlink(f)
finally:
    shutil.rmtree(tmp, ignore_errors=True)
print(f"realwidth: {C.n_pass} passed, {C.n_fail} failed ({time.time() - t0:.0f} s)")
sys.exit(1 if C.n_fail else 0)
PYEOF
