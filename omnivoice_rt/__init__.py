"""OmniVoice text-to-speech on ONNX Runtime, numpy and ``tokenizers``: no torch at run time.

from omnivoice_rt import OmniVoiceONNX, Request
voice = OmniVoiceONNX.load("artifacts", precision="int4")
speech = voice.generate("Hello world.", language="en", seed=0)
speech = voice.generate(Request.from_options({"text": "Hello.", "preset": "balanced"}))
normalize_text("It costs $5.") -> "It costs five dollars."
"""

__version__ = "0.4.0"

from omnivoice_rt.model import OmniVoiceONNX, Speech  # noqa: E402
from omnivoice_rt.normalize import normalize_text  # noqa: E402
from omnivoice_rt.request import GenerationSettings, Request  # noqa: E402
from omnivoice_rt.voice_prompt import VoicePrompt  # noqa: E402

__all__ = [
    "GenerationSettings",
    "OmniVoiceONNX",
    "Request",
    "Speech",
    "VoicePrompt",
    "normalize_text",
]
