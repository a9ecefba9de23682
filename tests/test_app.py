"""The placeholder Space's helpers over real artifact folders (the full app comes with issue 5)."""

from __future__ import annotations

import shutil

import app


def test_describe_lists_each_precision_and_the_codec(cpu_artifacts):
    text = app.describe_artifacts(cpu_artifacts)
    assert "| int4 | `int4` | int4 | int4 | fp32 |" in text
    assert "| fp16 | `.` | fp16 | int4 | fp16 |" in text
    assert "Codec: fp16" in text and "bidirectional" in text


def test_describe_explains_a_folder_without_artifacts(tmp_path):
    text = app.describe_artifacts(tmp_path)
    assert "No usable artifacts" in text and "build_artifacts.py" in text


def test_check_loads_a_good_folder_and_names_corrupt_files(cpu_artifacts, tmp_path):
    assert app.check_artifacts(str(cpu_artifacts), "int4").startswith("int4: 7 graphs loaded")
    copy = tmp_path / "copy"
    shutil.copytree(cpu_artifacts, copy)
    (copy / "int4" / "llm_decoder.onnx.data").write_bytes(b"garbage")
    message = app.check_artifacts(str(copy), "int4")
    assert message.startswith("Corrupt or missing") and "int4/llm_decoder.onnx.data" in message
