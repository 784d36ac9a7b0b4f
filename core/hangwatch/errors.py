"""The small error vocabulary shared by the command-line tools.

Commands raise these; the dispatcher in `hangwatch.cli` turns them into one line on
stderr and an exit code, never a traceback. `HangwatchError` and `UsageError` are
defined in `hangwatch_producer.errors` (the producer wrapper raises them too, in
executor images without this distribution) and re-exported here.
"""

from __future__ import annotations

import unicodedata

from hangwatch_producer.errors import HangwatchError, UsageError

__all__ = ["HangwatchError", "LabError", "LabSetupError", "UsageError", "one_line"]


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
