#!/usr/bin/env python3
"""An artifacts folder without its weights, and the folder again with random weights like them.

    python bench/skeleton.py strip ARTIFACTS SKELETON     # graphs, configs, tokenizer: a few MB
    python bench/skeleton.py restore SKELETON ARTIFACTS   # the same graphs, weights drawn anew

For timing the full-size model on a machine that cannot build it (no PyTorch there, or a
transfer too small for its 770 MB): every initializer of 4,096 values or more is replaced by
values drawn from its own distribution (floats from 257 of its quantiles, bytes such as the
packed int4 weights uniformly over their range), so every operator runs on the same shapes and
kinds of numbers and the timings are the original's. The outputs are not: use it for speed
only. The restored folder's manifest lists the new files' sizes and sha256.

Extras: none (the package's own dependencies).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

SMALL = 4096  # initializers with fewer values travel as they are
QUANTILES = 257
SPECS = ".skeleton.json"  # beside each graph of the skeleton: what its emptied initializers were


def _graphs(source: Path, target: Path, skip: str):
    """Copy ``source``'s files into the same places under ``target``, but its ``.onnx`` graphs,
    which it yields as ``(path, relative path)``, and the files whose names end with ``skip``."""
    for path in sorted(source.rglob("*")):
        rel = path.relative_to(source)
        if path.is_dir() or path.name.endswith(skip):
            continue
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".onnx":
            yield path, rel
        else:
            shutil.copyfile(path, target / rel)


def strip(source: Path, target: Path) -> None:
    import onnx
    from onnx import numpy_helper

    rng = np.random.default_rng(0)
    for path, rel in _graphs(source, target, ".data"):  # the weights are read with their graph
        model = onnx.load(str(path))
        external = (path.parent / f"{path.name}.data").exists()
        specs = []
        for tensor in model.graph.initializer:
            values = numpy_helper.to_array(tensor)
            if values.size < SMALL:
                continue
            flat = values.reshape(-1)
            sample = flat[rng.integers(0, flat.size, 1 << 20)] if flat.size > 1 << 20 else flat
            if values.dtype.kind == "f":
                spec = {
                    "quantiles": np.quantile(
                        sample.astype(np.float64), np.linspace(0, 1, QUANTILES)
                    ).tolist()
                }
            elif values.dtype.kind in "iu":
                spec = {"low": int(flat.min()), "high": int(flat.max())}
            else:
                raise ValueError(f"{rel}: {tensor.name} is {values.dtype}, which strip cannot draw")
            specs.append(
                {
                    "name": tensor.name,
                    "dtype": values.dtype.str,
                    "shape": list(values.shape),
                    **spec,
                }
            )
            empty = numpy_helper.from_array(np.zeros(0, values.dtype), tensor.name)
            tensor.CopyFrom(empty)
        onnx.save(model, str(target / rel))
        (target / f"{rel}{SPECS}").write_text(json.dumps({"external": external, "tensors": specs}))
        print(f"{rel}: {len(specs)} initializers emptied", flush=True)


def restore(skeleton: Path, target: Path, seed: int = 0) -> None:
    import onnx
    from onnx import numpy_helper

    from omnivoice_rt.artifacts.manifest import (
        MANIFEST_NAME,
        FileEntry,
        read_manifest,
        sha256_of,
        write_manifest,
    )

    rng = np.random.default_rng(seed)
    for path, rel in _graphs(skeleton, target, SPECS):
        model = onnx.load(str(path))
        described = json.loads(Path(f"{path}{SPECS}").read_text())
        specs = {spec["name"]: spec for spec in described["tensors"]}
        for tensor in model.graph.initializer:
            spec = specs.get(tensor.name)
            if spec is None:
                continue
            dtype, shape = np.dtype(spec["dtype"]), spec["shape"]
            if "quantiles" in spec:
                where = rng.random(int(np.prod(shape)), dtype=np.float32)
                grid = np.linspace(0, 1, len(spec["quantiles"]))
                values = np.interp(where, grid, spec["quantiles"]).astype(dtype)
            else:
                values = rng.integers(
                    spec["low"], spec["high"], size=shape, endpoint=True, dtype=dtype
                )
            tensor.CopyFrom(numpy_helper.from_array(values.reshape(shape), tensor.name))
        if described["external"]:
            onnx.save(
                model, str(target / rel), save_as_external_data=True, location=f"{rel.name}.data"
            )
        else:
            onnx.save(model, str(target / rel))
        print(f"{rel}: {len(specs)} initializers drawn", flush=True)
    if (target / MANIFEST_NAME).exists():  # ours: list the drawn files' sizes and sha256
        manifest = read_manifest(target)
        files = {
            name: FileEntry((target / name).stat().st_size, sha256_of(target / name))
            for name in manifest.files
        }
        write_manifest(target, replace(manifest, files=files))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["strip", "restore"])
    parser.add_argument("source", type=Path)
    parser.add_argument("target", type=Path)
    parser.add_argument("--seed", type=int, default=0, help="restore: the draw's seed")
    args = parser.parse_args(argv)
    if args.target.exists() and any(args.target.iterdir()):
        print(f"{args.target} is not empty: name a new folder", file=sys.stderr)
        return 2
    if args.action == "strip":
        strip(args.source, args.target)
    else:
        restore(args.source, args.target, args.seed)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main())
