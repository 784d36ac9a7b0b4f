"""The small error vocabulary shared by the command-line tools.

Commands raise these; the dispatcher in `hangwatch.cli` turns them into one line on
stderr and an exit code, never a traceback.
"""

from __future__ import annotations


class HangwatchError(Exception):
    """Base class of every error hangwatch reports to a user in one line."""

    exit_code = 1


class UsageError(HangwatchError):
    """The user's input or configuration is invalid; the message names the problem."""

    exit_code = 3


class LabError(HangwatchError):
    """The fault lab could not do what was asked (not running, fault failed, ...)."""

    exit_code = 1
