"""What-if scenarios: data/reference/scenarios.csv turned into deployments and request logs that
the replay runs again, so a lever's value is measured on the same trace, not asserted.

A scenario row changes the baseline deployment and/or the requests; an empty cell keeps the
baseline's value:

    gpu, tp, weights, kv_cache, replicas, max_seqs   the deployment (catalog.build)
    prefix_cache   'off' (or 0): no prompt token is served from cache, neither the logged hits
                   nor the prefix-hash reuse of a log that carries hashes (Mooncake); a share s
                   in (0, 1): each request's cached_tokens becomes
                   max(logged, min(floor(s * prompt), prompt - 1)), hash reuse kept
    output_cap     output_tokens becomes min(output_tokens, cap)
    price_provider, price_plan   (optional columns, both or neither) the prices.csv row the
                   scenario's GPU-seconds are priced at, on the scenario's GPU

A GPU swap takes the new GPU family's efficiency factors, and the scenario's price plan where it
names one, else the baseline's provider and plan for the new GPU where prices.csv lists that GPU
there (an AWS on-demand H100 fleet is compared with AWS on-demand B200s, not with another
provider's), else the new GPU's default price; `change` says which price it took. On the same
GPU the baseline's efficiency overrides are kept, and its price plan unless the scenario names
one. A scenario that changes nothing but the price plan (`price_only`) is replayed all the
same, so its GPU-seconds are the baseline's by construction, not by a copy that could drift.

A scenario whose names are wrong (unknown GPU or dtype, a price plan prices.csv lists for no GPU,
or not for the GPU the scenario swaps to) is a ScenarioError wherever it runs. One whose change
cannot apply to a particular baseline (a price plan prices.csv does not list for the baseline's
GPU, fp4 on a GPU that has neither fp4 tensor cores nor a weight-only kernel, a tp that does not
split that model, weights that leave no room for a KV cache, or too little for the longest
request of the log replayed) is
ScenarioNotApplicable: `replay_scenarios` skips it and records why, so a scenario file written
for one fleet does not block replays of another; on a fleet of several baselines (logs whose
sidecars name their own deployment) it is skipped on every trace, as figures of part of the fleet
would be compared with the whole.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from pipelines.replay import ReplayError, by_trace, replay_traces
from pipelines.replay.api import STAGE_COLUMNS, beyond_kv, kv_shortfall
from pipelines.roofline import CatalogError
from pipelines.roofline.catalog import (SOFTWARE_FACTORS, TENSOR_PARALLEL, Catalog,
                                        csv_problem, drop_unnamed_empty_columns, separator_hint)
from pipelines.roofline.caveats import caveat_column
from pipelines.roofline.deployment import DTYPE_BYTES, Deployment

COLUMNS = {"scenario": pl.String, "description": pl.String, "gpu": pl.String, "tp": pl.Int64,
           "weights": pl.String, "kv_cache": pl.String, "replicas": pl.Int64,
           "max_seqs": pl.Int64, "prefix_cache": pl.String, "output_cap": pl.Int64,
           "source": pl.String}
# columns a scenarios file may leave out (an older file): empty in every row
OPTIONAL_COLUMNS = {"price_provider": pl.String, "price_plan": pl.String}
_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
FLEET_SCHEMA = {"trace": pl.String, "scenario": pl.String, "description": pl.String,
                "change": pl.String, "baseline_deployment": pl.String,
                "deployment": pl.String, "gpu": pl.String, "tp": pl.Int64, "weight_dtype": pl.String,
                "kv_dtype": pl.String, "replicas": pl.Int64, "gpus_per_replica": pl.Int64,
                "max_seqs": pl.Int64, "prefix_cache": pl.String, "output_cap": pl.Int64,
                "lower_precision": pl.Boolean, "price_only": pl.Boolean,
                "usd_per_gpu_hour": pl.Float64, "span_s": pl.Float64, "idle_gpu_s": pl.Float64,
                "busy_gpu_s": pl.Float64, "decode_step_s_batch1_ctx1k": pl.Float64,
                "skipped": pl.String, "caveat": pl.String}


class ScenarioError(ValueError):
    """The scenarios file or one of its rows is wrong; the message names the file and the row."""


class ScenarioNotApplicable(ScenarioError):
    """A well-formed scenario whose change cannot be made to this baseline deployment."""


@dataclass(frozen=True)
class Scenario:
    scenario: str
    description: str
    gpu: str | None = None
    tp: int | None = None
    weights: str | None = None
    kv_cache: str | None = None
    replicas: int | None = None
    max_seqs: int | None = None
    prefix_cache: str | None = None
    output_cap: int | None = None
    source: str | None = None
    price_provider: str | None = None
    price_plan: str | None = None
    # where the row is ("scenarios file F, line N"), for messages; None for one built in code
    origin: str | None = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def named(self) -> str:
        """The scenario as a message names it: its file and line where it has them."""
        return f"{self.origin + ', ' if self.origin else ''}scenario {self.scenario!r}"

    @property
    def cached_share(self) -> float | None:
        """None: cache hits as logged; 0.0 for 'off'; else the assumed hit share."""
        if self.prefix_cache is None:
            return None
        return 0.0 if self.prefix_cache == "off" else float(self.prefix_cache)


def _whole_number_problems(frame: pl.DataFrame, path: Path) -> list[str]:
    """One line per count that is not a whole number ('two', '0.5'), naming its line (column
    `line`) and column, instead of the CSV parser's message about dtypes and null_values."""
    problems = []
    for name, dtype in COLUMNS.items():
        if dtype != pl.Int64:
            continue
        text = pl.col(name).str.strip_chars()
        bad = frame.filter(text.is_not_null() & text.cast(pl.Int64, strict=False).is_null())
        problems += [f"scenarios file {path}, line {line}: {name}={value!r}, expected a whole"
                     f" number >= 1" for line, value in bad.select("line", name).iter_rows()]
    return problems


