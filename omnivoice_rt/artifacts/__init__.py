"""Where the model's files come from and what they are: the precisions (profiles), the
manifest, graph signatures, the LLM's repair, derived graphs' cache, the Hub, inspect."""
