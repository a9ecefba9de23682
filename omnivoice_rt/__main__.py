"""``python -m omnivoice_rt``: the command line (``tools/cli.py``; installed: ``omnivoice-onnx``)."""

import sys

from omnivoice_rt.tools.cli import main

if __name__ == "__main__":
    sys.exit(main())