def _header_problem(columns: list[str]) -> str:
    """Which columns of a scenarios file's header are wrong, by name ("lacks column 'replicas';
    column 'replica' is unknown"): the whole header beside the expected one left a one-letter typo
    to be found by comparing two lists of thirteen names."""
    missing = [c for c in COLUMNS if c not in columns]
    unknown = [c for c in columns if c not in COLUMNS and c not in OPTIONAL_COLUMNS]
    parts = ([f"lacks column(s) {', '.join(map(repr, missing))}"] if missing else []) + (
        [f"column(s) {', '.join(map(repr, unknown))} unknown"] if unknown else [])
    return "; ".join(parts)


def load_scenarios(path: Path) -> list[Scenario]:
    """Read and check the scenarios file; its problems are one ScenarioError naming each, one a
    line (read_scenarios)."""
    scenarios, problems = read_scenarios(path)
    if problems:
        raise ScenarioError("\n".join(problems))
    return scenarios


def read_scenarios(path: Path) -> tuple[list[Scenario], list[str]]:
    """The scenarios of the file and every problem of it, one line each naming the file and the
    line: each row is checked whatever the others got wrong, so that the preflight names them
    all. A file that is missing, unreadable or has other columns is one problem, no scenario;
    a count that is not a whole number is read as empty once named."""
    if not path.is_file():
        return [], [f"scenarios file {path} is missing: expected a CSV with columns"
                    f" {', '.join(COLUMNS)}"]
    try:
        frame = pl.read_csv(path, infer_schema=False)   # as text: a bad count is named below
    except pl.exceptions.PolarsError as exc:
        return [], [f"scenarios file {path} is not a readable CSV: {csv_problem(path, exc)}"]
    # a cell written "" (quoted) or of spaces only is empty: it keeps the baseline's value (and
    # a trailing column of such cells is one a spreadsheet added, dropped below)
    frame = frame.with_columns(pl.when(pl.col(c).str.strip_chars() != "").then(pl.col(c)).alias(c)
                               for c in frame.columns)
    frame = drop_unnamed_empty_columns(frame)
    if not set(COLUMNS) <= set(frame.columns) <= set(COLUMNS) | set(OPTIONAL_COLUMNS):
        return [], [f"scenarios file {path}: {_header_problem(frame.columns)}: expected columns"
                    f" {list(COLUMNS)}, and optionally {list(OPTIONAL_COLUMNS)}"
                    f"{separator_hint(frame)}"]
    frame = frame.with_columns(pl.lit(None, dtype).alias(name)
                               for name, dtype in OPTIONAL_COLUMNS.items() if name not in frame.columns)
    columns = {**COLUMNS, **OPTIONAL_COLUMNS}
    # each row keeps its line in the file; a row of empty cells (a spreadsheet's cleared row)
    # is no scenario
    frame = frame.with_row_index("line", offset=2).filter(
        ~pl.all_horizontal(pl.col(list(columns)).is_null()))
    problems = _whole_number_problems(frame, path)
    lines = frame["line"].to_list()
    scenarios = [Scenario(**row, origin=f"scenarios file {path}, line {line}")
                 for line, row in zip(lines, frame.select(
                     pl.col(name).str.strip_chars().cast(dtype, strict=False) if dtype == pl.Int64
                     else pl.col(name).str.strip_chars()   # a name's spaces go as a count's do
                     for name, dtype in columns.items()).iter_rows(named=True),
                     strict=True)]
    if not scenarios:
        problems.append(f"scenarios file {path} lists no scenario: expected at least one row "
                        f"(the what_if report compares scenarios with the baseline)")
    names = [s.scenario for s in scenarios]
    for line, s in zip(lines, scenarios, strict=True):
        problems += [f"scenarios file {path}, line {line}: {problem}"
                     for problem in _row_problems(s, names)]
    return scenarios, problems


