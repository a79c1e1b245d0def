#!/bin/sh
# deltafin chat on a real terminal (tmux: send-keys in, capture-pane out): the line editor's
# history (Up recalls the last message; the file outlives the run and is the user's alone),
# a multi-line message (trailing backslash) sent as one turn, /help answered and never sent
# to the model, an unknown /command refused, /save and /load, Ctrl-C at the prompt asking
# for a second one and the second ending the program with status 0, and the notice when an
# answer fills the context. The conversation itself is read back through /save.
BIN=${DELTAFIN_BIN:-build/deltafin}
FIX=${DELTAFIN_FIXTURES:-../shared/fixtures}
M="$FIX/models/llama-2-tiny-random.gguf"
[ -f "$M" ] || { echo "test_chat_tty: SKIP (no $M)"; exit 0; }
command -v tmux >/dev/null 2>&1 || { echo "test_chat_tty: SKIP (no tmux; scripts/deps.sh installs it)"; exit 0; }
case "$BIN" in /*) ;; *) BIN="$(pwd)/$BIN" ;; esac
case "$M" in /*) ;; *) M="$(pwd)/$M" ;; esac
T=$(mktemp -d)
RUN=0
SOCK="df_chat_tty_$$_0"
tm() { tmux -L "$SOCK" -f /dev/null "$@"; }
cleanup() { tm kill-server 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT INT TERM
fail() {
    echo "test_chat_tty: FAIL: $*"
    echo "  --- screen:"; tm capture-pane -p -t chat 2>/dev/null | sed '/^$/d; s/^/  /' | tail -25
    [ -f "$T/err" ] && { echo "  --- stderr:"; sed 's/^/  /' "$T/err" | tail -20; }
    exit 1
}
screen() { tm capture-pane -p -J -t chat -S -200 2>/dev/null; }
# wait_for WHAT REGEX [FILE]: the screen (or FILE) shows REGEX within 60 s
wait_for() {
    i=0
    while [ $i -lt 600 ]; do
        if [ -n "$3" ]; then grep -q -- "$2" "$3" 2>/dev/null && return 0
        else screen | grep -q -- "$2" && return 0; fi
        sleep 0.1; i=$((i+1))
    done
    fail "timed out waiting for $1"
}
nturns() { grep -c '^\[turn' "$T/err" 2>/dev/null || true; }
# start CHAT-ARGS: chat in a fresh tmux session named chat; stderr to $T/err, status to $T/rc
start() {
    rm -f "$T/rc" "$T/err"
    tm kill-server 2>/dev/null
    RUN=$((RUN+1)); SOCK="df_chat_tty_$$_$RUN" # a fresh server: the last one may still be exiting
    tm new-session -d -s chat -x 150 -y 50 \
        "HOME='$T' '$BIN' chat -m '$M' -c 256 --temp 0 --stats $* 2>'$T/err'; echo \$? > '$T/rc'; sleep 30"
    wait_for "the first prompt" '^> '
}

start -n 4
tm send-keys -t chat '/help' Enter
wait_for "the /help text" '/save FILE'
tm send-keys -t chat '/bogus 1' Enter
wait_for "the unknown command notice" "unknown command '/bogus'" "$T/err"
[ "$(nturns)" -eq 0 ] || fail "a /command reached the model"

tm send-keys -t chat 'Hello there' Enter
wait_for "turn 1" '^\[turn 1\]' "$T/err"
# Up recalls "Hello there"; Enter sends it again
tm send-keys -t chat Up
wait_for "the recalled message" '^> Hello there'
tm send-keys -t chat Enter
wait_for "turn 2" '^\[turn 2\]' "$T/err"
# a trailing backslash continues the message on the next line: one turn, one message
tm send-keys -t chat 'first line \' Enter
wait_for "the continuation prompt" '^\.\.\. '
tm send-keys -t chat 'second line' Enter
wait_for "turn 3" '^\[turn 3\]' "$T/err"
tm send-keys -t chat "/save $T/conv.json" Enter
wait_for "the /save notice" "saved 6 messages"
python3 - "$T/conv.json" <<'EOF' || fail "the saved conversation is not the one typed"
import json, sys
m = json.load(open(sys.argv[1]))
roles = [x["role"] for x in m]
assert roles == ["user", "assistant"] * 3, roles
assert m[0]["content"] == "Hello there" and m[2]["content"] == "Hello there", m
assert m[4]["content"] == "first line \nsecond line", repr(m[4]["content"])
EOF
# /load continues a saved conversation: the next turn's prompt holds all of it
tm send-keys -t chat '/reset' Enter
wait_for "the reset notice" 'conversation cleared'
tm send-keys -t chat "/load $T/conv.json" Enter
wait_for "the /load notice" "loaded 6 messages"
tm send-keys -t chat 'and now' Enter
i=0; while [ "$(nturns)" -lt 4 ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
[ "$(nturns)" -eq 4 ] || fail "no answer after /load"
p3=$(grep '^\[turn 3\]' "$T/err" | sed -n 's/.*prompt \([0-9]*\) tokens.*/\1/p')
p4=$(grep '^\[turn 1\]' "$T/err" | sed -n 2p | sed -n 's/.*prompt \([0-9]*\) tokens.*/\1/p')
[ -n "$p3" ] && [ -n "$p4" ] && [ "$p4" -gt "$p3" ] || fail "after /load the prompt has $p4 tokens, not more than turn 3's $p3"
# Ctrl-C at the prompt: a notice, the program goes on; a second one ends it with status 0
tm send-keys -t chat C-c
wait_for "the Ctrl-C notice" 'Ctrl-C again to exit'
[ -f "$T/rc" ] && fail "one Ctrl-C at the prompt ended the program"
tm send-keys -t chat C-c
wait_for "the exit after the second Ctrl-C" '.' "$T/rc"
[ "$(cat "$T/rc")" = 0 ] || fail "exit status $(cat "$T/rc") after Ctrl-C twice"
# the history file outlived the run (libedit writes it vis(3)-encoded) and only its owner can read it
grep -q 'Hello.040there' "$T/.deltafin_history" || fail "the history file does not hold the messages"
perm=$(stat -c %a "$T/.deltafin_history")
[ "$perm" = 600 ] || fail "the history file is mode $perm, not 600"
# ... and a new run recalls it
start -n 4
tm send-keys -t chat Up
wait_for "history from the last run" '^> and now'
tm send-keys -t chat C-u '/exit' Enter
wait_for "the exit" '.' "$T/rc"

# an answer that fills the context ends with a notice (greedy on the random model never stops)
start -c 64 -n -1
tm send-keys -t chat 'Tell me a long story' Enter
wait_for "the context-full notice" 'context full'
screen | grep -q -- '--context-shift' || fail "the notice does not name --context-shift"
tm send-keys -t chat '/exit' Enter
wait_for "the exit" '.' "$T/rc"
echo "test_chat_tty: OK (history, Up, multi-line, /help, /save, /load, Ctrl-C twice, context full)"
