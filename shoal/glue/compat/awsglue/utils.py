"""getResolvedOptions: a Glue job's `--KEY value` arguments, with Glue's reserved ones."""

from __future__ import annotations

import argparse
from typing import Any, NoReturn

from .job import Job

_global_args: dict[str, Any] = {}


class GlueArgumentError(Exception):
    pass


class GlueArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # raise instead of exiting, so the message reaches the caller
        raise GlueArgumentError(message)


def getResolvedOptions(args: list[str], options: list[str], allow_abbrev: bool = False) -> dict[str, Any]:
    """The values of `--OPTION` for each name in `options` (all required), plus the reserved
    job arguments: job_bookmark_option, JOB_ID, JOB_RUN_ID, TempDir, ..."""
    parser = GlueArgumentParser(allow_abbrev=allow_abbrev)
    bookmark, *bookmark_values = Job.job_bookmark_options()
    continuation, *continuation_values = Job.continuation_options()
    for reserved in (bookmark, continuation, *Job.job_bookmark_range_options()):
        if reserved[2:] in options:
            raise RuntimeError("Using reserved arguments " + reserved[2:])
    parser.add_argument(bookmark, choices=bookmark_values, required=False)
    parser.add_argument(continuation, choices=continuation_values, required=False)
    for option in Job.job_bookmark_range_options():
        parser.add_argument(option, required=False)
    for option in Job.id_params()[1:]:
        if option[2:] in options:
            raise RuntimeError("Using reserved arguments " + option)
        parser.add_argument(option, required=False)
    options = [o for o in options if o not in ("RedshiftTempDir", "TempDir")]
    parser.add_argument("--RedshiftTempDir", required=False)
    parser.add_argument("--TempDir", required=False)
    for option in options:
        parser.add_argument("--" + option, required=True)
    parsed, _extra = parser.parse_known_args(args[1:])
    out = vars(parsed)
    if out.get("TempDir") is not None:
        out["RedshiftTempDir"] = out["TempDir"]
    elif out.get("RedshiftTempDir") is not None:
        out["TempDir"] = out["RedshiftTempDir"]
    legacy = out.pop("continuation_option", None)
    if out.get("job_bookmark_option") is None:
        # Old-style continuation options translate one to one; the default is disable.
        out["job_bookmark_option"] = (
            bookmark_values[continuation_values.index(legacy)] if legacy else "job-bookmark-disable"
        )
    missing = [o for o in Job.job_bookmark_range_options() if out.get(o[2:].replace("-", "_")) is None]
    if out["job_bookmark_option"] == "job-bookmark-pause":
        if len(missing) == 1:
            raise RuntimeError("Missing option or value for " + missing[0])
    elif not missing:
        raise RuntimeError("Invalid option(s)" + " ".join(Job.job_bookmark_range_options()))
    _global_args.update(out)
    return out
