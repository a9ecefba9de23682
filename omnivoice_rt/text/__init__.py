"""The text front end: languages, voice-design instructs, prompt text and chunking, durations,
and normalization (numbers, dates and money as words)."""