def _row_problems(s: Scenario, names: list[str]) -> list[str]:
    """What is wrong with one scenario row whatever the baseline (`names`: every row's name)."""
    problems = []
    if s.scenario is None or not _NAME.match(s.scenario) or s.scenario == "baseline":
        named = "is empty" if s.scenario is None else f"{s.scenario!r}"
        problems.append(f"scenario name {named}: expected lower-case letters, digits, '-', '_' or"
                        f" '.', and not 'baseline'")
    elif names.count(s.scenario) > 1:
        problems.append(f"scenario {s.scenario!r} appears more than once")
    for label in ("tp", "replicas", "max_seqs", "output_cap"):
        value = getattr(s, label)
        if value is not None and value < 1:
            problems.append(f"{label}={value}, expected a whole number >= 1")
    if s.tp is not None and s.tp >= 1 and TENSOR_PARALLEL.refuses(s.tp):   # wrong on every baseline
        problems.append(f"tp={s.tp}, expected {TENSOR_PARALLEL.expected}")
    if s.prefix_cache is not None and s.prefix_cache != "off":
        try:
            share = float(s.prefix_cache)
        except ValueError:
            share = math.nan
        if not 0.0 <= share < 1.0:
            problems.append(f"prefix_cache={s.prefix_cache!r}, expected 'off' or a share of each"
                            f" prompt in [0, 1)")
    if (s.price_provider is None) != (s.price_plan is None):
        problems.append(f"price_provider={s.price_provider!r}, price_plan={s.price_plan!r}:"
                        f" expected both (a provider and plan of prices.csv) or neither (the"
                        f" baseline's price)")
    if s.source is None:
        problems.append("source is empty: expected where the scenario's numbers come from, or"
                        " that they are an assumption")
    return problems


