"""`python -m tools.devmodel [options]`: build the development model (README.md beside this file)."""

from __future__ import annotations

import argparse
import json
import logging
import os
from dataclasses import fields, replace
from pathlib import Path

from toolsearch.model.build.finetune import FineTuneConfig

from .build import run
from .config import BuildConfig


def parse(argv: list[str] | None = None) -> BuildConfig:
    parser = argparse.ArgumentParser(prog="python -m tools.devmodel", description=__doc__)
    defaults = BuildConfig()
    parser.add_argument("--cache-dir", type=Path, default=defaults.cache_dir)
    parser.add_argument("--out", type=Path, default=defaults.out_dir, help="where the model goes")
    parser.add_argument("--no-out", action="store_true", help="leave the model in the cache only")
    parser.add_argument("--base", type=Path, help="start from this model folder (its digests must match)")
    parser.add_argument("--downloads", type=Path, help="look for npm and Debian packages here first")
    parser.add_argument("--force", action="store_true", help="rebuild every step")
    parser.add_argument("--sources-lock", type=Path, default=defaults.sources_lock, help="the servers")
    parser.add_argument("--requests", type=Path, default=defaults.requests_dir, help="the requests' folder")
    parser.add_argument(
        "--public-pairs",
        type=Path,
        default=defaults.public_pairs,
        help="add these pairs (python -m tools.devmodel.public_pairs); 'none': no pairs",
    )
    for f in fields(FineTuneConfig):
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default), default=f.default)
    args = parser.parse_args(argv)
    train = FineTuneConfig(**{f.name: getattr(args, f.name) for f in fields(FineTuneConfig)})
    return replace(
        defaults,
        cache_dir=args.cache_dir,
        out_dir=None if args.no_out else args.out,
        base_dir=args.base,
        downloads_dir=args.downloads,
        sources_lock=args.sources_lock,
        requests_dir=args.requests,
        public_pairs=None if str(args.public_pairs).lower() == "none" else args.public_pairs,
        force=args.force,
        train=train,
    )


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    print(json.dumps(run(parse(argv)), indent=1))


if __name__ == "__main__":
    main()
