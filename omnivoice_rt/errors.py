"""The runtime's error vocabulary: each message says what is wrong and what to do about it."""


class ArtifactError(ValueError):
    """An artifact folder is missing, incomplete, corrupt or of an unknown kind; the message says how to fix it."""