def check_scenario_names(catalog: Catalog, s: Scenario) -> None:
    """Raise ScenarioError if the scenario names a GPU or dtype the catalog does not know: wrong
    on every deployment, unlike a change that does not fit one (ScenarioNotApplicable)."""
    gpus = catalog.gpus["gpu"].to_list()
    if s.gpu is not None and s.gpu not in gpus:
        raise ScenarioError(f"{s.named}: unknown gpu {s.gpu!r}: "
                            f"{catalog.file('gpus')} has {', '.join(sorted(gpus))}")
    for label in ("weights", "kv_cache"):
        dtype = getattr(s, label)
        if dtype is not None and dtype not in DTYPE_BYTES:
            raise ScenarioError(f"{s.named}: {label}={dtype!r}: expected one of "
                                f"{', '.join(DTYPE_BYTES)}")
    if s.price_provider is None or s.price_plan is None:
        return   # no plan, or half of one: read_scenarios names the missing column
    if s.gpu is not None and not catalog.lists_price(s.gpu, s.price_provider, s.price_plan):
        raise ScenarioError(f"{s.named}: {unlisted_plan(catalog, s, s.gpu)}")
    if catalog.prices.filter((pl.col("provider") == s.price_provider)
                             & (pl.col("plan") == s.price_plan)).height == 0:
        raise ScenarioError(f"{s.named}: {unlisted_plan(catalog, s, None)}")


def unlisted_plan(catalog: Catalog, s: Scenario, gpu: str | None) -> str:
    """Why the scenario's price plan cannot price it on `gpu` (on any GPU where None): its two
    columns, and the plans prices.csv does list there, so the fix is one look."""
    prices = catalog.prices if gpu is None else catalog.prices.filter(pl.col("gpu") == gpu)
    plans = ", ".join(dict.fromkeys(f"{provider} {plan}" for provider, plan
                                    in prices.select("provider", "plan").iter_rows()))
    return (f"price_provider={s.price_provider!r}, price_plan={s.price_plan!r}:"
            f" {catalog.file('prices')} lists no price for {gpu or 'any gpu'} from"
            f" {s.price_provider} {s.price_plan}; its plans{' for ' + gpu if gpu else ''}:"
            f" {plans or 'none'}")


def scenario_deployment(catalog: Catalog, baseline: Deployment, s: Scenario) -> Deployment:
    """The baseline deployment with the scenario's changes (see the module docstring); a
    ScenarioError for unknown names, ScenarioNotApplicable when the change does not fit this
    baseline."""
    check_scenario_names(catalog, s)
    gpu = s.gpu or baseline.gpu.gpu
    same_gpu = gpu == baseline.gpu.gpu
    e = baseline.efficiency
    plan = _price_plan(catalog, baseline, s, gpu)
    if same_gpu:
        kept = {**{k: getattr(e, k) for k in SOFTWARE_FACTORS}, **plan}
    else:
        kept = plan
    scheduler = dataclasses.replace(baseline.scheduler,
                                    max_seqs=s.max_seqs or baseline.scheduler.max_seqs)
    try:
        return catalog.build(
            name=f"{baseline.name}+{s.scenario}", model=baseline.model.model, gpu=gpu,
            tp=s.tp or baseline.tp, weights=s.weights or baseline.weight_dtype,
            kv_cache=s.kv_cache or baseline.kv_dtype, replicas=s.replicas or baseline.replicas,
            network=baseline.network, stack=baseline.stack, **kept, **dataclasses.asdict(scheduler),
        )
    except CatalogError as exc:
        raise ScenarioNotApplicable(f"scenario {s.scenario!r} does not apply to deployment "
                                    f"{baseline.name!r}: {exc}") from None


