"""The orca key of a job, computed locally exactly as the server does."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from typing import Any, Union

Config = Union[Mapping[str, Any], str, bytes]

# Compact JSON, as the server stores it. One encoder for every call: json.dumps with options
# builds a new JSONEncoder each time (about half the cost of a small value).
COMPACT_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def orca_key(key: str, response_url: str = "") -> str:
    """base64(sha256(key + response_url)), standard alphabet with padding (44 characters)."""
    digest = hashlib.sha256((key + response_url).encode("utf-8")).digest()
    return base64.b64encode(digest).decode("ascii")


def encode_config(config: Config) -> bytes:
    """A job config as the bytes sent to the server: a mapping is serialized as compact
    JSON; ``str``/``bytes`` are sent exactly as given (the server validates them)."""
    if isinstance(config, bytes):
        return config
    if isinstance(config, str):
        return config.encode("utf-8")
    return COMPACT_JSON.encode(config).encode("utf-8")


def config_orca_key(config: Config) -> str:
    """The orca key of a config (its ``key`` and ``response_url`` fields)."""
    if isinstance(config, (bytes, str)):
        config = json.loads(config)
    if not isinstance(config, Mapping) or not isinstance(config.get("key"), str):
        raise ValueError("config has no string field 'key'")
    url = config.get("response_url") or ""
    if not isinstance(url, str):
        raise ValueError("response_url must be a string")
    return orca_key(config["key"], url)
