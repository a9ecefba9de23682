#!/usr/bin/env python3
"""OmniVoice ONNX: the Gradio Space.

For now the page inspects an artifact folder: which precisions it holds, what each is made of,
its size on disk, and whether every file is intact and every graph loads (the LLM checked for
bidirectional attention). Speech synthesis arrives with the runtime (``omnivoice_rt``).

    python app.py --artifacts DIR [--host 127.0.0.1] [--port 7860]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

import gradio as gr

from omnivoice_rt.manifest import ArtifactError, read_manifest, verify_files
from omnivoice_rt.sessions import load_sessions

logger = logging.getLogger(__name__)

DEFAULT_ARTIFACTS = os.environ.get("OMNIVOICE_ARTIFACTS", "artifacts")


def describe_artifacts(root: str | Path) -> str:
    """A Markdown table of the folder's precisions, or a message saying what is wrong."""
    try:
        manifest = read_manifest(root)
    except ArtifactError as exc:
        return f"**No usable artifacts.** {exc}"
    rows = ["| precision | folder | encoder | LLM | heads | size |", "|---|---|---|---|---|---|"]
    files = manifest["files"]
    for name, profile in sorted(manifest.get("profiles", {}).items()):
        prefix = "" if profile["dir"] == "." else profile["dir"] + "/"
        size = sum(
            entry["bytes"] for path, entry in files.items()
            if path.startswith(prefix) and (prefix or "/" not in path)
        )  # fmt: skip
        rows.append(
            f"| {name} | `{profile['dir']}` | {profile['encoder']} | {profile['llm']} | "
            f"{profile['heads']} | {size / 1e6:.1f} MB |"
        )
    codec = manifest.get("audio_tokenizer")
    codec_line = f"Codec: {codec['precision']}." if codec else "Codec: not built (`--include-higgs`)."
    return "\n".join(rows) + f"\n\n{codec_line} Attention: {manifest.get('attention')}."


def check_artifacts(root: str, precision: str) -> str:
    """Verify hashes and open every graph of ``precision``; a line saying how it went."""
    try:
        bad = verify_files(root, read_manifest(root))
        if bad:
            return f"Corrupt or missing: {', '.join(bad[:5])}. Rebuild or re-download the artifacts."
        sessions = load_sessions(root, precision)
    except (ArtifactError, ValueError) as exc:
        return f"Not ready: {exc}"
    return f"{precision}: {len(sessions)} graphs loaded, files intact, LLM bidirectional."


def build_demo(artifacts: str = DEFAULT_ARTIFACTS) -> gr.Blocks:
    with gr.Blocks(title="OmniVoice ONNX") as demo:
        gr.Markdown("# OmniVoice ONNX\nOmniVoice text-to-speech on ONNX Runtime, without PyTorch.")
        folder = gr.Textbox(value=artifacts, label="Artifact folder")
        table = gr.Markdown(describe_artifacts(artifacts))
        with gr.Row():
            precision = gr.Dropdown(["int4", "fp16", "fp32", "cuda"], value="int4", label="Precision")
            check = gr.Button("Check artifacts")
        status = gr.Markdown()
        folder.change(describe_artifacts, folder, table, api_visibility="private")
        check.click(check_artifacts, [folder, precision], status, api_name="check_artifacts")
    return demo


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="OmniVoice ONNX Space")
    parser.add_argument("--artifacts", default=DEFAULT_ARTIFACTS, help="artifact folder (env OMNIVOICE_ARTIFACTS)")
    parser.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("GRADIO_SERVER_PORT", "7860")))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    build_demo(args.artifacts).queue(default_concurrency_limit=1).launch(server_name=args.host, server_port=args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
