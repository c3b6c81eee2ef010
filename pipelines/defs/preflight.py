"""The preflight, wired to Dagster run config: at the start of every run (the warehouse resource
calls `check_run` before any step) and as a command that prints only the message, for cron and
`make demo`:

    python -m pipelines.defs.preflight [-c run_config.yaml]    # exit 0, or 2 with the problems
"""

import argparse
import sys
from pathlib import Path

import yaml

from pipelines import settings
from pipelines.defs.replay.assets import ReplayConfig
from pipelines.preflight import ConfigurationError, RunChoices, preflight


def run_choices(run_config: dict) -> RunChoices:
    """The deployment names a run config chooses (any asset config field named `deployment`),
    or the replay's default when none does."""
    chosen = [(f"{op}.deployment", cfg["deployment"])
              for op, body in (run_config.get("ops") or {}).items()
              if isinstance(cfg := (body or {}).get("config"), dict) and "deployment" in cfg]
    default = ReplayConfig.model_fields["deployment"].default
    return RunChoices(deployments=chosen or [("replayed_fleet.deployment (default)", default)])


def check_run(warehouse: Path, run_config: dict) -> None:
    """Raise ConfigurationError naming every problem of this run's configuration."""
    preflight(warehouse, settings.reference_dir(), run_choices(run_config))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-c", "--config", type=Path, help="run config YAML, as for dagster -c")
    args = parser.parse_args(argv)
    try:
        run_config = yaml.safe_load(args.config.read_text()) if args.config else {}
    except (OSError, yaml.YAMLError) as exc:
        print(f"run config {args.config}: not a readable YAML file ({exc})", file=sys.stderr)
        return 2
    try:
        check_run(settings.warehouse_path(), run_config or {})
    except ConfigurationError as exc:
        print(exc, file=sys.stderr)
        return 2
    print(f"configuration ok: warehouse {settings.warehouse_path()}, "
          f"reference data {settings.reference_dir()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
