"""Reading a running server's `GET /server_info` (SGLang's resolved configuration; see docs/sglang-0.5.23.md §5)."""

from __future__ import annotations

import json
from typing import Any

from pytest_sglang_perf.errors import SGLangPerfError

SERVER_INFO_TIMEOUT = 30.0


class ServerInfoError(SGLangPerfError):
    """`/server_info` could not be read; the message says why."""


def fetch_server_info(base_url: str, api_key: str | None, timeout: float = SERVER_INFO_TIMEOUT) -> dict[str, Any]:
    """The server's `/server_info` document (it holds the API key in clear text: redact before showing it)."""
    import urllib.error
    import urllib.request

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    request = urllib.request.Request(f"{base_url}/server_info", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            doc = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        exc.close()  # it holds the response's connection
        raise ServerInfoError(f"GET {base_url}/server_info answered HTTP {exc.code}") from None
    except (OSError, ValueError) as exc:
        raise ServerInfoError(f"GET {base_url}/server_info failed: {exc}") from None
    if not isinstance(doc, dict):
        raise ServerInfoError(f"GET {base_url}/server_info did not return a JSON object")
    return doc