def _price_plan(catalog: Catalog, baseline: Deployment, s: Scenario, gpu: str) -> dict:
    """The price_provider / price_plan arguments of the scenario's deployment on `gpu`: the
    scenario's plan (ScenarioNotApplicable where prices.csv does not list it for the baseline's
    GPU: check_scenario_names refused one the scenario's own GPU lacks), else the baseline's
    where prices.csv lists it for `gpu`, else none (the GPU's default price)."""
    if s.price_provider is not None:
        if not catalog.lists_price(gpu, s.price_provider, s.price_plan):
            raise ScenarioNotApplicable(f"{s.named} does not apply to deployment"
                                        f" {baseline.name!r}: {unlisted_plan(catalog, s, gpu)}")
        return {"price_provider": s.price_provider, "price_plan": s.price_plan}
    if catalog.lists_price(gpu, baseline.price_provider, baseline.price_plan):
        return {"price_provider": baseline.price_provider, "price_plan": baseline.price_plan}
    return {}


def change_text(baseline: Deployment, s: Scenario, price: str = "") -> str:
    """What the scenario changes on *this* baseline, in its own numbers ("tp 4 → 2; replicas
    3 → 6; 12 → 12 GPUs per trace"), ending with `price` (price_change_text) where the price
    moves: the description in scenarios.csv is prose written once, for one fleet, and would be
    wrong on another."""
    parts = _changes(baseline, s) + ([price] if price else [])
    return "; ".join(parts) or "nothing: the baseline's own settings"


def _changes(baseline: Deployment, s: Scenario) -> list[str]:
    """change_text's parts but the price: none where the scenario changes neither the
    deployment nor the requests (then its replay is the baseline's, GPU-second for GPU-second)."""
    before = {"GPU": baseline.gpu.gpu, "tp": baseline.tp, "weights": baseline.weight_dtype,
              "KV cache": baseline.kv_dtype, "replicas": baseline.replicas,
              "max sequences": baseline.scheduler.max_seqs}
    after = {"GPU": s.gpu, "tp": s.tp, "weights": s.weights, "KV cache": s.kv_cache,
             "replicas": s.replicas, "max sequences": s.max_seqs}
    changed = [label for label, value in after.items()
               if value is not None and value != before[label]]
    parts = [f"{label} {_said(before[label])} → {_said(after[label])}" for label in changed]
    if {"tp", "replicas"} & set(changed):
        gpus = (s.tp or baseline.tp) * (s.replicas or baseline.replicas)
        parts.append(f"{baseline.gpus_per_replica * baseline.replicas:,} → {gpus:,} GPUs per trace")
    share = s.cached_share
    if share is not None:
        parts.append("prefix cache off" if share == 0 else
                     f"an assumed {100 * share:g}% of each prompt served from the prefix cache")
    if s.output_cap is not None:
        parts.append(f"outputs capped at {s.output_cap:,} token{'' if s.output_cap == 1 else 's'}")
    return parts


def _said(value: str | int) -> str:
    """A setting as `change` writes it: a count with comma thousands separators, as the report
    beside it writes every count ("max sequences 256 → 10,000"), a name as it is."""
    return f"{value:,}" if isinstance(value, int) else value


def price_only(s: Scenario, priced: list[tuple[Deployment, str]]) -> bool:
    """Whether the scenario changes the price and nothing else on the fleet (`priced`: each
    baseline deployment with its price_change_text): its replay is the baseline's GPU time,
    billed at another plan. The headline does not rank it among the levers (text.best_scenario):
    it changes what a GPU-second costs, not how many the traffic takes. Judged on the whole
    fleet, as the headline ranks the whole fleet's figures: a plan that is one deployment's own
    changes nothing there, and the scenario is still a price plan only (it was a lever, and the
    headline's best, where it cut the other deployment's price)."""
    return any(price for _, price in priced) and not any(_changes(base, s) for base, _ in priced)


