"""A stand-in for the llama.cpp server child of ``LlamaCppServer`` (its ``_CHILD`` script), with
no model: a loopback HTTP server on the port the config names that serves ``/health``,
``/props`` (a ChatML template) and ``/v1/chat/completions``, whose reply names the threads it
was started with and the stop strings it was sent, so a test sees which server answered what."""

from __future__ import annotations

from pathlib import Path

STUB_CHILD = f"HERE = {str(Path(__file__).parent)!r}\n" + r"""
import http.server, json, sys, threading
sys.path.insert(0, HERE)
from _http import JsonHandler
cfg = json.loads(sys.argv[1])
TEMPLATE = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
class H(JsonHandler):
    def do_GET(self):
        self._send({"chat_template": TEMPLATE, "eos_token": "<|im_end|>"} if self.path == "/props" else {"status": "ok"})
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        text = "threads=%d stop=%s" % (cfg["threads"], json.dumps(body.get("stop")))
        self._send({"choices": [{"message": {"content": text}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1}})
http.server.ThreadingHTTPServer.allow_reuse_address = True
srv = http.server.ThreadingHTTPServer((cfg["host"], cfg["port"]), H)
threading.Thread(target=srv.serve_forever, daemon=True).start()
sys.stdout.write(json.dumps({"address": "http://%s:%d" % (cfg["host"], srv.server_address[1])}) + "\n")
sys.stdout.flush()
sys.stdin.read()
"""
