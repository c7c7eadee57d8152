"""Validation errors without the secrets that caused them.

FastAPI echoes each invalid value back as `input`; for a password or a token that would put
the secret in the response (and in any log of responses).
"""

from __future__ import annotations

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


async def validation_error_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [_redacted(error) for error in exc.errors()]
    return JSONResponse(status_code=422, content={"detail": jsonable_encoder(errors)})