def price_change_text(catalog: Catalog, baseline: Deployment, deployment: Deployment,
                      s: Scenario) -> str:
    """The price the scenario moves to: the plan it names ("price coreweave on-demand $6.155 →
    lambda on-demand $3.99 per GPU-hour"), or on a GPU swap without one, the new GPU's price and
    whose ("price $6.155 → $8.60 per GPU-hour (coreweave on-demand)"), with why where it is not
    the baseline's provider and plan; "" where the GPU and the plan stay (same price)."""
    before, after = catalog.usd_per_gpu_hour(baseline), catalog.usd_per_gpu_hour(deployment)
    old_plan = f"{baseline.price_provider} {baseline.price_plan}"
    whose = f"{deployment.price_provider} {deployment.price_plan}"
    if deployment.gpu.gpu == baseline.gpu.gpu and whose == old_plan:
        return ""
    if s.price_provider is not None:
        return (f"price {old_plan} {gpu_hour_price(before)} → {whose} {gpu_hour_price(after)}"
                f" per GPU-hour")
    if whose != old_plan:
        whose += (f", the {deployment.gpu.gpu} default in prices.csv: it lists no"
                  f" {deployment.gpu.gpu} from {old_plan}")
    return f"price {gpu_hour_price(before)} → {gpu_hour_price(after)} per GPU-hour ({whose})"


def _asked_price(baseline: Deployment, s: Scenario) -> str:
    """The plan a skipped scenario names, where it is not the baseline's ("price coreweave
    on-demand → runpod spot"): no price was looked up, as the scenario does not apply."""
    asked = f"{s.price_provider} {s.price_plan}"
    if s.price_provider is None or asked == f"{baseline.price_provider} {baseline.price_plan}":
        return ""
    return f"price {baseline.price_provider} {baseline.price_plan} → {asked}"


def gpu_hour_price(price: float) -> str:
    """A price per GPU-hour as prices.csv gives it, in cents at least: $8.60, $6.155; up to a
    hundredth of a cent ($8.00001 is $8.00, not '$8.')."""
    decimals = len(f"{price:.4f}".rstrip("0").partition(".")[2])
    return f"${price:.{max(decimals, 2)}f}"


def scenario_requests(requests: pl.DataFrame, s: Scenario) -> pl.DataFrame:
    """The request log as the scenario sees it (output cap, prefix-cache hits)."""
    frame = requests
    if s.output_cap is not None:
        frame = frame.with_columns(pl.min_horizontal("output_tokens", pl.lit(s.output_cap)))
    share = s.cached_share
    if share is not None:
        # cached_tokens is optional in a log handed to the replay from Python
        logged = (pl.col("cached_tokens").fill_null(0)
                  if share > 0 and "cached_tokens" in frame.columns else pl.lit(0))
        assumed = pl.min_horizontal((pl.col("prompt_tokens") * share).floor().cast(pl.Int64),
                                    pl.col("prompt_tokens") - 1)
        frame = frame.with_columns(cached_tokens=pl.max_horizontal(logged, assumed))
    if share == 0 and "prefix_hashes" in frame.columns:
        # the replay reuses the KV of resident hash blocks whatever cached_tokens says
        frame = frame.with_columns(pl.lit(None, frame.schema["prefix_hashes"]).alias("prefix_hashes"))
    return frame


@dataclass(frozen=True)
class ScenarioRun:
    """One scenario on one trace: its scenario_fleets row (FLEET_SCHEMA) and its scenario_stages
    rows, a slice at a time (none when the scenario was skipped: `fleet["skipped"]` says why)."""

    fleet: dict
    stage_batches: Iterator[pl.DataFrame]


