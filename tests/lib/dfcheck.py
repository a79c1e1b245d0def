"""dfcheck.py — what the Python-driven end-to-end tests (test_deepseek2.sh, test_kimi_k3.sh)
share: PASS/FAIL reporting, running the deltafin binary (and deltafin-dev for gen-random),
recorded TSV tables, greedy ids and perplexity. Imported with sys.path.insert(0, "tests/lib")
from the repository root."""
import json, os, re, subprocess

# the developer tools (gen-random, convert-llama2c): $DELTAFIN_DEV_BIN, else build/deltafin-dev
DEV_BIN = os.environ.get("DELTAFIN_DEV_BIN") or os.path.abspath("build/deltafin-dev")

# llama.cpp top-1 minus top-2 logit below which its greedy choice is a near-tie: decided by
# rounding, in either engine (the value test_e2e.sh and test_demo_model.sh use)
NEAR_TIE = 0.01


def kernel_isa(bin_path, env):
    """The kernel table deltafin picks on this CPU (honouring DELTAFIN_ISA in env): the
    `kernels:` line of `deltafin --version`."""
    p = subprocess.run([bin_path, "--version"], capture_output=True, env=env)
    m = re.search(r"^kernels: (\S+)", p.stdout.decode("utf-8", "replace"), re.M)
    return m.group(1) if m else "unknown"


def recorded(exp, names, bin_path, env):
    """The folder of llama.cpp recordings (the files `names`) that deltafin is compared with.
    llama.cpp's float orders depend on the ISA it was built for (-march=native): `exp/` holds
    recordings of an AVX-512 build, `exp/avx2/` those of an AVX2-only build
    (scripts/record_isa.py), and deltafin's avx512 and avx2 kernel tables follow the orders of
    the matching build (docs/testing.md "One set of recordings per ISA").
    By default the parity tests run deltafin's avx2 table on every x86 machine (DELTAFIN_ISA=avx2
    is set in env, which is changed in place) against `exp/avx2/` where it exists, else `exp/`
    (suites whose outputs do not depend on the vector width): the same comparison on AVX2 and
    AVX-512 machines, all of it re-recordable on either. DELTAFIN_PARITY_ISA=native runs the
    CPU's own table instead: avx512 against `exp/` (falling back to avx2 against `exp/avx2/`).
    Returns (folder, a line saying which)."""
    have = lambda d: all(os.path.exists(os.path.join(d, n)) for n in names)
    isa = kernel_isa(bin_path, env)
    sub = os.path.join(exp, "avx2")
    if isa in ("avx2", "avx512") and os.environ.get("DELTAFIN_PARITY_ISA", "avx2") != "native":
        forced = isa != "avx2"
        env["DELTAFIN_ISA"] = isa = "avx2"
    else:
        forced = False
    if isa == "avx512" and not have(exp) and have(sub):
        env["DELTAFIN_ISA"] = "avx2"
        return sub, f"recordings of an AVX2 llama.cpp ({sub}); running the avx2 kernels (none from AVX-512)"
    how = "avx2 kernels (DELTAFIN_ISA=avx2 on this AVX-512 CPU)" if forced else f"{isa} kernels"
    if isa == "avx2" and have(sub):
        return sub, f"recordings of an AVX2 llama.cpp ({sub}), {how}"
    return exp, f"recordings of an AVX-512 llama.cpp ({exp}), {how}"


