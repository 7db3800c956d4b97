"""A real RFC 3161 time-stamp authority on loopback for tests (not a test module): a CA and
a TSA certificate made with ``openssl``, and an HTTP server whose every reply is made by
``openssl ts -reply`` from the request it received."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

CONF = """
[ req ]
distinguished_name = dn
prompt = no
[ dn ]
CN = traceless test TSA
[ tsa_ext ]
basicConstraints = critical,CA:false
keyUsage = critical,digitalSignature
extendedKeyUsage = critical,timeStamping
[ ca_ext ]
basicConstraints = critical,CA:true
keyUsage = critical,keyCertSign,cRLSign
[ tsa ]
default_tsa = tsa_config
[ tsa_config ]
dir = {dir}
serial = $dir/serial
signer_cert = $dir/tsa.crt
certs = $dir/tsa.crt
signer_key = $dir/tsa.key
signer_digest = sha256
default_policy = 1.2.3.4.1
digests = sha256, sha384, sha512
accuracy = secs:1
ess_cert_id_chain = no
ess_cert_id_alg = sha256
"""


def _ssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_pki(d: Path, name: str = "ca") -> Path:
    """A root CA (``<name>.crt``) and a TSA certificate it signed; returns the CA's PEM."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "openssl.cnf").write_text(CONF.format(dir=d))
    (d / "serial").write_text("01\n")
    _ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.crt",
         "-days", "2", "-subj", f"/CN=traceless test root {name}", "-config", "openssl.cnf", "-extensions", "ca_ext",
         cwd=d)
    _ssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "tsa.key", "-out", "tsa.csr", "-config", "openssl.cnf",
         cwd=d)
    _ssl("x509", "-req", "-in", "tsa.csr", "-CA", f"{name}.crt", "-CAkey", f"{name}.key", "-CAcreateserial",
         "-out", "tsa.crt", "-days", "2", "-extfile", "openssl.cnf", "-extensions", "tsa_ext", cwd=d)
    return d / f"{name}.crt"


@contextmanager
def tsa_server(d: Path) -> Iterator[str]:
    """Serve ``openssl ts -reply`` with the PKI in ``d`` on 127.0.0.1; yields the URL."""
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers["Content-Length"]))
            with lock:
                (d / "req.tsq").write_bytes(body)
                _ssl("ts", "-reply", "-config", "openssl.cnf", "-queryfile", "req.tsq", "-out", "resp.tsr", cwd=d)
                out = (d / "resp.tsr").read_bytes()
            self.send_response(200)
            self.send_header("Content-Type", "application/timestamp-reply")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/tsr"
    finally:
        server.shutdown()
        server.server_close()