def replay_scenarios(requests: pl.DataFrame, catalog: Catalog,
                     baseline: Deployment | Mapping[str, Deployment],
                     scenarios: list[Scenario], bin_s: float = 60.0, *,
                     router: str = "least_outstanding",
                     hash_tokens: Mapping[str, int | None] | None = None) -> Iterator[ScenarioRun]:
    """Replay every trace of `requests` once per scenario, each trace on its own fleet and with
    the baseline's options (`router`; `hash_tokens`: tokens per prefix hash by trace, replay_fleet's
    default where a trace has none), one ScenarioRun per scenario and trace, lazily, so that only
    one trace's replay is held at a time when each run's batches are consumed before the
    next run. The stage rows are the request_stages columns labelled with trace, scenario and
    deployment. `baseline` is the deployment every trace was replayed on, or each trace's
    (trace -> deployment: a fleet of several deployments), to which the scenario's change is made.

    A scenario that does not apply to a trace's baseline (ScenarioNotApplicable), or whose KV
    cache cannot hold a request of that baseline's traces, is not replayed on any trace: its runs
    carry the reason in `skipped` (a lever measured on part of a fleet would compare a part with
    the whole). A ReplayError becomes a ScenarioError naming the scenario."""
    traces = by_trace(requests)
    baselines = baseline if isinstance(baseline, Mapping) else {trace: baseline for trace in traces}
    fleets: dict[str, tuple[Deployment, dict[str, pl.DataFrame]]] = {}   # baseline name -> its traces
    for trace, frame in traces.items():
        fleets.setdefault(baselines[trace].name, (baselines[trace], {}))[1][trace] = frame
    for s in scenarios:
        try:
            planned = [(base, group, _applied(catalog, base, group, s)) for base, group in fleets.values()]
        except ScenarioNotApplicable as exc:
            reason = str(exc) + (f"; skipped on every trace, so that the scenario's figures are"
                                 f" the whole fleet's" if len(fleets) > 1 else "")
            only_price = price_only(s, [(base, _asked_price(base, s)) for base, _ in fleets.values()])
            for trace in traces:
                yield ScenarioRun(_skipped_fleet(trace, s, baselines[trace], reason, only_price),
                                  iter(()))
            continue
        priced = [(base, group, deployment, price_change_text(catalog, base, deployment, s))
                  for base, group, deployment in planned]
        only_price = price_only(s, [(base, text) for base, _, _, text in priced])
        for base, group, deployment, price_text in priced:
            yield from _scenario_runs(catalog, base, deployment, group, s, price_text, bin_s,
                                      router, hash_tokens, only_price)


def _applied(catalog: Catalog, baseline: Deployment, traces: Mapping[str, pl.DataFrame],
             s: Scenario) -> Deployment:
    """The scenario's deployment for `baseline`'s traces; ScenarioNotApplicable where it cannot be."""
    deployment = scenario_deployment(catalog, baseline, s)
    _check_kv_holds_every_request(pl.concat(list(traces.values())), deployment, baseline, s)
    return deployment


def _scenario_runs(catalog: Catalog, baseline: Deployment, deployment: Deployment,
                   traces: Mapping[str, pl.DataFrame], s: Scenario, price_text: str, bin_s: float,
                   router: str, hash_tokens: Mapping[str, int | None] | None,
                   only_price: bool) -> Iterator[ScenarioRun]:
    """The ScenarioRuns of scenario `s` on the traces replayed on `baseline` (`price_text`: its
    price_change_text; `only_price`: the scenario's price_only on the whole fleet)."""
    price = catalog.usd_per_gpu_hour(deployment)
    change = change_text(baseline, s, price_text)
    replays = replay_traces(traces, deployment, bin_s, router=router, hash_tokens=hash_tokens,
                            transform=lambda frame: scenario_requests(frame, s))
    try:
        for trace, _, result in replays:
            labels = (pl.lit(trace).alias("trace"), pl.lit(s.scenario).alias("scenario"),
                      pl.lit(deployment.name).alias("deployment"))
            fleet = {
                "trace": trace, "scenario": s.scenario, "description": s.description,
                "change": change, "baseline_deployment": baseline.name,
                "deployment": deployment.name,
                "gpu": deployment.gpu.gpu, "tp": deployment.tp,
                "weight_dtype": deployment.weight_dtype, "kv_dtype": deployment.kv_dtype,
                "replicas": deployment.replicas,
                "gpus_per_replica": deployment.gpus_per_replica,
                "max_seqs": deployment.scheduler.max_seqs, "prefix_cache": s.prefix_cache,
                "output_cap": s.output_cap,
                "lower_precision": lowers_precision(baseline, deployment.weight_dtype,
                                                    deployment.kv_dtype),
                "price_only": only_price,
                "usd_per_gpu_hour": price,
                "span_s": result.span_s, "idle_gpu_s": result.idle_gpu_s,
                "busy_gpu_s": result.busy_gpu_s,
                "decode_step_s_batch1_ctx1k": deployment.decode_step_s_batch1_ctx1k,
                "skipped": None,
                "caveat": caveat_column(deployment),
            }
            yield ScenarioRun(fleet, _labelled(result.stage_batches(), labels))
            del result  # not held while the next trace replays
    except ReplayError as exc:
        raise ScenarioError(f"scenario {s.scenario!r}, {exc}") from None


