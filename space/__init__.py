"""The Space's server: one serving core (``serving``) and the doors beside the Gradio page
(``openai_api``); ``app.py`` puts them in one process."""
