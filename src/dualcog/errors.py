"""Errors that name what is wrong and where, so a user can fix their data."""

from __future__ import annotations


class DualCogError(Exception):
    """Base class of every error this package raises on purpose."""


class DataError(DualCogError, ValueError):
    """Bad benchmark data: names the file, the sample and the field."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        sample: str | None = None,
        field: str | None = None,
    ) -> None:
        self.file = file
        self.sample = sample
        self.field = field
        self.detail = message
        where = []
        if file:
            where.append(f"file {file}")
        if sample:
            where.append(f"sample {sample}")
        if field:
            where.append(f"field {field!r}")
        prefix = ", ".join(where)
        super().__init__(f"{prefix}: {message}" if prefix else message)


class ConfigError(DualCogError, ValueError):
    """Bad workflow configuration."""
