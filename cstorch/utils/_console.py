"""Console output beside a tqdm progress bar.

A bar redraws its line with carriage returns, so a log record or a warning written to
the same terminal while a bar is shown lands on the bar's line (`... 3.22s/step]INFO
cstorch.trainer: ...`). `above_bar(bar)` routes them through `tqdm.write`, which clears
the bar, prints the text on its own line and draws the bar again below it, for as long
as the context lasts:

* every logging handler that writes to the console (a `StreamHandler` on `sys.stdout` or
  `sys.stderr`, on any logger, and logging's last-resort handler) is replaced by one with
  the same level, formatter, filters and stream that writes through `tqdm.write`;
* `warnings.showwarning` writes through `tqdm.write` to `sys.stderr` (a warning shown
  into another file is left alone), unless warnings are being recorded
  (`warnings.catch_warnings(record=True)`, as pytest does) or `showwarning` was replaced
  already: then they are left as they are.

Everything is restored when the context ends, also on an exception.
"""
from __future__ import annotations

import contextlib
import logging
import sys
import warnings
from typing import Iterator


class _BarHandler(logging.Handler):
    """Writes each record with `bar_class.write`, to the stream of the handler it stands
    in for."""

    def __init__(self, original: logging.StreamHandler, bar_class):
        super().__init__(original.level)
        self.setFormatter(original.formatter)
        for f in original.filters:
            self.addFilter(f)
        self.stream = original.stream
        self.bar_class = bar_class

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.bar_class.write(self.format(record), file=self.stream)
        except Exception:  # noqa: BLE001  (logging's own rule: report, never raise)
            self.handleError(record)


def _is_console(handler) -> bool:
    return (isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler)
            and handler.stream in (sys.stdout, sys.stderr))


def _loggers() -> list[logging.Logger]:
    found = [logging.getLogger()]
    for logger in list(logging.Logger.manager.loggerDict.values()):
        if isinstance(logger, logging.Logger):
            found.append(logger)
    return found


@contextlib.contextmanager
def above_bar(bar) -> Iterator[None]:
    """While the context lasts, console log records and warnings are written above the
    tqdm bar `bar` (see the module docstring); None: nothing changes."""
    if bar is None:
        yield
        return
    bar_class = type(bar)
    swapped = []
    for logger in _loggers():
        if any(_is_console(h) for h in logger.handlers):
            swapped.append((logger, logger.handlers))
            logger.handlers = [_BarHandler(h, bar_class) if _is_console(h) else h for h in logger.handlers]
    last_resort = logging.lastResort
    if last_resort is not None and _is_console(last_resort):
        logging.lastResort = _BarHandler(last_resort, bar_class)
    show_warning = warnings.showwarning
    printing = getattr(warnings, "_showwarnmsg_impl", None)  # a recording catch_warnings replaces it
    untouched = (show_warning is getattr(warnings, "_showwarning_orig", None)
                 and getattr(printing, "__name__", None) == "_showwarnmsg_impl")

    def show_above_bar(message, category, filename, lineno, file=None, line=None):
        if file is not None and file is not sys.stderr:
            return show_warning(message, category, filename, lineno, file, line)
        text = warnings.formatwarning(message, category, filename, lineno, line)
        bar_class.write(text.rstrip("\n"), file=sys.stderr)

    if untouched:
        warnings.showwarning = show_above_bar
    try:
        yield
    finally:
        if untouched:
            warnings.showwarning = show_warning
        logging.lastResort = last_resort
        for logger, handlers in swapped:
            logger.handlers = handlers
