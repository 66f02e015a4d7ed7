# SPDX-License-Identifier: MIT
"""The package's error types (psched.PSchedError), apart so that every
module can raise them without importing the KVStore."""


class PSchedError(RuntimeError):
    """A psched call failed.  ``code`` is the library's negative error
    code (psched_strerror() names it), ``str()`` its message."""

    def __init__(self, message, code=0):
        super().__init__(message)
        self.code = code


class _PSchedValueError(PSchedError, ValueError):
    """A bad argument where MXNet raises ValueError (either catches it)."""


PSchedError.__module__ = "psched"
