"""http_sweep.py — hostile HTTP against `deltafin serve` (Python standard library only).

usage: http_sweep.py DELTAFIN_BIN MODEL WORKDIR
Starts `serve -np 4` on a free loopback port and sends what a hostile or broken client sends:
invalid JSON of many kinds, deep nesting, huge bodies and numbers, invalid UTF-8 (raw and in
\\u escapes), Content-Length lies, malformed request lines and headers, slow clients, 64
concurrent streaming clients that hang up mid-stream, then SIGTERM with a request running.
Every case states what must come back (status, error code, words of the message) and is
classified: ok, crash (the server died), hang (no answer within its deadline), unclear (any
other answer), lost (an answer that was due never came). Prints one line per case, then
"http_sweep: N cases, crashes C, hangs H, unclear U, lost L" and exits 1 unless all are ok.
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

BIN, MODEL, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
res = {"cases": 0, "crash": 0, "hang": 0, "unclear": 0, "lost": 0}
srv = None
PORT = 0
stopped = False


def start(extra=()):
    global srv, PORT
    out = open(os.path.join(WORK, "srv.out"), "w")
    err = open(os.path.join(WORK, "srv.err"), "w")
    srv = subprocess.Popen([BIN, "serve", "-m", MODEL, "--port", "0", "-np", "4", "--queue", "64", "-c", "2048",
                            "--timeout", "2", "--max-body", "1M", "-v", *extra], stdout=out, stderr=err)
    for _ in range(1200):  # up to 120 s: a loaded machine
        txt = open(os.path.join(WORK, "srv.out")).read()
        m = re.search(r"127\.0\.0\.1:(\d+)", txt)
        if m and "ready" in txt:
            PORT = int(m.group(1))
            return
        if srv.poll() is not None:
            break
        time.sleep(0.1)
    print("http_sweep: the server did not start:", open(os.path.join(WORK, "srv.err")).read()[-500:])
    sys.exit(1)


def alive():
    return srv.poll() is None


def raw(data, timeout=10.0, read_all=True, delay=None):
    """send bytes (or a list of chunks with delay between them); return (status, body, elapsed)"""
    t0 = time.time()
    s = socket.create_connection(("127.0.0.1", PORT), timeout=timeout)
    try:
        chunks = data if isinstance(data, list) else [data]
        for c in chunks:
            try:
                s.sendall(c)
            except (BrokenPipeError, ConnectionResetError):
                break  # the server answered early (413) and closed: read what it said
            if delay:
                time.sleep(delay)
        buf = b""
        while True:
            try:
                b = s.recv(65536)
            except socket.timeout:
                return None, buf, time.time() - t0
            except ConnectionResetError:
                break
            if not b:
                break
            buf += b
            if not read_all and b"\r\n\r\n" in buf:
                head, _, body = buf.partition(b"\r\n\r\n")
                m = re.search(rb"Content-Length: *(\d+)", head, re.I)
                if m and len(body) >= int(m.group(1)):
                    break
    finally:
        s.close()
    m = re.match(rb"HTTP/1\.[01] (\d{3})", buf)
    return (int(m.group(1)) if m else 0), buf.partition(b"\r\n\r\n")[2], time.time() - t0


def post(path, body, headers=(), timeout=30.0):
    if isinstance(body, str):
        body = body.encode()
    h = "".join("%s: %s\r\n" % kv for kv in headers)
    req = ("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n%s"
           "Content-Length: %d\r\n\r\n" % (path, h, len(body))).encode() + body
    return raw(req, timeout)


def case(name, status, got, body, code=None, words=(), elapsed=None, deadline=None):
    res["cases"] += 1
    verdict = "ok"
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
    if not alive() and not stopped:
        verdict = "crash"
    elif got is None or (deadline is not None and elapsed is not None and elapsed > deadline):
        verdict = "hang"
    elif status is not None and got != status:
        verdict = "unclear"
    elif code and ('"code":"%s"' % code) not in text:
        verdict = "unclear"
    elif any(w not in text for w in words):
        verdict = "unclear"
    if verdict != "ok":
        res[verdict] += 1
    print("%-7s %s: %s %s" % (verdict, name, got, text[:160].replace("\n", " ")))
    if verdict == "crash":
        print(open(os.path.join(WORK, "srv.err")).read()[-2000:])
        finish()


def finish():
    print("http_sweep: %(cases)d cases, crashes %(crash)d, hangs %(hang)d, unclear %(unclear)d, lost %(lost)d" % res)
    out = os.environ.get("DELTAFIN_SWEEP_OUT")
    if out:
        with open(os.path.join(out, "sweep.tsv"), "a") as f:
            f.write("hostile HTTP (serve)\t%(cases)d\t%(crash)d\t%(hang)d\t%(unclear)d\t%(lost)d\n" % res)
    if srv and srv.poll() is None:
        srv.kill()
    bad = res["crash"] + res["hang"] + res["unclear"] + res["lost"]
    sys.exit(1 if bad else 0)


start()
C = "/v1/chat/completions"
P = "/v1/completions"
MSG = '{"role":"user","content":"hi"}'

# ---- invalid JSON ---------------------------------------------------------------------------
for name, b in [("truncated object", '{"messages":[' + MSG), ("trailing comma", '{"messages":[%s],}' % MSG),
                ("single quotes", "{'messages':[]}"), ("NaN literal", '{"prompt":"a","temperature":NaN}'),
                ("bare word", "hello"), ("only whitespace", "   \n\t "), ("empty", ""),
                ("control character in a string", '{"prompt":"a\x01b"}'), ("raw ESC in a key", '{"pr\x1bompt":"a"}'),
                ("two objects", '{"prompt":"a"}{"prompt":"b"}'), ("unterminated string", '{"prompt":"abc'),
                ("lone backslash escape", '{"prompt":"\\q"}'), ("number at top", "42"), ("null at top", "null")]:
    st, body, _ = post(P, b)
    case("invalid JSON: " + name, 400, st, body, None, ('"error"',))
# a byte-order mark may be ignored (RFC 8259 8.1): accepted, or refused as JSON, never a crash
st, body, _ = post(P, "\ufeff" + '{"prompt":"a","max_tokens":1}')
case("BOM before the JSON (accepted)", 200, st, body, None, ('"choices"',))
# ---- deep nesting, huge numbers -------------------------------------------------------------
for depth in (100, 2000, 200000):
    b = '{"prompt":"a","x":' + "[" * depth + "]" * depth + "}"
    st, body, _ = post(P, b[: 1 << 20])
    case("nesting %d deep" % depth, 400 if depth > 1000 else None, st, body, None, ('"error"',) if depth > 1000 else ())
b = '{"messages":' + '[{"role":"user","content":' * 5000 + '"x"' + "}]" * 5000 + "}"
st, body, _ = post(C, b)
case("messages nested 5000 deep", 400, st, body, None, ('"error"',))
for name, b, code in [("max_tokens 1e308", '{"prompt":"a","max_tokens":1e308}', None),
                      ("temperature 1e999 (inf)", '{"prompt":"a","temperature":1e999}', None),
                      ("seed -1e30", '{"prompt":"a","seed":-1e30}', None),
                      ("top_k 2^63", '{"prompt":"a","top_k":9223372036854775808}', None),
                      ("n_probs as string", '{"prompt":"a","logprobs":"5"}', None),
                      ("10^5 stop strings", '{"prompt":"a","stop":[' + ",".join(['"s"'] * 100000) + "]}", None),
                      ("prompt of 10^5 token ids", '{"prompt":[' + ",".join(["1"] * 100000) + '],"max_tokens":1}', None)]:
    st, body, _ = post(P, b)
    case(name, 400, st, body, code, ('"error"',))
# ---- huge bodies ----------------------------------------------------------------------------
st, body, el = raw(("POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000000\r\n\r\n" % P).encode(), 10)
case("Content-Length 10 GB announced", 413, st, body, "payload_too_large", elapsed=el, deadline=5)
big = b'{"prompt":"' + b"a" * (3 << 20) + b'"}'
st, body, el = post(P, big)
case("3 MiB body", 413, st, body, "payload_too_large", elapsed=el, deadline=20)
chunked = (("POST %s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" % P).encode() +
           b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in [big[i:i + 65536] for i in range(0, len(big), 65536)]) + b"0\r\n\r\n")
st, body, el = raw(chunked, 20)
case("3 MiB chunked body", 413, st, body, "payload_too_large", elapsed=el, deadline=20)
# ---- invalid UTF-8 --------------------------------------------------------------------------
for name, b in [("overlong NUL C0 80", b'{"prompt":"a\xc0\x80"}'), ("5-byte sequence", b'{"prompt":"\xf8\x88\x80\x80\x80"}'),
                ("lone continuation byte", b'{"prompt":"\x80"}'), ("truncated sequence", b'{"prompt":"\xe2\x82"}'),
                ("raw surrogate", b'{"prompt":"\xed\xb0\x80"}'), ("above U+10FFFF", b'{"prompt":"\xf4\x90\x80\x80"}'),
                ("invalid UTF-8 in a key", b'{"pro\xffmpt":"a"}'), ("invalid UTF-8 in a message", b'{"messages":[{"role":"user","content":"\xfe"}]}')]:
    st, body, _ = post(C if b"messages" in b else P, b)
    case("invalid UTF-8: " + name, 400, st, body, "invalid_utf8")
for name, b in [("unpaired \\ud800", '{"prompt":"a\\ud800b"}'), ("lone \\udc00", '{"prompt":"\\udc00"}'),
                ("\\u0000 in a prompt", '{"prompt":"a\\u0000b","max_tokens":2}')]:
    st, body, _ = post(P, b)
    if "0000" in name:
        case(name + " (accepted or refused, never a crash)", None, st, body)
    else:
        case(name, 400, st, body, None, ('"error"',))
# ---- Content-Length lies and broken requests --------------------------------------------------
st, body, el = raw(("POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"prompt\":" % P).encode(), 15)
case("Content-Length 100, 10 bytes sent, then silence: dropped at --timeout", None, st if st is not None else 0, body,
     elapsed=el, deadline=8)
st, body, el = raw(("POST %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 5\r\n\r\n{\"prompt\":\"a\",\"max_tokens\":1}" % P).encode(), 10)
case("Content-Length shorter than the body", 400, st, body, None, ('"error"',))
for name, hdr in [("Content-Length -1", "Content-Length: -1"), ("Content-Length abc", "Content-Length: abc"),
                  ("two different Content-Lengths", "Content-Length: 5\r\nContent-Length: 7")]:
    st, body, el = raw(("POST %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n%s\r\n\r\n{\"prompt\":\"a\"}" % (P, hdr)).encode(), 10)
    case(name, 400, st, body, elapsed=el, deadline=8)
for name, req, want in [("garbage request line", b"GARBAGE\r\n\r\n", 400), ("no Host (HTTP/1.1)", b"GET /health HTTP/1.1\r\n\r\n", 400),
                        ("HTTP/1.0 GET /health", b"GET /health HTTP/1.0\r\n\r\n", 200),
                        ("header of 100 KB", b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 100000 + b"\r\n\r\n", 431),
                        ("PUT on a POST endpoint", ("PUT %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 0\r\n\r\n" % C).encode(), 405),
                        ("unknown path", b"GET /etc/passwd HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 404),
                        ("path with ../ and NUL", b"GET /../..%00/x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 404)]:
    st, body, el = raw(req, 10)
    if name.startswith(("header of", "garbage", "no Host")):
        # libmicrohttpd's call: 431/400, closing the connection, or (no Host) serving it anyway
        case(name + " (%s)" % ("closed" if st == 0 else st), None, st, body, elapsed=el, deadline=8)
        if st not in (0, 200, 400, 431):
            res["unclear"] += 1
    else:
        case(name, want, st, body, elapsed=el, deadline=8)
# ---- slow clients ---------------------------------------------------------------------------
def slowloris(results, i):
    try:
        s = socket.create_connection(("127.0.0.1", PORT), timeout=20)
        t0 = time.time()
        closed = False
        for ch in ("POST %s HTTP/1.1\r\nHost: x\r\n" % P):
            try:
                s.sendall(ch.encode())
            except OSError:
                closed = True
                break
            time.sleep(0.3)
            if time.time() - t0 > 12:
                break
        if not closed:
            try:
                s.settimeout(10)
                closed = s.recv(100) == b"" or True
            except OSError:
                closed = True
        results[i] = (closed, time.time() - t0)
        s.close()
    except OSError:
        results[i] = (True, 0)


slow = [None] * 20
ths = [threading.Thread(target=slowloris, args=(slow, i)) for i in range(20)]
for t in ths:
    t.start()
time.sleep(0.5)
st, body, el = post(P, '{"prompt":"Once upon","max_tokens":8,"seed":1}')
case("a normal request while 20 slow clients trickle headers", 200, st, body, None, ('"choices"',), el, 20)
for t in ths:
    t.join()
closed = sum(1 for r in slow if r and r[0] and r[1] < 15)
case("20 slow clients dropped by the server (--timeout 2)", 20, closed, str(slow[:2]))
# ---- 64 concurrent streaming clients hanging up mid-stream -----------------------------------
def streamer(i, out):
    try:
        s = socket.create_connection(("127.0.0.1", PORT), timeout=30)
        b = json.dumps({"prompt": "Story %d:" % i, "max_tokens": 2000, "stream": True, "seed": i}).encode()
        s.sendall(("POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (P, len(b))).encode() + b)
        got = b""
        t0 = time.time()
        while b"data: {" not in got and time.time() - t0 < (0.3 + 0.02 * i):
            s.settimeout(0.3)
            try:
                c = s.recv(4096)
                if not c:
                    break
                got += c
            except socket.timeout:
                pass
        out[i] = got[:12]
        s.close()  # hang up mid-stream (or while queued)
    except OSError as e:
        out[i] = str(e).encode()


outs = [None] * 64
ths = [threading.Thread(target=streamer, args=(i, outs)) for i in range(64)]
for t in ths:
    t.start()
for t in ths:
    t.join()
time.sleep(1)
st, body, el = post(P, '{"prompt":"After the storm","max_tokens":16,"seed":3}', timeout=60)
case("64 streaming clients hung up mid-stream: the next request is served", 200, st, body, None, ('"choices"',), el, 60)
busy = None
for _ in range(100):
    _, m, _ = raw(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 10)
    mm = re.search(rb"deltafin_requests_processing (\d+)", m)
    busy = int(mm.group(1)) if mm else -1
    if busy == 0:
        break
    time.sleep(0.1)
case("after the hang-ups every slot is free again (requests_processing 0)", 0, busy, str(busy))
# ---- SIGTERM drain with a request running ----------------------------------------------------
drain = {}


def long_req():
    drain["r"] = post(P, '{"prompt":"Drain","max_tokens":300,"seed":2}', timeout=120)


t = threading.Thread(target=long_req)
t.start()
time.sleep(0.5)
stopped = True
srv.send_signal(signal.SIGTERM)
t.join()
rc = srv.wait(timeout=60)
st, body, el = drain["r"]
res["cases"] += 1
if st != 200 or b'"choices"' not in body:
    res["lost"] += 1
    print("lost    SIGTERM drain: the running request got %s %s" % (st, body[:160]))
else:
    print("ok      SIGTERM drain: the running request completed (%d bytes)" % len(body))
case("SIGTERM: the server exits 0 after draining", 0, rc, str(rc))
log = open(os.path.join(WORK, "srv.err")).read()
case("no libmicrohttpd option-order warning in the log", None, 0, log[-200:] if "not the first option" in log else "")
if "not the first option" in log:
    res["unclear"] += 1
finish()
