"""python -m cstorch.checkpoint info PATH
python -m cstorch.checkpoint convert SRC DST --to {h5,orbax,torch} [--allow-pickle]

SRC may be an H5 checkpoint, an orbax directory written by cstorch or a torch pickle.
DST must not exist."""
from __future__ import annotations

import argparse
import sys

from ..storage import FORMATS
from . import convert, info


def _info(args) -> None:
    header, entries = info(args.path)
    print(f"{header['path']}: {header['format']} checkpoint, format version {header['format_version']}, "
          f"written by cstorch {header['cstorch_version']}, {header['entries']} entries")
    width = max((len(e.key) for e in entries), default=0)
    for e in entries:
        print(f"  {e.key:<{width}}  {e.kind:<14} {e.describe()}")


def _convert(args) -> None:
    convert(args.src, args.dst, args.to, allow_pickle=args.allow_pickle)
    print(f"wrote {args.dst}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cstorch.checkpoint", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("info", help="list what a checkpoint holds")
    p.add_argument("path")
    p.set_defaults(run=_info)
    p = sub.add_parser("convert", help="convert between " + ", ".join(f.description for f in FORMATS.values()))
    p.add_argument("src")
    p.add_argument("dst")
    p.add_argument("--to", choices=list(FORMATS), required=True)
    p.add_argument("--allow-pickle", action="store_true", help="unpickle objects stored in the checkpoint")
    p.set_defaults(run=_convert)
    args = parser.parse_args(argv)
    try:
        args.run(args)
    except (FileNotFoundError, FileExistsError, RuntimeError, ValueError, TypeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
