"""pull_server.py — loopback HTTP server for tests/test_pull.sh (Python standard library only).

usage: /usr/bin/python3 tests/pull_server.py ROOT PORTFILE LOGFILE [LIFETIME_S]
Binds 127.0.0.1 on a free port, writes the port to PORTFILE, logs one line per request
("PATH RANGE") to LOGFILE and exits by itself after LIFETIME_S seconds (default 60).
Files under ROOT are served at:
  /f/NAME        normally, with HTTP Range support (206 + Content-Range, 416 past the end)
  /drop/NAME     the first request for NAME sends the headers of the full answer, half the
                 bytes, then closes the connection; later requests behave like /f/
  /corrupt/NAME  like /f/ but one byte in the middle is flipped
  /busy/NAME     the first request gets 503, later ones behave like /f/
  /norange/NAME  ignores Range (always 200 with the whole file)
  /auth/NAME     401 unless the request has "Authorization: Bearer sekrit"
  /html/NAME     200 with an HTML page (what a wrong link or a login wall returns)
  /lie/NAME      claims 1000 more bytes than it has (Content-Length), sends the file, closes
  /short/NAME    claims the right size but every answer stops halfway and closes
  /dead/NAME     claims the right size, sends nothing and closes
  /shortlie/NAME a 200 with Content-Length of half the file and only that half: "complete"
  /loop/NAME     a redirect to itself, forever
  /wrong/NAME    the bytes of ROOT/other.gguf instead of NAME
The Hugging Face Hub API paths, over ROOT/hub/ORG/REPO/...:
  /api/models/ORG/REPO/tree/main?recursive=true  the file list: [{"type","path","size","oid",
                 "lfs":{"oid": SHA-256,"size"}}] (directories too), split into pages of 3
                 entries with a Link: <...&cursor=K>; rel="next" header; a file named
                 "badsum" in the repository makes every listed SHA-256 wrong
  /ORG/REPO/resolve/main/PATH                    the file, as /f/
The log line ends with " auth" when the request carried an Authorization header.
"""
import hashlib
import http.server
import json
import os
import sys
import threading
import urllib.parse

ROOT, PORTFILE, LOGFILE = sys.argv[1], sys.argv[2], sys.argv[3]
LIFETIME = float(sys.argv[4]) if len(sys.argv) > 4 else 60.0
MODES = ("f", "dead", "drop", "corrupt", "busy", "norange", "auth", "html", "lie", "short", "shortlie", "loop", "wrong")
seen = set()
lock = threading.Lock()


def listing(repo_dir):
    out = []
    bad = os.path.exists(os.path.join(repo_dir, "badsum"))
    for base, dirs, files in sorted(os.walk(repo_dir)):
        rel = os.path.relpath(base, repo_dir)
        for d in sorted(dirs):
            out.append({"type": "directory", "path": os.path.normpath(os.path.join(rel, d)), "oid": "0" * 40, "size": 0})
        for f in sorted(files):
            p = os.path.join(base, f)
            data = open(p, "rb").read()
            sha = hashlib.sha256(data).hexdigest()
            if bad:
                sha = "0" * 8 + sha[8:]
            out.append({"type": "file", "path": os.path.normpath(os.path.join(rel, f)), "size": len(data),
                        "oid": hashlib.sha1(data).hexdigest(), "lfs": {"oid": sha, "size": len(data), "pointerSize": 134}})
    return out


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def send_body(self, code, body, ctype="application/octet-stream", extra=()):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def serve_file(self, data, mode, first, rng):
        start = 0
        if rng.startswith("bytes=") and mode != "norange":
            start = int(rng[6:].split("-")[0])
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % len(data))
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
        else:
            self.send_response(200)
        body = bytes(data[start:])
        claim = len(body) + (1000 if mode == "lie" else 0)
        if mode == "shortlie":
            body = body[: len(body) // 2]
            claim = len(body)
        self.send_header("Content-Length", str(claim))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        if mode == "dead":
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            return
        if (mode == "drop" and first) or mode == "short":
            self.wfile.write(body[: max(1, len(body) // 2)])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            return
        self.wfile.write(body)
        if mode == "lie":
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)

    def do_GET(self):
        rng = self.headers.get("Range", "-")
        with lock:
            with open(LOGFILE, "a") as lf:
                lf.write("%s %s%s\n" % (self.path, rng, " auth" if self.headers.get("Authorization") else ""))
        u = urllib.parse.urlsplit(self.path)
        if u.path.startswith("/api/models/") and u.path.endswith("/tree/main"):
            repo = u.path[len("/api/models/"):-len("/tree/main")]
            d = os.path.join(ROOT, "hub", repo)
            if not os.path.isdir(d):
                return self.send_error(404)
            items = listing(d)
            q = urllib.parse.parse_qs(u.query)
            cur = int(q.get("cursor", ["0"])[0])
            page = items[cur:cur + 3]
            extra = []
            if cur + 3 < len(items):
                extra.append(("Link", '<http://127.0.0.1:%d%s?recursive=true&cursor=%d>; rel="next"'
                              % (self.server.server_address[1], u.path, cur + 3)))
            return self.send_body(200, json.dumps(page).encode(), "application/json", extra)
        if "/resolve/main/" in u.path:
            repo, path = u.path[1:].split("/resolve/main/", 1)
            p = os.path.join(ROOT, "hub", repo, path)
            if not os.path.isfile(p):
                return self.send_error(404)
            return self.serve_file(open(p, "rb").read(), "f", False, rng)
        parts = u.path.split("/", 2)
        if len(parts) != 3 or parts[1] not in MODES:
            return self.send_error(404)
        mode, name = parts[1], parts[2]
        with lock:
            first = (mode, name) not in seen
            seen.add((mode, name))
        if mode == "loop":
            self.send_response(302)
            self.send_header("Location", self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if mode == "html":
            return self.send_body(200, b"<!DOCTYPE html>\n<html><head><title>Model page</title></head><body>"
                                  b"a web page, not the file</body></html>\n", "text/html; charset=utf-8")
        path = os.path.join(ROOT, "other.gguf" if mode == "wrong" else os.path.basename(name))
        if not os.path.isfile(path):
            return self.send_error(404)
        with open(path, "rb") as f:
            data = bytearray(f.read())
        if mode == "corrupt" and data:
            data[len(data) // 2] ^= 0x01
        if mode == "auth" and self.headers.get("Authorization") != "Bearer sekrit":
            return self.send_error(401)
        if mode == "busy" and first:
            return self.send_error(503)
        self.serve_file(data, mode, first, rng)


class Srv(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # clients that hang up (the point of several tests) are not errors here


srv = Srv(("127.0.0.1", 0), H)
threading.Timer(LIFETIME, srv.shutdown).start()
with open(PORTFILE + ".tmp", "w") as pf:
    pf.write(str(srv.server_address[1]))
os.rename(PORTFILE + ".tmp", PORTFILE)
srv.serve_forever()
