"""`groupd`: serve, show the effective configuration, print the version."""

from __future__ import annotations

import argparse
import logging
import sys

from . import __version__
from .settings import KEYS, ConfigError, Settings, env_var


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="groupd", description="A standalone Kafka group coordinator.")
    p.add_argument("--version", action="version", version=f"groupd {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    def with_config(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--config", metavar="FILE", help="YAML file of settings (Kafka names)")
        sp.add_argument("--set", metavar="KEY=VALUE", action="append", default=[],
                        help="override one setting (repeatable); beats the file and GROUPD_* variables")

    with_config(sub.add_parser("serve", help="run the coordinator"))
    config = sub.add_parser("config", help="configuration commands")
    config_sub = config.add_subparsers(dest="config_command", required=True)
    with_config(config_sub.add_parser("show", help="the effective configuration and where each value came from"))
    return p


def _show(settings: Settings) -> None:
    width = max(len(k.name) for k in KEYS)
    for key in KEYS:
        value = settings.value(key.name)
        if isinstance(value, tuple):
            value = ",".join(map(str, value))
        print(f"{key.name:<{width}}  {value!s:<30}  # {settings.origins[key.name]}; env {env_var(key.name)}")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = Settings.load(args.config, overrides=args.set)
    except ConfigError as e:
        print(f"groupd: configuration error: {e}", file=sys.stderr)
        return 2
    if args.command == "config":
        _show(settings)
        return 0
    logging.basicConfig(level=settings.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    from .server import run

    run(settings)
    return 0
