"""Random bearer secrets (API tokens, session cookies, share links) and their stored digests.

Only the SHA-256 of a secret is stored: the secrets have 256 bits of entropy, so a slow hash
would add nothing, and a fast one lets every request look its secret up by index.
"""

from __future__ import annotations

import hashlib
import secrets

API_TOKEN_PREFIX = "orr_"


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def new_secret(prefix: str = "") -> str:
    return prefix + secrets.token_urlsafe(32)
