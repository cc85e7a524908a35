"""One JSON response as the simulated servers write it (SGLang's and vLLM's alike): the status,
`Content-Type: application/json`, the exact `Content-Length`, then the body."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any


def send_json(handler: BaseHTTPRequestHandler, status: int, body: Any) -> None:
    data = json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
