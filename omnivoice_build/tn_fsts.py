"""Copy WeTextProcessing's text-normalization FSTs into the runtime, compressed.

    python -m omnivoice_build.tn_fsts

Upstream's ``normalize_text`` reads the FSTs that WeTextProcessing 1.2.0 ships in its wheel
(``tn/{en,zh}_tn_{tagger,verbalizer}.fst``). The runtime runs the same files on kaldifst
(``omnivoice_rt.text.normalize``), so it keeps them in ``omnivoice_rt/data/tn/`` as ``.fst.gz``
(10.0 MB as FSTs, 1.2 MB compressed) with their SHA-256 in ``omnivoice_rt.text.normalize.FSTS``.
Build side only: it needs ``pip install WeTextProcessing==1.2.0`` (pynini), as the tests' oracle.
"""

from __future__ import annotations

import gzip
import hashlib
from importlib import metadata, resources
from pathlib import Path

from omnivoice_rt.text.normalize import FST_DIR, FSTS, WETEXTPROCESSING


def shipped_fst(name: str) -> Path:
    """The FST ``name`` in the installed WeTextProcessing."""
    version = metadata.version("WeTextProcessing")
    if version != WETEXTPROCESSING:
        raise ValueError(
            f"WeTextProcessing {version} is installed; upstream's normalize_text was measured with "
            f"{WETEXTPROCESSING}: pip install WeTextProcessing=={WETEXTPROCESSING}"
        )
    return Path(str(resources.files("tn").joinpath(name)))


def main() -> None:
    FST_DIR.mkdir(parents=True, exist_ok=True)
    for language, (tagger, verbalizer, _order) in FSTS.items():
        for name, digest in (tagger, verbalizer):
            data = shipped_fst(name).read_bytes()
            sha = hashlib.sha256(data).hexdigest()
            if sha != digest:
                print(f"{name}: SHA-256 {sha} (FSTS says {digest}): update FSTS")
            target = FST_DIR / f"{name}.gz"
            # mtime=0 and no file name: the same FST gives the same bytes
            with open(target, "wb") as raw, gzip.GzipFile("", "wb", 9, raw, mtime=0) as out:
                out.write(data)
            print(f"{language}: {target} ({len(data):,} -> {target.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
