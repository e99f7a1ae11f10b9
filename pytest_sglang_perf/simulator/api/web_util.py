"""Small aiohttp helpers shared by the endpoint modules."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web


def json_response(data: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json")
