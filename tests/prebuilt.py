"""The fixtures that need PyTorch to make, made once into a folder, so that the library's tests
run where PyTorch is not installed:

    python -m tests.prebuilt DIR                           # where the build extra is installed
    OMNIVOICE_TEST_FIXTURES=DIR pytest tests/runtime      # anywhere the library is

``DIR/cpu`` and ``DIR/fp32`` are the tiny checkpoint's artifacts, ``DIR/whisper`` the tiny
recogniser and ``DIR/speaker/resemblyzer.onnx`` a trained speaker encoder, made exactly as
``tests/conftest.py`` makes them for a session.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from tests.conftest import make_cpu, make_fp32, make_speaker, make_tiny_checkpoint, make_whisper


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests.prebuilt DIR", file=sys.stderr)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="omnivoice-checkpoint-") as tmp:
        checkpoint = make_tiny_checkpoint(Path(tmp))
        make_fp32(checkpoint, out / "fp32")
        make_cpu(checkpoint, out / "cpu")
    make_whisper(out / "whisper")
    make_speaker(out / "speaker")
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
