"""The one list of report tables and their sql/ steps (pipelines/reports/sql_tables.py), which
the Dagster assets are made from and bench/report_bench.py runs top to bottom."""

from __future__ import annotations

import re

from pipelines.reports.sql_tables import SQL_TABLES
from pipelines.settings import SQL_DIR


def test_every_table_comes_after_the_tables_of_the_list_it_reads():
    """The bench runs the list in order, without Dagster's dependency graph to sort it."""
    names = {table.name for table in SQL_TABLES}
    built: set[str] = set()
    for table in SQL_TABLES:
        assert names & set(table.reads) <= built, f"{table.name} is listed before what it reads"
        built.add(table.name)


def test_the_last_step_of_each_table_creates_it():
    for table in SQL_TABLES:
        sql = (SQL_DIR / f"{table.steps[-1]}.sql").read_text()
        assert re.search(rf"CREATE OR REPLACE TABLE {table.name}\b", sql), table.name

