"""Snakemake logger plugin `dualcog` (`--logger dualcog`, set in profiles/default): the short
console of dualcog.console. Snakemake finds it by its module name; it replaces Snakemake's
console handler, and dry runs keep Snakemake's own listing."""

from __future__ import annotations

import sys
from logging import LogRecord

from snakemake_interface_logger_plugins.base import LogHandlerBase

from dualcog.console import JobConsole, unreadable_config_detail


class LogHandler(LogHandlerBase):
    def __post_init__(self) -> None:
        from snakemake.logging import DefaultFormatter  # Snakemake's format for the rest

        settings = self.common_settings
        self.stream = sys.stdout if settings.stdout else sys.stderr
        formatter = DefaultFormatter(settings.quiet, settings.show_failed_logs)
        self.console = None if settings.dryrun else JobConsole(formatter.format)
        self.setFormatter(formatter)

    def emit(self, record: LogRecord) -> None:
        try:
            text = self.format(record) if self.console is None else self.console.line(record)
            detail = unreadable_config_detail(record.getMessage(), sys.argv)
            if detail:
                text = f"{text}\n{detail}" if text and text != "None" else detail
            if text and text != "None":
                self.stream.write(text + "\n")
                self.stream.flush()
        except Exception:
            self.handleError(record)

    @property
    def writes_to_stream(self) -> bool:
        return True

    @property
    def writes_to_file(self) -> bool:
        return False

    @property
    def has_filter(self) -> bool:
        return False  # Snakemake's filter: --quiet and --printshellcmds still apply

    @property
    def has_formatter(self) -> bool:
        return True

    @property
    def needs_rulegraph(self) -> bool:
        return False
