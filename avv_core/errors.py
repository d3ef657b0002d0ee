"""Errors the user can fix: reported as one clear message naming file and line or field, exit status 2."""


class InputError(Exception):
    """Bad configuration or sample input. The message names the file and the line or field."""

    exit_status = 2
