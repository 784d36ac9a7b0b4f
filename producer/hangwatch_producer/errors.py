"""The two errors every hangwatch component reports in one line, defined once here.

`HangwatchError` is the base of every error hangwatch reports to a user in one line;
`UsageError` names invalid input or configuration (exit 3). The producer wrapper
raises them (a bad configuration, a delivery it cannot prove); the `hangwatch`
distribution imports them from here (`hangwatch.errors` adds the lab's errors and the
command-line dispatcher turns any of them into one line on stderr and an exit code).
"""

from __future__ import annotations


class HangwatchError(Exception):
    """Base class of every error hangwatch reports to a user in one line."""

    exit_code = 1


class UsageError(HangwatchError):
    """The user's input or configuration is invalid; the message names the problem."""

    exit_code = 3
