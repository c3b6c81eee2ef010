"""The commands a user types: validate, materialize from the CLI (as cron does), print the summary."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from pipelines import settings
from pipelines.summary import READS
from pipelines.summary import main as print_summary
from pipelines.warehouse import run_sql

ROOT = Path(__file__).resolve().parents[2]
DAGSTER = Path(sys.executable).with_name("dagster")


def _env(tmp_path: Path) -> dict:
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("")
    return {**os.environ, "DAGSTER_HOME": str(home),
            "FLEETSPEND_WAREHOUSE": str(tmp_path / "wh" / "fleetspend.duckdb"),
            "FLEETSPEND_REPORTS_DIR": str(tmp_path / "reports")}


def _run(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def _job_execute_warnings() -> str:
    """The PYTHONWARNINGS filter `make demo` runs `dagster job execute` with (Makefile)."""
    return re.search(r"^JOB_EXECUTE_WARNINGS := (.+)$", (ROOT / "Makefile").read_text(), re.M).group(1)


@pytest.mark.slow
def test_job_execute_still_warns_without_the_filter(tmp_path):
    """If a Dagster upgrade drops the supersession warning, the filter is dead: remove it."""
    run = _run([str(DAGSTER), "job", "execute", "-m", "pipelines.definitions", "-j", "no_such_job"],
               {**_env(tmp_path), "PYTHONWARNINGS": ""})
    assert "SupersessionWarning: Function `job_execute_command` is superseded" in run.stderr


@pytest.mark.slow
def test_make_ui_in_the_background_of_a_script_still_stops_on_sigint_and_sigterm(tmp_path):
    """A script's background job inherits SIGINT ignored, and `dagster dev` maps SIGTERM to its
    SIGINT handler: `make ui &` then ignored both. The recipe starts dagster (here a stand-in
    that prints what SIGINT does in it) with SIGINT's default, which Python makes an interrupt."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    (venv / "bin" / "dagster").write_text(
        f"#!{sys.executable}\nimport signal\nhandler = signal.getsignal(signal.SIGINT)\n"
        f"print(getattr(handler, '__name__', handler))\n")
    (venv / "bin" / "dagster").chmod(0o755)
    (venv / ".installed").touch()   # newer than pyproject.toml: no install
    made = subprocess.run(
        ["bash", "-c", f"make --no-print-directory -s ui VENV={venv} DAGSTER_HOME={tmp_path / 'home'} & wait"],
        cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert (made.returncode, made.stdout) == (0, "default_int_handler\n"), made.stderr


def test_validate_materialize_and_summary(tmp_path):
    env = _env(tmp_path)
    validate = _run([str(DAGSTER), "definitions", "validate", "-m", "pipelines.definitions"], env)
    assert validate.returncode == 0, validate.stderr[-2000:]

    # the nightly job, as `make demo` and the README's cron line run it (with its one warning
    # filtered): every asset but the on-demand calibration
    run = _run([str(DAGSTER), "job", "execute", "-m", "pipelines.definitions", "-j", "nightly"],
               {**env, "PYTHONWARNINGS": _job_execute_warnings()})
    assert run.returncode == 0, run.stderr[-3000:]
    log = run.stderr + run.stdout
    assert "SupersessionWarning" not in log
    assert "RUN_SUCCESS" in log and 'step "replayed_fleet"' in log and 'step "report"' in log
    assert 'step "calibrated"' not in log
    # The run is recorded in DAGSTER_HOME, so `make ui` on the same home shows it.
    assert any((Path(env["DAGSTER_HOME"]) / "history").rglob("*.db"))
    # calibration has not run, yet its tables and view answer SQL (README), with no rows
    with duckdb.connect(env["FLEETSPEND_WAREHOUSE"], read_only=True) as conn:
        for name in ("calibration", "calibration_errors", "calibration_requests"):
            assert conn.execute(f"SELECT count(*) FROM {name}").fetchall() == [(0,)]

    summary = _run([sys.executable, "-m", "pipelines.summary"], env)
    assert summary.returncode == 0, summary.stderr
    out = summary.stdout
    assert "== Fleet summary ==" in out and "28,185 requests" in out
    # the demo's tp-4 deployment is under a physics caveat, said before the first dollar figure
    assert out.index("== Physics caveats") < out.index("$")
    assert "- azure-2023-70b-h100: Tensor parallelism 4-8" in out
    assert "== Top 10 request shapes by share of spend ==" in out
    assert "dominant stage" in out and "== What-if replays (all shapes) ==" in out
    # its terms and periods are said, as in the report: stages, busy vs fleet dollars, the span
    assert "Dominant stage: the stage holding most" in out and "Δ fleet $/day is the change" in out
    assert "28,185 requests over 58.5 min" in out
    assert str(tmp_path / "wh" / "fleetspend.duckdb") in out


def test_summary_without_warehouse_says_what_to_do(tmp_path):
    env = _env(tmp_path)
    summary = _run([sys.executable, "-m", "pipelines.summary"], env)
    assert summary.returncode == 1
    assert "make demo" in summary.stderr and "Traceback" not in summary.stderr


def test_summary_help_says_what_it_prints_and_reads_no_warehouse(tmp_path):
    """`python -m pipelines.summary --help` printed the whole summary (or, with no warehouse,
    "no warehouse at ..."), and a mistyped option was ignored: it takes no argument, and says so."""
    env = _env(tmp_path)
    helped = _run([sys.executable, "-m", "pipelines.summary", "--help"], env)
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("usage: python -m pipelines.summary")
    assert "FLEETSPEND_WAREHOUSE" in helped.stdout and "no warehouse" not in helped.stderr
    wrong = _run([sys.executable, "-m", "pipelines.summary", "--top", "5"], env)
    assert wrong.returncode == 2 and "Traceback" not in wrong.stderr
    assert "unrecognized arguments: --top 5" in wrong.stderr and "no warehouse" not in wrong.stderr


def test_summary_without_the_warehouse_setting_says_it_is_not_set(tmp_path, monkeypatch, capsys):
    """Run by hand after a cron line that sets FLEETSPEND_WAREHOUSE, the summary looks in the
    default place: the message says the setting is not set, not only 'run make demo'."""
    monkeypatch.delenv("FLEETSPEND_WAREHOUSE", raising=False)
    monkeypatch.setattr(settings, "ROOT", tmp_path)   # a checkout without a default warehouse
    assert print_summary() == 1
    assert capsys.readouterr().err == (
        f"fleetspend: no warehouse at {tmp_path / 'data' / 'warehouse' / 'fleetspend.duckdb'}"
        f" (FLEETSPEND_WAREHOUSE is not set; set it as your runs do to summarize their"
        f" warehouse): no run has published one there yet (a run that fails publishes nothing:"
        f" its log says why); run the pipeline first (`make demo`, or your nightly job)\n")


def test_summary_of_a_file_that_is_not_a_warehouse_names_it(tmp_path):
    env = _env(tmp_path)
    warehouse = Path(env["FLEETSPEND_WAREHOUSE"])
    warehouse.parent.mkdir(parents=True, exist_ok=True)
    warehouse.write_text("not a database\n")
    summary = _run([sys.executable, "-m", "pipelines.summary"], env)
    assert summary.returncode == 1 and "Traceback" not in summary.stderr
    assert f"FLEETSPEND_WAREHOUSE={warehouse}: exists and is not a DuckDB database file" in summary.stderr


@pytest.mark.parametrize("name", ["logs.csv", "day1.jsonl", "folder"])
def test_summary_of_a_trace_or_folder_named_as_the_warehouse_says_so(tmp_path, monkeypatch, capsys, name):
    """FLEETSPEND_WAREHOUSE set to a log by mistake got DuckDB's 'Catalog Error: Cannot launch
    in-memory database in read-only mode!' (DuckDB reads a .csv / .jsonl path as a file to scan),
    which names neither the setting nor what is wrong; the preflight's words say both."""
    path = tmp_path / name
    if name == "folder":
        path.mkdir()
    else:
        path.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,4808,10\n")
    monkeypatch.setenv("FLEETSPEND_WAREHOUSE", str(path))
    assert print_summary() == 1
    err = capsys.readouterr().err
    assert "in-memory" not in err and err.startswith(f"fleetspend: FLEETSPEND_WAREHOUSE={path}: exists and is not a")


def test_summary_of_a_warehouse_held_read_write_says_what_to_do(tmp_path):
    """An analyst's read-write session locks the file against the summary (not against runs):
    the message names the holder and what to do, not only DuckDB's lock error."""
    env = _env(tmp_path)
    warehouse = Path(env["FLEETSPEND_WAREHOUSE"])
    _hand_built_warehouse(warehouse, READS)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys; c = duckdb.connect(sys.argv[1]); print('open',"
         " flush=True); sys.stdin.read()", str(warehouse)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "open\n"
        run = _run([sys.executable, "-m", "pipelines.summary"], env)
    finally:
        holder.communicate("", timeout=60)
    assert run.returncode == 1 and run.stdout == "" and "Traceback" not in run.stderr
    assert run.stderr.startswith(f"fleetspend: cannot read the warehouse {warehouse}: a read-write"
                                 f" session holds it (PID {holder.pid}, ")
    assert run.stderr.endswith("close that session, or open the warehouse with `duckdb -readonly`,"
                               " then run the summary again\n")


def _hand_built_warehouse(path: Path, reads: dict[str, frozenset[str]]) -> None:
    """A warehouse file holding the tables of `reads` with those columns and no rows: what the
    summary checks before it reads anything."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with duckdb.connect(str(path)) as conn:
        for table, columns in reads.items():
            defined = ", ".join(f"{column} VARCHAR" for column in sorted(columns)) or "unused VARCHAR"
            conn.execute(f"CREATE TABLE {table} ({defined})")


def test_summary_of_a_warehouse_lacking_a_column_names_table_and_column(tmp_path):
    env = _env(tmp_path)
    warehouse = Path(env["FLEETSPEND_WAREHOUSE"])
    _hand_built_warehouse(warehouse, {**READS, "what_if": READS["what_if"] - {"change"}})
    run = _run([sys.executable, "-m", "pipelines.summary"], env)
    assert run.returncode == 1 and run.stdout == ""
    assert run.stderr == (f"fleetspend: {warehouse} lacks column change of table what_if, which the"
                          " summary reads; rebuild the warehouse with this release (`make demo`, or"
                          " the nightly job)\n")


def test_summary_names_every_table_and_column_a_warehouse_lacks(tmp_path, monkeypatch, capsys):
    warehouse = tmp_path / "old.duckdb"
    reads = {table: columns for table, columns in READS.items() if table != "chargeback"}
    _hand_built_warehouse(warehouse, {**reads, "fleet_summary": reads["fleet_summary"] - {"idle_usd"}})
    monkeypatch.setenv("FLEETSPEND_WAREHOUSE", str(warehouse))
    assert print_summary() == 1
    assert "lacks table chargeback; column idle_usd of table fleet_summary, which" in capsys.readouterr().err


def test_summary_of_a_warehouse_without_report_tables_says_run_the_nightly_job(tmp_path, monkeypatch,
                                                                              capsys):
    """A warehouse only ingested (`dagster asset materialize --select 'group:ingest'`) sent a
    cron operator to `make demo` alone, as the no-warehouse line once did."""
    warehouse = tmp_path / "ingested.duckdb"
    _hand_built_warehouse(warehouse, {"trace_files": READS["trace_files"]})
    monkeypatch.setenv("FLEETSPEND_WAREHOUSE", str(warehouse))
    assert print_summary() == 1
    assert capsys.readouterr().err == (f"fleetspend: {warehouse} has no report tables yet: the"
                                       f" nightly job builds them (`make demo`, or your nightly"
                                       f" job)\n")


def test_summary_of_a_warehouse_only_calibrated_prints_the_calibration(tmp_path, monkeypatch, capsys):
    """A user who ingested and calibrated (README "Calibration": `python -m pipelines.summary`
    shows the fits per trace) but never ran the nightly job got only 'has no report tables
    yet': the fits the warehouse holds were never shown. They come first now, then the line
    saying the report tables are missing and how to build them."""
    warehouse = tmp_path / "calibrated.duckdb"
    _hand_built_warehouse(warehouse, {"trace_files": READS["trace_files"]})
    with duckdb.connect(str(warehouse)) as conn:
        run_sql(conn, "calibration_table")
        run_sql(conn, "calibration_errors_table")
        conn.execute("INSERT INTO calibration VALUES ('day1', 'seed-example', 'compute_efficiency',"
                     " 0.5, 0.42, false, null, null)")
        conn.execute("INSERT INTO calibration_errors VALUES ('day1', 'seed-example', 'all', 'held_out',"
                     " 'e2e', 40, 2.0, 0.3, 0.08, 0.2, 0.05, 0.12, true)")
    monkeypatch.setenv("FLEETSPEND_WAREHOUSE", str(warehouse))
    assert print_summary() == 1
    out, err = capsys.readouterr()
    assert out == ("\n== Calibration on observed latencies: 1 trace(s) ==\n"
                   "- day1, fitted on seed-example:\n"
                   "  compute_efficiency 0.5 → 0.42\n"
                   "  held-out e2e (40 observed): median error 30.0% → 8.0%, shape-median baseline 12.0%\n"
                   "(catalog → fitted. Per shape: FROM calibration_errors)\n")
    assert err == (f"fleetspend: {warehouse} has no report tables yet: the nightly job builds"
                   f" them (`make demo`, or your nightly job)\n")


def test_every_readme_command_block_running_dagster_sets_its_home():
    """A README block that runs `dagster` without DAGSTER_HOME runs on an ephemeral instance:
    the run never shows in `make ui` (README "The Dagster UI"). The second calibration command
    lost its DAGSTER_HOME= when it was split into preflight && materialize."""
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```(?:bash|sh)\n(.*?)```", readme, re.S)
    running = [block for block in blocks if "bin/dagster " in block]
    assert len(running) >= 3
    assert [block for block in running if "DAGSTER_HOME=" not in block] == []
