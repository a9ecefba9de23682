"""OmniVoice text-to-speech on ONNX Runtime, numpy and ``tokenizers``: no torch at run time.

from omnivoice_rt import OmniVoiceONNX, Request
voice = OmniVoiceONNX.load("artifacts", precision="int4")
speech = voice.generate("Hello world.", language="en", seed=0)
speech = voice.generate(Request.from_options({"text": "Hello.", "preset": "balanced"}))
normalize_text("It costs $5.") -> "It costs five dollars."
"""

from omnivoice_rt.model import OmniVoiceONNX, Speech
from omnivoice_rt.request import GenerationSettings, Request
from omnivoice_rt.text.normalize import normalize_text
from omnivoice_rt.voice_prompt import VoicePrompt

__version__ = "0.4.0"

__all__ = [
    "GenerationSettings",
    "OmniVoiceONNX",
    "Request",
    "Speech",
    "VoicePrompt",
    "normalize_text",
]
