"""The small error vocabulary shared by the command-line tools.

Commands raise these; the dispatcher in `hangwatch.cli` turns them into one line on
stderr and an exit code, never a traceback.
"""

from __future__ import annotations

import unicodedata


class HangwatchError(Exception):
    """Base class of every error hangwatch reports to a user in one line."""

    exit_code = 1


class UsageError(HangwatchError):
    """The user's input or configuration is invalid; the message names the problem."""

    exit_code = 3


class LabError(HangwatchError):
    """The fault lab could not do what was asked (not running, fault failed, ...)."""

    exit_code = 1


class LabSetupError(LabError):
    """The lab cannot start or act because of its environment: Java or Maven missing, jars
    not resolvable, a port taken, a broker that never became ready. Exit 3, like a usage
    error: the message names the step and what to do."""

    exit_code = 3


def one_line(text: str) -> str:
    """`text` with every control or line-breaking character escaped (`\\r`, `\\x1b`,
    `\\u2028`), so a message quoting user input stays one line on a terminal."""
    return "".join(
        ch.encode("unicode_escape").decode() if unicodedata.category(ch) in _ESCAPED else ch
        for ch in text
    )


_ESCAPED = frozenset({"Cc", "Zl", "Zp"})
"""Control characters (newline, carriage return, escape...), line and paragraph separators."""
