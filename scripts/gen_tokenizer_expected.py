#!/usr/bin/env python3
"""Regenerate tests/data/tokenizer/*: expected token ids from llama.cpp's llama-tokenize.

There are no vocab fixtures for qwen2 / llama-bpe / deepseek-v3 / kimi-k2 / gpt-4o ... (the
real vocab files are too large to ship), so every pre-tokenizer is exercised on the GPT-2
vocabulary (tokens + merges) with tokenizer.ggml.pre replaced, and llama.cpp's output on that
derived file is the expected data. Cases with "special" also re-type a few tokens (control /
user-defined) to test special-token partitioning. tests/test_tokenizer.c rebuilds the very
same derived files with deltafin's GGUF writer and compares.

usage: /usr/bin/python3 scripts/gen_tokenizer_expected.py [LLAMA_CPP_DIR]
(needs numpy; LLAMA_CPP_DIR defaults to ../llama.cpp, built with llama-tokenize)
"""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LLAMA = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "..", "llama.cpp"))
sys.path.insert(0, os.path.join(LLAMA, "gguf-py"))
import gguf  # noqa: E402

FIX = os.environ.get("DELTAFIN_FIXTURES", os.path.join(ROOT, "..", "shared", "fixtures"))
SRC = os.path.join(FIX, "vocab", "ggml-vocab-gpt-2.gguf")
OUT = os.path.join(ROOT, "tests", "data", "tokenizer")
TOK = os.path.join(LLAMA, "build", "bin", "llama-tokenize")
SEP = "\n__ggml_vocab_test__\n"

# (case name, tokenizer.ggml.pre, parse_special, add_special, retype)
# retype: {token text: token_type} applied to the derived vocab (3 control, 4 user-defined)
RETYPE = {"hello": 4, "world": 3, "<|endoftext|>": 3, "Hello": 4}
CASES = [
    ("gpt-2", "gpt-2", False, False, None),
    ("llama-bpe", "llama-bpe", False, False, None),
    ("qwen2", "qwen2", False, False, None),
    ("qwen35", "qwen35", False, False, None),
    ("deepseek-v3", "deepseek-v3", False, False, None),
    ("deepseek-llm", "deepseek-llm", False, False, None),
    ("deepseek-coder", "deepseek-coder", False, False, None),
    ("kimi-k2", "kimi-k2", False, False, None),
    ("gpt-4o", "gpt-4o", False, False, None),
    ("tekken", "tekken", False, False, None),
    ("falcon", "falcon", False, False, None),
    ("default", "default", False, False, None),
    ("starcoder", "starcoder", False, False, None),
    ("olmo", "olmo", False, False, None),
    ("seed-coder", "seed-coder", False, False, None),
    ("special-plain", "llama-bpe", False, True, RETYPE),
    ("special-parse", "llama-bpe", True, True, RETYPE),
]

EXTRA = [
    "it's IT'S It'S we'LL they'Re I'd 'tis '",
    "don't ſ'S K'K",
    "Éclair helloÉcole ÉCOLE straße ǅungla Ǆ",
    "naïve cafe\u0301 e\u0301\u0301x \u0301start",
    "Привет Мир ПРИВЕТмир",
    "中文にほんごカタカナ한국어 漢字かな交じり文",
    "\u3400\u4db5 \U00020000\U0002a6d6 \U0002b740 \uf900\uf9ff \u2e80\u2f00\u3005\u3007",
    "1234567 12 ١٢٣٤ ½ ⅧⅫ ²³ 0x1F 3.14159",
    "a\u00a0b\u3000c\u2009d\u180ee\u0085f\u2028g",
    "  leading  and   trailing   ",
    "\t\ttabs\t \n\n\r\n mixed \r\r\n",
    "~ ~~ ~! !~ ~abc ~~abc a~b ¬± ×÷ ∑∫ ‰ «»",
    "hello world Hello World helloworld <|endoftext|>hello<|endoftext|>",
    "<|endoftext|><|endoftext|> world<|endoftext|> hello",
    "emoji 🦙👍🏽 👨\u200d👩\u200d👧 ❤️ 🇫🇷",
    "http://example.com/a/b?c=d&e=f#g a/b\n/ path/to/file.txt //\n",
    "def f(x):\n    return x**2 + 1  # comment\n\n\n",
    "हिन्दी ไทย ภาษา العربية עברית",
    "ALLCAPS CamelCase camelCase mIxEd ABCdef abcDEF",
    "ＦＵＬＬ ｗｉｄｔｈ！？ 。、「」 ‘quoted’ “double”",
    "\u200b\u200c\u200d\ufeff\u00ad zero width",
    "\x01\x02\x7f\x1b[0m control",
    "a" * 300 + " " + "Z" * 50,
    "9" * 40,
    "x\u0301" * 20,
    "αβγ ΑΒΓ ǈ ǋ",
    "'''\"\"\"```",
    "   \n   \n",
    "ℌℑℜ ℂℍℕ ℓ №",
    "🏳️\u200d🌈 flag",
]


def read_inp(path):
    with open(path, "rb") as f:
        parts = f.read().decode("utf-8").split(SEP)
    return parts[:-1]


def derive(pre, retype, path):
    r = gguf.GGUFReader(SRC)
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(path, arch)
    tokens = r.fields["tokenizer.ggml.tokens"].contents()
    for name, field in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        val = field.contents()
        vtype = gguf.GGUFValueType(field.types[0])
        sub = gguf.GGUFValueType(field.types[-1]) if vtype == gguf.GGUFValueType.ARRAY else None
        if name == "tokenizer.ggml.pre":
            val = pre
        if name == "tokenizer.ggml.token_type" and retype:
            val = list(val)
            for i, t in enumerate(tokens):
                if t in retype:
                    val[i] = retype[t]
        w.add_key_value(name, val, vtype, sub_type=sub)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    os.makedirs(OUT, exist_ok=True)
    strings = read_inp(SRC + ".inp") + EXTRA
    with open(os.path.join(OUT, "strings.inp"), "wb") as f:
        f.write("".join(s + SEP for s in strings).encode("utf-8"))
    tmp = tempfile.mkdtemp(prefix="df-tok-")
    for name, pre, parse_special, add_special, retype in CASES:
        path = os.path.join(tmp, name + ".gguf")
        derive(pre, retype, path)
        lines = []
        for s in strings:
            sf = os.path.join(tmp, "s.txt")
            with open(sf, "wb") as f:
                f.write(s.encode("utf-8"))
            cmd = [TOK, "-m", path, "-f", sf, "--ids", "--no-escape", "--log-disable"]
            if not add_special:
                cmd.append("--no-bos")
            if not parse_special:
                cmd.append("--no-parse-special")
            res = subprocess.run(cmd, capture_output=True, text=True, check=True)
            ids = res.stdout.strip().strip("[]").replace(",", " ").split()
            lines.append(" " + " ".join(ids) if ids else "")
        with open(os.path.join(OUT, name + ".out"), "w") as f:
            f.write("\n".join(lines) + "\n")
        print(name, len(lines))


if __name__ == "__main__":
    main()
