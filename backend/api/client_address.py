"""Who is on the other end of a request: the socket peer, or, behind a configured proxy, the
address that proxy says it serves.

`X-Forwarded-For` is trusted only when the request comes from an address in the
`trusted_proxies` setting (addresses or networks, empty by default): the client is then the
right-most address of the header that is not itself a trusted proxy (everything left of it
could have been written by the client). A request from anywhere else, loopback included, is
its socket peer, whatever headers it sends, so a same-host proxy that passes the header through
unchanged cannot let each request pick its own address (and so its own login-limit key).

This only works if the server hands the application the socket peer: uvicorn's own proxy-header
handling trusts loopback by default and overwrites it, so `orrery serve` and the compose file
start uvicorn with it off (`proxy_headers=False`, `--no-proxy-headers`). Open choice: only
`X-Forwarded-For` is read, not the standard `Forwarded` header.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from functools import lru_cache

from fastapi import Request

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@lru_cache(maxsize=64)
def networks(trusted: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(item, strict=False) for item in trusted)


def _is_trusted(address: str, trusted: Iterable[Network]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in trusted)


def client_address(request: Request) -> str:
    """The request's client address, by the rule above ("?" when the server gave none)."""
    peer = request.client.host if request.client else "?"
    trusted = networks(tuple(request.app.state.settings.trusted_proxies))
    if not trusted or not _is_trusted(peer, trusted):
        return peer
    hops = [
        hop.strip()
        for header in request.headers.getlist("x-forwarded-for")
        for hop in header.split(",")
        if hop.strip()
    ]
    for hop in reversed(hops):
        if not _is_trusted(hop, trusted):
            return hop
    return hops[0] if hops else peer
