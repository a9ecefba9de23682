"""OmniVoice text-to-speech on ONNX Runtime, numpy and ``tokenizers``: no torch at run time.

from omnivoice_rt import OmniVoiceONNX
voice = OmniVoiceONNX.load("artifacts", precision="int4")
speech = voice.generate("Hello world.", language="en", seed=0)
"""

from omnivoice_rt.model import GenerationSettings, OmniVoiceONNX, Speech
from omnivoice_rt.voice_prompt import VoicePrompt

__all__ = ["GenerationSettings", "OmniVoiceONNX", "Speech", "VoicePrompt"]