def _check_kv_holds_every_request(requests: pl.DataFrame, deployment: Deployment,
                                 baseline: Deployment, s: Scenario) -> None:
    """ScenarioNotApplicable when the scenario's KV cache is too small for a request of the log
    (as the scenario changes it), which the replay would refuse: checked on every trace before
    any is replayed, so such a scenario is skipped with its reason like one whose weights leave
    no KV room at all, instead of failing the what-if replays after some traces were staged."""
    too_long = beyond_kv(scenario_requests(requests, s), deployment)
    if too_long.height:
        raise ScenarioNotApplicable(f"scenario {s.scenario!r} does not apply to deployment"
                                    f" {baseline.name!r}: {kv_shortfall(too_long, deployment)}")


def _labelled(batches: Iterator[pl.DataFrame], labels: tuple[pl.Expr, ...]) -> Iterator[pl.DataFrame]:
    for batch in batches:
        yield batch.select(*labels, *STAGE_COLUMNS)


def lowers_precision(baseline: Deployment, weight_dtype: str, kv_dtype: str) -> bool:
    """Whether a scenario stores the weights or the KV cache in a number format no wider than
    the baseline's and other than it (bf16 -> fp8, fp8 -> fp4, and fp8 -> int8 or fp16 -> bf16
    at the same size): the numerics change, and so can the answers, which no replay measures;
    the headline says so when it names such a lever. A wider format (fp8 -> bf16) is not."""
    def narrower(new: str, old: str) -> bool:
        return new != old and DTYPE_BYTES[new] <= DTYPE_BYTES[old]
    return narrower(weight_dtype, baseline.weight_dtype) or narrower(kv_dtype, baseline.kv_dtype)


def _skipped_fleet(trace: str, s: Scenario, baseline: Deployment, reason: str,
                   only_price: bool) -> dict:
    """The scenario_fleets row of a skipped scenario: what it asked for, no replay figures
    (`only_price`: its price_only on the whole fleet)."""
    asked = _asked_price(baseline, s)
    return {
        "trace": trace, "scenario": s.scenario, "description": s.description,
        "change": change_text(baseline, s, asked), "baseline_deployment": baseline.name,
        "deployment": f"{baseline.name}+{s.scenario}",
        "gpu": s.gpu or baseline.gpu.gpu,
        "tp": s.tp or baseline.tp, "weight_dtype": s.weights or baseline.weight_dtype,
        "kv_dtype": s.kv_cache or baseline.kv_dtype,
        "replicas": s.replicas or baseline.replicas, "gpus_per_replica": None,
        "max_seqs": s.max_seqs or baseline.scheduler.max_seqs, "prefix_cache": s.prefix_cache,
        "output_cap": s.output_cap,
        "lower_precision": lowers_precision(baseline, s.weights or baseline.weight_dtype,
                                            s.kv_cache or baseline.kv_dtype),
        "price_only": only_price,
        "usd_per_gpu_hour": None, "span_s": None, "idle_gpu_s": None, "busy_gpu_s": None,
        "decode_step_s_batch1_ctx1k": None, "skipped": reason, "caveat": "",
    }
