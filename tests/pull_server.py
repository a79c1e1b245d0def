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
The log line ends with " auth" when the request carried an Authorization header.
"""
import http.server
import os
import sys
import threading

ROOT, PORTFILE, LOGFILE = sys.argv[1], sys.argv[2], sys.argv[3]
LIFETIME = float(sys.argv[4]) if len(sys.argv) > 4 else 60.0
seen = set()
lock = threading.Lock()


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        parts = self.path.split("/", 2)
        if len(parts) != 3 or parts[1] not in ("f", "drop", "corrupt", "busy", "norange", "auth"):
            return self.send_error(404)
        mode, name = parts[1], parts[2]
        rng = self.headers.get("Range", "-")
        with lock:
            with open(LOGFILE, "a") as lf:
                lf.write("%s %s%s\n" % (self.path, rng, " auth" if self.headers.get("Authorization") else ""))
            first = (mode, name) not in seen
            seen.add((mode, name))
        path = os.path.join(ROOT, os.path.basename(name))
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
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        if mode == "drop" and first:
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            return
        self.wfile.write(body)


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
srv.daemon_threads = True
threading.Timer(LIFETIME, srv.shutdown).start()
with open(PORTFILE + ".tmp", "w") as pf:
    pf.write(str(srv.server_address[1]))
os.rename(PORTFILE + ".tmp", PORTFILE)
srv.serve_forever()
