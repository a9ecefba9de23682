#!/usr/bin/env python3
"""The Hugging Face Space's entry point (a Space runs ``python app.py``): the server of
``omnivoice_rt/server/main.py`` with all its flags. Installed, the same server is
``omnivoice-onnx-server`` or ``python -m omnivoice_rt.server``.

On a Space (``SPACE_ID`` is set) every visitor comes through the Space's proxy, which connects
from a private address and names the visitor in ``X-Forwarded-For``: it is believed from the
private networks (``--forwarded-allow-ips``), so that each visitor, not the proxy, is a client
with its own share of the line (``--per-client``). A value set for it wins."""

import os
import sys

from omnivoice_rt.server.__main__ import run

# where a Space's proxy connects from: the private networks and this machine
SPACE_PROXIES = "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,fc00::/7,127.0.0.1,::1"

if __name__ == "__main__":
    if os.environ.get("SPACE_ID"):
        os.environ.setdefault("FORWARDED_ALLOW_IPS", SPACE_PROXIES)
    sys.exit(run())
