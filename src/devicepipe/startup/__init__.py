"""What a command starts before its own work: the fork server of a local cluster's workers,
started from the command line before the command imports torch (``server``), and what that
server imports once for every worker it forks (``preload``: importing it imports the pipelines).
This package's ``__init__`` imports nothing, so that ``server`` stays as light as it is."""
