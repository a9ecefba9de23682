"""Who asked: a request's client, as the line counts it (``line.ClientLine``: at most
``--per-client`` of a client's requests under way, and its share of the waiting places).

A client is the address its request came from: behind a reverse proxy, the address the proxy
reports in ``X-Forwarded-For``, believed only from the proxies ``--forwarded-allow-ips`` names
(uvicorn reads the header; its default trusts only this machine, ``127.0.0.1``). An IPv6 client
is its /64 network, which one host commonly holds whole. The HTTP doors (the page and its API,
the OpenAI door, MCP) read it from one header this server writes on every request
(:class:`ClientAddress`); Wyoming from its connection's peer.

MCP reaches the page's API through Gradio's loopback call, which comes from 127.0.0.1 with the
MCP request's headers copied: the header written on the MCP request (its client's address) is
kept on that call because the call also carries this process's secret, which nobody outside
the process knows; on any other request the header is written again.
"""

from __future__ import annotations

import ipaddress
import secrets

CLIENT_HEADER = b"x-omnivoice-client"  # the client's address, as this server judged it
HOP_HEADER = b"x-omnivoice-hop"  # this process's secret: the request is its own loopback call
MCP_PATH = "/gradio_api/mcp"
_SECRET = secrets.token_hex(16).encode()


def client_key(address: str | None) -> str | None:
    """The client an address belongs to: an IPv4 address itself, an IPv6 address its /64
    network, anything else (a Unix socket's name, a test client's) as it came, cut to 64
    characters; None for no address."""
    if not address:
        return None
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address[:64]
    if ip.version == 6:
        if ip.ipv4_mapped is not None:  # ::ffff:a.b.c.d, an IPv4 client on a dual-stack socket
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


def from_headers(headers) -> str | None:
    """The client of a request of an HTTP door, from the header :class:`ClientAddress` wrote
    (``headers``: Starlette's or Gradio's, read case-insensitively)."""
    return (headers.get(CLIENT_HEADER.decode()) or None) if headers is not None else None


class ClientAddress:
    """ASGI middleware, inside uvicorn's proxy headers (which resolved ``scope["client"]``):
    every HTTP request carries its client's key in ``x-omnivoice-client``, whatever the client
    sent there, except Gradio's loopback call for an MCP tool, which keeps the MCP client's."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            headers = [(k, v) for k, v in scope["headers"] if k not in (CLIENT_HEADER, HOP_HEADER)]
            sent = dict(scope["headers"])
            if sent.get(HOP_HEADER) == _SECRET and CLIENT_HEADER in sent:
                client = sent[CLIENT_HEADER]  # our own call for an MCP client: its address
            else:
                peer = scope.get("client")
                client = (client_key(peer[0] if peer else None) or "").encode()
            headers.append((CLIENT_HEADER, client))
            if scope.get("path", "").startswith(MCP_PATH):
                headers.append((HOP_HEADER, _SECRET))  # copied into Gradio's call for the tool
            scope = {**scope, "headers": headers}
        await self.app(scope, receive, send)