class Checker:
    def __init__(self, label, bin_path, env, dev_path=DEV_BIN):
        self.label, self.bin, self.env, self.dev = label, bin_path, env, dev_path
        self.n_pass = self.n_fail = 0

    def report(self, ok, name, msg=""):
        if ok: self.n_pass += 1
        else: self.n_fail += 1
        print(f"{self.label}: {'PASS' if ok else 'FAIL'} {name}{': ' + msg if msg else ''}", flush=True)

    def run(self, args, extra_env=None, timeout=600, dev=False):
        """deltafin ARGS (deltafin-dev ARGS with dev=True) -> (exit status, stdout, stderr)"""
        e = dict(self.env, **(extra_env or {}))
        try:
            p = subprocess.run([self.dev if dev else self.bin] + args, capture_output=True, env=e, timeout=timeout)
            return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
        except subprocess.TimeoutExpired:
            return 124, "", "timeout"

    def run_dev(self, args, extra_env=None, timeout=600):
        return self.run(args, extra_env, timeout, dev=True)

    @staticmethod
    def last(err):
        l = [x for x in err.strip().splitlines() if x.strip()]
        return l[-1] if l else "(no message)"

    @staticmethod
    def read_tsv(path):
        with open(path, encoding="utf-8") as f:
            rows = [l.rstrip("\n").split("\t") for l in f if l.strip()]
        return [dict(zip(rows[0], r)) for r in rows[1:]]

    def greedy(self, model, prompt, extra_env=None, extra=()):
        """`deltafin run --temp 0 -n 32 --json`: (parsed JSON, None) or (None, error)."""
        rc, out, err = self.run(["run", "-m", model, "-p", prompt, "-n", "32", "--temp", "0", "-t", "2", "--json"]
                                + list(extra), extra_env)
        if rc != 0:
            return None, f"exit {rc}: {self.last(err)}"
        for line in reversed(out.strip().splitlines()):
            try:
                return json.loads(line), None
            except ValueError:
                pass
        return None, "no JSON"

    def recorded(self, exp, names=("greedy.tsv", "ppl.tsv")):
        """dfcheck.recorded for this checker's binary and environment; prints which recordings."""
        d, why = recorded(exp, names, self.bin, self.env)
        print(f"{self.label}: {why}", flush=True)
        return d

    def check_greedy(self, name, row, got):
        """Reports deltafin's greedy run (parsed JSON) against a recorded row: by greedy_verdict
        where the row has llama.cpp's per-step gaps, else every id must be identical."""
        if row.get("gaps"):
            ok, msg = self.greedy_verdict(got, row)
        else:
            want_p = [int(x) for x in row["prompt_ids"].split(",") if x]
            want_g = [int(x) for x in row["gen_ids"].split(",") if x]
            ok = got["prompt_tokens"] == want_p and got["tokens"] == want_g
            same = next((i for i, (a, b) in enumerate(zip(got["tokens"], want_g)) if a != b), len(want_g))
            msg = f"{len(want_g)} ids identical" if ok else \
                f"first difference at step {same}: got {got['tokens']} want {want_g}"
        self.report(ok, f"{name} greedy '{row['prompt']}'", msg)
        return ok

    @staticmethod
    def greedy_verdict(got, row, near_tie=NEAR_TIE):
        """deltafin's greedy run (parsed JSON) against a recorded llama.cpp row (prompt_ids,
        gen_ids, gaps = llama.cpp's per-step top-1 minus top-2 logit): (ok, message). The ids must
        be identical, except that a first difference at a step where llama.cpp's own gap is below
        near_tie passes (the steps after it are not compared)."""
        want_p = [int(x) for x in row["prompt_ids"].split(",") if x]
        want_g = [int(x) for x in row["gen_ids"].split(",") if x]
        gaps = [float(x) for x in row["gaps"].split(",") if x]
        if got["prompt_tokens"] != want_p:
            return False, f"prompt ids differ: got {got['prompt_tokens']} want {want_p}"
        g = got["tokens"]
        n = len(want_g)
        i = next((k for k in range(max(len(g), n)) if k >= len(g) or k >= n or g[k] != want_g[k]), None)
        if i is None:
            return True, f"{n}/{n} ids identical"
        gap = gaps[i] if i < len(gaps) else None
        a = g[i] if i < len(g) else "end"
        b = want_g[i] if i < n else "end"
        where = f"{i}/{n} ids identical, then deltafin {a} vs llama.cpp {b} where llama.cpp's gap is " + \
                (f"{gap:.4f}" if gap is not None else "unknown")
        if gap is not None and gap < near_tie:
            return True, where + f" (a near-tie, < {near_tie})"
        return False, where

    def ppl(self, model, extra_env=None):
        """`deltafin perplexity -c 128 -b 32` on tests/data/ppl_story.txt: (PPL, None) or (None, error)."""
        rc, out, err = self.run(["perplexity", "-m", model, "-f", "tests/data/ppl_story.txt", "-c", "128", "-b", "32",
                                 "-t", "2"], extra_env)
        m = re.findall(r"PPL\s*=\s*([0-9.eE+-]+)", out + "\n" + err)
        return (float(m[-1]) if m else None), (None if m else f"exit {rc}: {self.last(err)}")
