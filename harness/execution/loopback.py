"""Which hosts are this machine's loopback: what the project's listeners bind unless told otherwise."""

from __future__ import annotations

import ipaddress

#: The address every local listener of the project binds by default.
LOOPBACK = "127.0.0.1"


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address: ``127.0.0.0/8``, ``::1``, ``::ffff:127.x.y.z`` (bracketed or
    not, with or without a ``%zone``) or the name ``localhost``. Other names are not looked up (a name may
    resolve differently on another machine), so they count as not loopback."""
    host = host.strip().strip("[]").split("%", 1)[0]
    if host.lower() == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return bool(address.is_loopback or (mapped is not None and mapped.is_loopback))


def host_of(address: str) -> str:
    """The host part of ``HOST:PORT`` (``[v6]:PORT`` too), without brackets."""
    host = address.rpartition(":")[0] if ":" in address else address
    return host.strip("[]")
