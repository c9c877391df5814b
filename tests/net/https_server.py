"""A real HTTPS server on loopback for the egress tests: CPython's http.server behind its ssl
module, with the certificate the test made (signed by the test's own CA).

    python3 https_server.py CERT KEY PORTFILE

It binds 127.0.0.1 on a free port, writes the port to PORTFILE, and serves:
    /data.csv            a small CSV
    /big?n=N             N bytes, sent chunked (Transfer-Encoding: chunked)
    /redirect?to=URL     302 to URL
    /headers             the request's headers as JSON
    /slow                waits 600 s before answering
    /digest?key=K        the SHA-256 of the Authorization header and of K (never the values)
"""

import json
import ssl
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, status, body, ctype="text/plain", extra=()):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        url = urlparse(self.path)
        q = parse_qs(url.query)
        if url.path == "/data.csv":
            self.send(200, b"city,population\nOslo,700\nBergen,290\nTromso,77\n", "text/csv")
        elif url.path == "/big":
            n = int(q["n"][0])
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            piece = b"z" * 65536
            left = n
            while left > 0:
                chunk = piece[: min(left, len(piece))]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                left -= len(chunk)
            self.wfile.write(b"0\r\n\r\n")
        elif url.path == "/redirect":
            self.send(302, b"", extra=[("Location", q["to"][0])])
        elif url.path == "/headers":
            self.send(200, json.dumps(dict(self.headers.items())).encode(), "application/json")
        elif url.path == "/digest":
            import hashlib

            digest = lambda v: hashlib.sha256(v.encode()).hexdigest()
            body = {"auth": digest(self.headers.get("Authorization", "")), "key": digest(q.get("key", [""])[0])}
            self.send(200, json.dumps(body).encode(), "application/json")
        elif url.path == "/slow":
            time.sleep(600)
            self.send(200, b"late")
        else:
            self.send(404, b"no such page")

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n)
        self.send(200, json.dumps({"received": len(body), "echo": body.decode("utf-8", "replace")[:100]}).encode(), "application/json")


def main():
    cert, key, portfile = sys.argv[1:4]
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    with open(portfile + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    import os

    os.replace(portfile + ".tmp", portfile)
    server.serve_forever()


if __name__ == "__main__":
    main()
