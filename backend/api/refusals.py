"""The domain's refusals as HTTP answers, in one handler the app registers for each of them:
routes call the domain and let its refusals through instead of catching and re-raising.

- `RunGone`: 404, the run was deleted while a request was acting on it;
- `DeletionRefused`, `RetryRefused`: 409, the object's state forbids it now (a run still
  active, the baseline of others, retried meanwhile);
- `ExpansionError`, `AccountError`, `NameTaken`: 422 naming the field, like any other invalid
  body;
- `DesignNotOnFront`: 404, the design is on none of the search's fronts;
- `DesignAlreadyRun`: 409, the design already has runs in its experiment;
- `QuotaExceeded`: 429, over the owner's queued-plus-running runs limit, or (its sibling
  `QueuedTrainingsExceeded`) over the owner's queued trainings limit;
- `BrokerUnavailable`: 503, nothing was submitted.

The message is the domain's own, as `detail`. Open choice: no Retry-After on 429 or 503, since
when runs finish (or the broker returns) is not known here.
"""

from __future__ import annotations

from fastapi import Request, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from backend.auth.redact import validation_error_handler
from backend.auth.users import AccountError
from backend.experiments.deletion import DeletionRefused
from backend.experiments.expand import ExpansionError
from backend.experiments.quota import QuotaExceeded
from backend.experiments.retry import RetryRefused, RunGone
from backend.experiments.service import BrokerUnavailable
from backend.searches.designs import DesignAlreadyRun, DesignNotOnFront, NameTaken

REFUSAL_STATUS: dict[type[Exception], int] = {
    RunGone: status.HTTP_404_NOT_FOUND,
    DesignNotOnFront: status.HTTP_404_NOT_FOUND,
    DesignAlreadyRun: status.HTTP_409_CONFLICT,
    DeletionRefused: status.HTTP_409_CONFLICT,
    RetryRefused: status.HTTP_409_CONFLICT,
    QuotaExceeded: status.HTTP_429_TOO_MANY_REQUESTS,
    BrokerUnavailable: status.HTTP_503_SERVICE_UNAVAILABLE,
}


async def domain_refusal(request: Request, exc: Exception) -> JSONResponse:
    """Register for every type in `REFUSALS`."""
    if isinstance(exc, ExpansionError | AccountError | NameTaken):
        loc = exc.loc if isinstance(exc, ExpansionError | NameTaken) else (exc.field,)
        error = {"loc": ("body", *loc), "msg": exc.message, "type": "value_error"}
        return await validation_error_handler(request, RequestValidationError([error]))
    if isinstance(exc, BrokerUnavailable):
        detail = f"the task queue is unreachable, nothing was submitted; try again later ({exc})"
    else:
        detail = str(exc)
    for refusal, status_code in REFUSAL_STATUS.items():
        if isinstance(exc, refusal):
            return JSONResponse({"detail": detail}, status_code=status_code)
    raise exc


REFUSALS: tuple[type[Exception], ...] = (
    ExpansionError,
    AccountError,
    NameTaken,
    *REFUSAL_STATUS,
)
