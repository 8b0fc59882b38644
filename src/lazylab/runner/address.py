"""The address of a Ray cluster, checked by its form before anything runs (the command line
and :mod:`lazylab.runner.ray_backend` both read it)."""

from __future__ import annotations

import os
import re

from lazylab.errors import InputError

#: A host name (RFC 1123 labels), an IPv4 address or a bracketed IPv6 address, then a port.
_HOST_PORT = re.compile(r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252}))"
                        r":(?P<port>\d{1,5})")


def check_address(address: str | None, option: str = "--address") -> tuple[str, int] | None:
    """The Ray cluster a ``--backend ray`` run connects to, checked before anything runs.

    ``address`` None reads ``RAY_ADDRESS`` (as Ray does). Allowed: ``HOST:PORT`` of the head
    node, ``ray://HOST:PORT`` (Ray Client), ``auto`` (the cluster ``ray start`` left on this
    machine) and ``local`` (start one). Returns ``(host, port)`` where the address names one
    (the caller can probe it), None for ``auto``, ``local`` or no address; InputError naming
    the option (or ``RAY_ADDRESS``) and the allowed forms otherwise.

    >>> check_address("127.0.0.1:6379"), check_address("ray://head:10001"), check_address("auto")
    (('127.0.0.1', 6379), ('head', 10001), None)
    """
    if address is None:
        address, option = os.environ.get("RAY_ADDRESS") or None, "RAY_ADDRESS"
        if address is None:
            return None
    text = address.strip()
    if text in ("auto", "local"):
        return None
    rest = text[len("ray://"):] if text.startswith("ray://") else text
    m = _HOST_PORT.fullmatch(rest)
    if m is None or not 1 <= int(m["port"]) <= 65535:
        raise InputError(f"{option} {address!r}: expected HOST:PORT of the Ray head node (e.g. "
                         "127.0.0.1:6379, port 1 to 65535), ray://HOST:PORT, auto or local")
    return m["host"].strip("[]"), int(m["port"])
