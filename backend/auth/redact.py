"""Keeping secrets out of answers and logs: validation errors, and the access log.

FastAPI echoes each invalid value back as `input`; for a password or a token that would put
the secret in the response (and in any log of responses).
"""

from __future__ import annotations

import logging
import math
import re
from typing import Any

from fastapi import Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

SECRET_FIELDS = frozenset({"password", "new_password", "token", "csrf_token", "secret"})


def _redacted(error: dict[str, Any]) -> dict[str, Any]:
    error = dict(error)
    if SECRET_FIELDS & {str(part) for part in error.get("loc", ())}:
        error.pop("input", None)
        error.pop("ctx", None)
    elif isinstance(error.get("input"), dict) and SECRET_FIELDS & set(error["input"]):
        error.pop("input")
    return error


def _json_safe(value: Any) -> Any:
    """JSON has no NaN or infinity, but Python's parser reads them: echo them back as text.
    Nor can a lone surrogate be encoded: echo it back escaped, `\\ud800`."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_json_safe(key): _json_safe(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_json_safe(item) for item in value]
    return value


async def validation_error_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [_redacted(error) for error in exc.errors()]
    return JSONResponse(status_code=422, content={"detail": _json_safe(jsonable_encoder(errors))})


SHARE_LINK_PATH = re.compile(r"(/shared/)[^/?#\s\"]+")


def redact_path(path: str) -> str:
    """A request path with any share-link token replaced (the token is the credential)."""
    return SHARE_LINK_PATH.sub(r"\1[redacted]", path)


class AccessLogRedaction(logging.Filter):
    """Keeps share-link tokens out of uvicorn's access log (its third argument is the path)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            record.args = (*args[:2], redact_path(args[2]), *args[3:])
        return True


def redact_access_log() -> None:
    access_log = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, AccessLogRedaction) for f in access_log.filters):
        access_log.addFilter(AccessLogRedaction())
