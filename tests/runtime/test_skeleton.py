"""bench/skeleton.py: an artifacts folder stripped of its weights and restored with weights drawn
like them runs the same graphs on the same shapes (what a timing on another machine needs), and
its manifest verifies."""

from __future__ import annotations

import numpy as np

from bench.skeleton import SMALL, main
from omnivoice_rt import OmniVoiceONNX


def _sizes(folder):
    return {p.relative_to(folder): p.stat().st_size for p in folder.rglob("*") if p.is_file()}


def test_a_stripped_folder_restores_to_the_same_graphs_and_sizes(cpu_artifacts, tmp_path):
    import onnx
    from onnx import numpy_helper

    skeleton, restored = tmp_path / "skeleton", tmp_path / "restored"
    assert main(["strip", str(cpu_artifacts), str(skeleton)]) == 0
    weights = sum(size for size in _sizes(cpu_artifacts).values())
    assert sum(_sizes(skeleton).values()) < weights / 4
    assert main(["restore", str(skeleton), str(restored)]) == 0
    assert main(["restore", str(skeleton), str(restored)]) == 2  # not over a folder in use
    sizes = _sizes(restored)
    assert {k: v for k, v in _sizes(cpu_artifacts).items() if k.suffix != ".json"} == {
        k: v for k, v in sizes.items() if k.suffix != ".json"
    }

    llm = "int4/llm_decoder.onnx"
    before, after = (onnx.load(str(f / llm)) for f in (cpu_artifacts, restored))
    assert [n.op_type for n in before.graph.node] == [n.op_type for n in after.graph.node]
    drawn = 0
    for a, b in zip(before.graph.initializer, after.graph.initializer, strict=True):
        x, y = numpy_helper.to_array(a), numpy_helper.to_array(b)
        assert (a.name, x.dtype, x.shape) == (b.name, y.dtype, y.shape)
        if x.size >= SMALL:
            drawn += 1
            assert not np.array_equal(x, y)
            if x.dtype.kind == "f":  # drawn from its own distribution
                assert x.min() <= y.min() and y.max() <= x.max()
                assert abs(float(y.std()) / float(x.std()) - 1) < 0.1
        else:
            assert np.array_equal(x, y)
    assert drawn > 10

    voice = OmniVoiceONNX.load(restored, "int4", verify=True)  # sizes and sha256 as listed
    speech = voice.generate("Hello there.", seed=0, preset="turbo", duration=1.0)
    assert speech.codes[0].shape[1] == 25 and np.isfinite(speech.waveform).all()  # 1 s of frames
