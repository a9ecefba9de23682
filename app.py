#!/usr/bin/env python3
"""The Hugging Face Space's entry point (a Space runs ``python app.py``): the server of
``omnivoice_rt/server/main.py`` with all its flags. Installed, the same server is
``omnivoice-onnx-server`` or ``python -m omnivoice_rt.server``."""

import sys

from omnivoice_rt.server.__main__ import run

if __name__ == "__main__":
    sys.exit(run())
