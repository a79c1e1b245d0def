#!/usr/bin/python3
"""Render the reference chat-template outputs that tests/test_chat.c compares against.

Uses Python's jinja2 the way Hugging Face transformers' apply_chat_template does:
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, loopcontrols), a tojson
filter that calls json.dumps(ensure_ascii=False, ...), raise_exception() and strftime_now()
(fixed to 2026-01-15 12:00:00 UTC so the output is reproducible; tests/test_chat.c passes the
same instant to the C renderer).

For every template in tests/data/chat/templates.json and every conversation in
tests/data/chat/conversations/*.json it writes tests/data/chat/expected/<template>__<conv>.txt,
or <template>__<conv>.error (the exception text) when the template rejects the conversation.
If the immutable sandbox refuses list mutation (list.append / list.pop used by Kimi-K2-Instruct),
the render is repeated in the mutable SandboxedEnvironment (what llama.cpp and plain jinja do) and
the file name gets the same name; the fact is printed.

Run with Debian's python (needs python3-jinja2):
    /usr/bin/python3 scripts/render_chat_expected.py [fixtures/templates dir]
"""
import datetime
import glob
import json
import os
import sys

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data", "chat")
FIXED_NOW = datetime.datetime(2026, 1, 15, 12, 0, 0)


class TemplateError(Exception):
    pass


def raise_exception(message):
    raise TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def strftime_now(fmt):
    return FIXED_NOW.strftime(fmt)


class GenerationTag(jinja2.ext.Extension):
    """HF's AssistantTracker: {% generation %}...{% endgeneration %} renders its body."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        call = self.call_method("_render_body")
        return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _render_body(self, caller):
        return caller()


def make_env(cls):
    env = cls(trim_blocks=True, lstrip_blocks=True,
              extensions=[jinja2.ext.loopcontrols, GenerationTag])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(env, src, conv, bos, eos):
    kwargs = dict(conv.get("extra", {}))
    if bos is not None:
        kwargs["bos_token"] = bos
    if eos is not None:
        kwargs["eos_token"] = eos
    tmpl = env.from_string(src)
    return tmpl.render(messages=conv["messages"], tools=conv.get("tools"), documents=None,
                       add_generation_prompt=conv.get("add_generation_prompt", False), **kwargs)


def main():
    fixtures = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(ROOT), "shared", "fixtures", "templates")
    with open(os.path.join(DATA, "templates.json"), encoding="utf-8") as f:
        templates = json.load(f)
    convs = sorted(glob.glob(os.path.join(DATA, "conversations", "*.json")))
    outdir = os.path.join(DATA, "expected")
    os.makedirs(outdir, exist_ok=True)
    for old in glob.glob(os.path.join(outdir, "*")):
        os.remove(old)
    immutable, mutable = make_env(ImmutableSandboxedEnvironment), make_env(SandboxedEnvironment)
    n_ok = n_err = 0
    for name, info in templates.items():
        fn = info["file"]
        path = os.path.join(DATA, "templates", fn[1:]) if fn.startswith("@") else os.path.join(fixtures, fn)
        with open(path, encoding="utf-8", newline="") as f:
            src = f.read()
        for cpath in convs:
            cname = os.path.splitext(os.path.basename(cpath))[0]
            with open(cpath, encoding="utf-8") as f:
                conv = json.load(f)
            base = os.path.join(outdir, f"{name}__{cname}")
            try:
                try:
                    out = render(immutable, src, conv, info["bos"], info["eos"])
                except jinja2.exceptions.SecurityError as e:
                    print(f"note: {name}/{cname}: immutable sandbox refused ({e}); mutable sandbox used")
                    out = render(mutable, src, conv, info["bos"], info["eos"])
            except (TemplateError, jinja2.exceptions.TemplateError, TypeError, AttributeError,
                    KeyError, IndexError, ValueError) as e:
                with open(base + ".error", "w", encoding="utf-8") as f:
                    f.write(f"{type(e).__name__}: {e}\n")
                n_err += 1
                continue
            with open(base + ".txt", "w", encoding="utf-8", newline="") as f:
                f.write(out)
            n_ok += 1
    print(f"{n_ok} renders, {n_err} rejected -> {outdir}")
    render_snippets(mutable)


def render_snippets(env):
    """tests/data/chat/snippets.json: {"vars": {...}, "snippets": [template, ...]} ->
    snippets_expected.json: [{"out": text} | {"error": message}, ...] (mutable sandbox, fresh
    copy of the variables for every snippet)."""
    import copy
    with open(os.path.join(DATA, "snippets.json"), encoding="utf-8") as f:
        spec = json.load(f)
    results = []
    for src in spec["snippets"]:
        try:
            out = env.from_string(src).render(**copy.deepcopy(spec["vars"]))
            results.append({"out": out})
        except Exception as e:  # any jinja2 or Python error: the C renderer must fail too
            results.append({"error": f"{type(e).__name__}: {e}"})
    with open(os.path.join(DATA, "snippets_expected.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{len(results)} snippets -> snippets_expected.json")


if __name__ == "__main__":
    main()
