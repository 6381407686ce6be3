"""The one exception type for mistakes a user can make (bad config, corpus, checkpoint, argument)."""


class UserError(Exception):
    """A user-caused error; the CLI prints its message as one line and exits with status 2."""
