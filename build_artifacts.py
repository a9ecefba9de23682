#!/usr/bin/env python3
"""Build the OmniVoice ONNX artifact folder from an OmniVoice checkpoint: ``omnivoice_build/artifacts.py``
(its flags: ``python build_artifacts.py --help``). Installed with the ``build`` extra, the same
command is ``omnivoice-onnx-build``."""

import sys

from omnivoice_build.artifacts import main

if __name__ == "__main__":
    sys.exit(main())
