"""Who the client is behind a proxy: ``X-Forwarded-For``, believed only from proxies the operator names.

An anonymous caller's rate limits are keyed by its address. Behind a load balancer every connection comes from the
balancer, so every anonymous caller would share one bucket; the balancer says who its client was in
``X-Forwarded-For``. Anyone can send that header, so it is read only on a connection from a trusted proxy
(``trusted_proxies``: addresses or networks, as ``10.0.0.0/8``), and then from the right: each trusted proxy appends
the address it was connected from, so the first address from the right that is not a trusted proxy is the client.
Addresses to the left of it are the client's own words and are never believed. Without trusted proxies the header
is ignored: the client is the connection's address.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class TrustedProxies:
    """The proxies whose ``X-Forwarded-For`` is believed. Raises ``ValueError`` naming an entry that is neither an
    address nor a network."""

    __slots__ = ("networks",)

    def __init__(self, entries: Iterable[str] = ()) -> None:
        networks: list[Network] = []
        for entry in entries:
            try:
                networks.append(ipaddress.ip_network(entry.strip(), strict=False))
            except ValueError:
                raise ValueError(f"trusted proxy {entry!r}: expected an IP address or a network (10.0.0.0/8)") from None
        self.networks = tuple(networks)

    def __bool__(self) -> bool:
        return bool(self.networks)

    def trusts(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in network for network in self.networks)

    def client(self, peer: str | None, headers: Any) -> str | None:
        """The client's address: ``peer`` (the connection's), or, when ``peer`` is a trusted proxy, the rightmost
        address of ``X-Forwarded-For`` that is not one (``peer`` when the header is missing or malformed)."""
        if not self.networks or peer is None or not self.trusts(peer):
            return peer
        raw = headers.get(b"x-forwarded-for")
        if not raw:
            return peer
        found = peer
        for hop in reversed(raw.decode("latin-1").split(",")):
            hop = hop.strip()
            try:
                ipaddress.ip_address(hop)
            except ValueError:
                return found  # a proxy wrote something that is no address: believe no further
            if not self.trusts(hop):
                return hop
            found = hop
        return found
