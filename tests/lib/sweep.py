"""sweep.py — what every bad-input sweep shares: run a deltafin command on one bad input and
classify the outcome (Python standard library only).

  crash   killed by a signal (or an AddressSanitizer / UBSan report)
  hang    still running at the deadline
  unclear exit 0 where a refusal was due, or an error message that does not name what it must
          (the file, and the section / key / tensor / field at fault)
  lost    an input or output file damaged or left complete-looking when it must not be
The row a sweep adds to $DELTAFIN_SWEEP_OUT/sweep.tsv is "class, cases, crashes, hangs, unclear,
lost" (scripts/sweep_table.sh turns the rows into the table in docs/testing.md).
"""
import os
import re
import subprocess


class Sweep:
    def __init__(self, label, verbose=False):
        self.label = label
        self.n = {"cases": 0, "crash": 0, "hang": 0, "unclear": 0, "lost": 0}
        self.verbose = verbose
        self.failures = []

    def run(self, args, timeout=60, env=None):
        e = dict(os.environ)
        if env:
            e.update(env)
        try:
            p = subprocess.run(args, capture_output=True, timeout=timeout, env=e)
            return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
        except subprocess.TimeoutExpired as t:
            return None, (t.stdout or b"").decode("utf-8", "replace"), (t.stderr or b"").decode("utf-8", "replace")

    def judge(self, name, rc, out, err, want_fail=True, must=(), may_pass=False):
        """want_fail: the input must be refused (rc 1 or 2); must: regexes the message must match
        (all); may_pass: rc 0 is acceptable too (the damage left the input valid)."""
        self.n["cases"] += 1
        text = out + err
        verdict = "ok"
        if rc is None:
            verdict = "hang"
        elif rc < 0 or rc >= 128 or "AddressSanitizer" in text or "runtime error:" in text:
            verdict = "crash"
        elif rc == 0:
            if want_fail and not may_pass:
                verdict = "unclear"
        elif not all(re.search(m, text) for m in must):
            verdict = "unclear"
        if verdict != "ok":
            self.n[verdict] += 1
            self.failures.append("%s %s: rc=%s %s" % (verdict, name, rc, text.strip()[-300:]))
        if self.verbose or verdict != "ok":
            print("%-7s %s: rc=%s %s" % (verdict, name, rc, text.strip().splitlines()[-1][:200] if text.strip() else ""))
        return verdict

    def lost(self, name, why):
        self.n["cases"] += 1
        self.n["lost"] += 1
        self.failures.append("lost %s: %s" % (name, why))
        print("lost    %s: %s" % (name, why))

    def finish(self):
        n = self.n
        print("%s: %d cases, crashes %d, hangs %d, unclear %d, lost %d" %
              (self.label, n["cases"], n["crash"], n["hang"], n["unclear"], n["lost"]))
        out = os.environ.get("DELTAFIN_SWEEP_OUT")
        if out:
            with open(os.path.join(out, "sweep.tsv"), "a") as f:
                f.write("%s\t%d\t%d\t%d\t%d\t%d\n" % (self.label, n["cases"], n["crash"], n["hang"], n["unclear"], n["lost"]))
        return 1 if n["crash"] + n["hang"] + n["unclear"] + n["lost"] else 0
