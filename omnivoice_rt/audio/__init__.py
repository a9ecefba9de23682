"""Audio in and out: loading and processing, file formats, a reference recording as a voice
prompt, and the speech recogniser for references without a transcript."""
