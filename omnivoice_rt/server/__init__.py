"""The server: one process, many doors (the Gradio page and its API, MCP, the OpenAI-compatible
``/v1/audio/speech``, Wyoming, the voice library) sharing one line. Needs the ``server`` extra."""
