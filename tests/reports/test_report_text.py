"""The report's text helpers on summaries the demo never produces."""

from __future__ import annotations

import dataclasses
import datetime as dt

import polars as pl
import pytest

from pipelines.reports import html as html_module
from pipelines.reports.text import (
    CHARGEBACK_COLUMNS,
    CHARTS,
    FILES_NAMED,
    NO_WHAT_IF,
    SHAPE_COLUMNS,
    SKIPPED_INTRO,
    WHAT_IF_COLUMNS,
    WHAT_IF_NOTE,
    ReportTables,
    chargeback_note,
    deployment_sentence,
    failed_blocks,
    headline,
    headline_facts,
    markdown_table,
    report_blocks,
    _fmt,
    _shapes_lead,
    summary_lines,
    rejected_sentence,
    unserved_sentence,
    table_rows,
    shape_sign_note,
    what_if_note,
    what_if_scenarios,
    what_if_table,
    with_baseline_row,
)
from pipelines.summary import WHAT_IFS_SHOWN


def _summary(p50_tpot_s, p95_tpot_s) -> pl.DataFrame:
    return pl.DataFrame({
        "trace": ["short"], "requests": [3], "span_s": [3450.0], "prompt_tokens": [30],
        "output_tokens": [3],
        "gpu_hours": [0.1], "spend_usd": [1.0], "idle_share": [0.5], "idle_usd": [0.5],
        "p50_ttft_s": [0.2], "p95_ttft_s": [0.3], "p50_tpot_s": [p50_tpot_s],
        "p95_tpot_s": [p95_tpot_s], "usd_per_1m_output_tokens": [12.5], "mean_batch": [9.59],
        "max_seqs": [256], "peak_kv_use": [0.0318],
    }, schema_overrides={"p50_tpot_s": pl.Float64, "p95_tpot_s": pl.Float64})


def test_a_trace_of_one_token_answers_has_no_tpot_and_still_summarises():
    """Every answer one token long: no interval between tokens, so fleet_summary's TPOT
    percentiles are null; the summary line says so instead of failing."""
    [line] = summary_lines(_summary(None, None))
    assert "TPOT none (one-token answers only);" in line and "$12.50 per 1M output tokens" in line


@pytest.mark.parametrize(("span_s", "said"), [(4.13, "over 4.1 s,"), (3450.0, "over 57.5 min,"), (6 * 3600.0, "over 6.0 h,"),
                                               (7 * 86400.0, "over 7.0 days,")])
def test_a_summary_line_says_the_span_its_dollars_are_over(span_s, said):
    """"$142.81 the fleet cost" over what? The replayed span (it was not said anywhere)."""
    [line] = summary_lines(_summary(0.0123, 0.0456).with_columns(span_s=pl.lit(span_s)))
    assert f"3 requests {said}" in line


@pytest.mark.parametrize(("gpu_hours", "said"), [(0.01375, "0.0138 GPU-hours = $1.00"),
                                                 (11.52, "11.5 GPU-hours = $1.00")])
def test_a_fleet_of_seconds_does_not_read_zero_gpu_hours(gpu_hours, said):
    """A single request on the demo fleet (12 GPUs for 4 s) read "0.0 GPU-hours = $0.0846"."""
    [line] = summary_lines(_summary(0.0123, 0.0456).with_columns(gpu_hours=pl.lit(gpu_hours)))
    assert said in line


def test_one_request_and_one_shape_read_in_the_singular():
    """A fleet of one request read "1 requests over 4.1 s" and "the top 1 of 1 request shapes
    are 100% of it"; its lever lines "shapes #1"."""
    [line] = summary_lines(_summary(0.0123, 0.0456).with_columns(requests=pl.lit(1)))
    assert "**short**: 1 request over" in line
    assert _shapes_lead(1, 1) == "the one request shape is"
    assert _shapes_lead(3, 3) == "all 3 request shapes are"
    assert _shapes_lead(3, 18) == "the top 3 of 18 request shapes are"


def test_tpot_percentiles_are_in_milliseconds():
    [line] = summary_lines(_summary(0.0123, 0.0456))
    assert "TPOT p50/p95 12.3/45.6 ms;" in line


def _tables(what_if: pl.DataFrame, **first_shape) -> ReportTables:
    """Report tables of a two-shape fleet, with `what_if` and the top shape's stages as given."""
    shape = {"rank": 1, "shape": "long prompt / one-line answer", "pct_spend": 60.0,
             "cum_pct_spend": 60.0, "dominant_stage": "decode", "cost_stage": "decode",
             "lever": "batching", "cost_lever": "batching", **first_shape}
    other = {"rank": 2, "shape": "short prompt / long answer", "pct_spend": 40.0,
             "cum_pct_spend": 100.0, "dominant_stage": "decode", "cost_stage": "decode",
             "lever": "batching", "cost_lever": "batching"}
    return ReportTables(
        fleet_summary=pl.DataFrame({"trace": ["t", "all"], "idle_share": [0.3, 0.3],
                                    "idle_usd": [30.0, 30.0], "spend_usd": [100.0, 100.0],
                                    "span_s": [3600.0, 3600.0]}),
        shape_spend=pl.DataFrame([shape, other]),
        stage_breakdown=pl.DataFrame({"shape": ["all"], "stage": ["decode"], "pct_spend": [80.0]}),
        what_if=what_if, chargeback=pl.DataFrame(), fleet_timeline_minute=pl.DataFrame(),
        deployment_summary=pl.DataFrame())


def _what_if(delta_usd: float, delta_fleet_usd: float, worst_trace_ttft: float = -0.1,
             scenario: str = "lever") -> pl.DataFrame:
    """One replayed scenario, all shapes: busy spend 100 → 100 + delta_usd over a 1-hour replay,
    the fleet's cost changing by delta_fleet_usd over it (24 x that per day); pooled p95 TTFT
    1.5 → 1.0 s, the worst trace's own p95 TTFT changing by worst_trace_ttft."""
    return pl.DataFrame({
        "shape": ["all"], "rank": [0], "scenario": [scenario],
        "change": ["tp 4 → 2; 12 → 12 GPUs per trace"],
        "requests": [28_185], "truncated_requests": [0], "truncated_output_pct": [0.0],
        "prefix_cache": [None], "lower_precision": [False], "price_only": [False],
        "baseline_usd": [100.0], "spend_usd": [100.0 + delta_usd],
        "delta_usd": [delta_usd], "delta_usd_per_day": [24 * delta_usd], "delta_pct": [delta_usd],
        "baseline_usd_per_day": [2400.0],
        "delta_p95_ttft_s": [-0.5], "delta_p95_tpot_s": [-0.01], "baseline_p95_ttft_s": [1.5],
        "p95_ttft_s": [1.0], "baseline_p95_tpot_s": [0.05], "p95_tpot_s": [0.04],
        "baseline_fleet_usd": [150.0], "delta_fleet_usd": [delta_fleet_usd],
        "delta_fleet_usd_per_day": [24 * delta_fleet_usd],
        "worst_trace_delta_p95_ttft_s": [worst_trace_ttft], "worst_trace_delta_p95_tpot_s": [-0.01],
        "skipped": [None]}, schema_overrides={"skipped": pl.Utf8, "prefix_cache": pl.Utf8})


def test_a_scenario_that_changes_only_the_price_is_not_the_headlines_lever():
    """A cheaper price plan (the demo's lambda-on-demand: -35% of busy dollars, same latency)
    frees no GPU time and is priced at another plan than the levers: the headline names the
    best lever among the others, and the note under the table says why the larger cut is not it;
    without another lever the headline names none."""
    price = _what_if(-50.0, -70.0, scenario="lambda-on-demand").with_columns(
        change=pl.lit("price coreweave on-demand $6.155 → lambda on-demand $3.99 per GPU-hour"),
        price_only=pl.lit(True), worst_trace_delta_p95_ttft_s=pl.lit(0.0))
    tables = _tables(pl.concat([price, _what_if(-8.0, 0.0, scenario="fp8")]))
    [*_, lever] = headline_facts(tables)
    assert "'fp8'" in lever.text and "lambda" not in lever.text
    assert what_if_note(tables.what_if, tables.fleet_summary) == WHAT_IF_NOTE + (
        " `lambda-on-demand` changes only the price plan (`price_only`): the baseline's"
        " GPU-seconds billed at another price, so the headline's best lever, which frees GPU"
        " time, is chosen among the others.")
    assert len(headline_facts(_tables(price))) == 3


def test_a_lever_that_makes_one_traces_p95_worse_is_not_the_headlines():
    """The traces are different services: a scenario whose pooled p95 TTFT improves while one
    trace's own p95 gets worse (the demo's h200 on the code trace, 4.514 → 4.542 s) is not
    "a lever that keeps p95 latency no worse"; the next best that keeps every trace's is."""
    what_if = pl.concat([_what_if(-20.0, -0.2, worst_trace_ttft=0.03, scenario="cheaper"),
                         _what_if(-8.0, -0.15, scenario="safe")])
    [*_, lever] = headline_facts(_tables(what_if))
    assert "'safe'" in lever.text and "every trace's p95 latency no worse" in lever.text


def test_a_lever_on_the_same_gpus_is_not_called_a_saving_of_the_bill():
    """Busy-GPU dollars freed on a fleet of the same size are not money saved: the headline says
    what the fleet itself costs per day, and that it must be resized to save them."""
    [*_, lever] = headline_facts(_tables(_what_if(-8.0, 0.0)))
    assert "cut busy-GPU spend by $192/day (-8%)" in lever.text
    assert "what the fleet costs (busy + idle) changes by +$0/day" in lever.text
    assert "saves busy dollars only once it is resized" in lever.text
    assert "would save" not in lever.text and "delta_fleet_usd_per_day" in lever.source


def test_a_bill_change_under_half_a_dollar_a_day_keeps_its_cents_not_minus_zero():
    """-$0.24/day in whole dollars: the headline said "changes by +$-0/day" (then +$0/day, a cut
    read as nothing); in the busy saving's digits it is -$0.24."""
    [*_, lever] = headline_facts(_tables(_what_if(-8.0, -0.01)))
    assert "changes by -$0.24/day" in lever.text and "$-" not in lever.text


def test_the_headlines_percent_is_of_the_baselines_dollars_a_day_as_its_dollars_are():
    """Traces of unequal spans (a 2.6-min log beside a 55-min one) weigh differently in the
    replays' dollars (delta_pct) and in dollars a day: the headline said "$1,471/day (-33%)" of a
    $6,946/day baseline, where the cut is 21% of it. Here -$480/day of $2,400/day is -20%,
    whatever delta_pct says."""
    what_if = _what_if(-20.0, 0.0).with_columns(delta_pct=pl.lit(-33.0))
    [*_, lever] = headline_facts(_tables(what_if))
    assert "cut busy-GPU spend by $480/day (-20%)" in lever.text and "-33%" not in lever.text
    assert "baseline_usd_per_day" in lever.source


def test_a_daily_figure_under_ten_dollars_keeps_its_cents():
    """The headline's daily figures under $10 took _fmt's digits, which drop trailing zeros: a
    small fleet's lever read "cut busy-GPU spend by $0.5/day ... changes by -$0.3/day" beside
    the $0.50 the fleet cost (_usd), though the bill's comment promised -$0.30."""
    [*_, lever] = headline_facts(_tables(_what_if(-0.5 / 24, -0.3 / 24)))
    assert "cut busy-GPU spend by $0.50/day" in lever.text
    assert "changes by -$0.30/day" in lever.text


def test_a_cut_under_half_a_percent_keeps_its_size_not_minus_zero():
    """A lever that cuts busy spend by 0.3% printed "(-0%)"."""
    [*_, lever] = headline_facts(_tables(_what_if(-0.3, 0.0)))
    assert "(-0.3%)" in lever.text and "-0%" not in lever.text
    # half a percent rounds half to even, to 0: it printed "(-0%)" too
    [*_, lever] = headline_facts(_tables(_what_if(-0.5, 0.0)))
    assert "(-0.5%)" in lever.text and "-0%" not in lever.text


def test_a_tiny_cut_is_written_out_not_in_scientific_notation():
    """A cut of a few millionths of the spend (an output cap few requests reach, on a big fleet)
    printed "(-4e-05%)" in the headline."""
    [*_, lever] = headline_facts(_tables(_what_if(-0.00004, 0.0)))
    assert "(-0.00004%)" in lever.text and "e-" not in lever.text


def test_a_small_fleets_saving_under_a_dollar_a_day_is_not_zero_dollars():
    """The BurstGPT sample on one RTX 4090 (burstgpt-vllm-1b-4090, $0.55 over the replay): its
    best lever frees $0.143 of busy-GPU spend a day, 38% of it, and the headline said "would cut
    busy-GPU spend by $0/day (-38%)"."""
    [*_, lever] = headline_facts(_tables(_what_if(-0.00596, 0.0)))
    assert "cut busy-GPU spend by $0.143/day" in lever.text and "by $0/day" not in lever.text
    [*_, lever] = headline_facts(_tables(_what_if(-0.3, 0.0)))
    assert "cut busy-GPU spend by $7.20/day" in lever.text


def test_a_small_fleets_bill_cut_is_not_plus_zero_dollars():
    """The fleet bill's change kept whole dollars after the busy saving got its cents: a lever
    that resizes a small fleet, cutting its bill by $0.30 a day, read 'changes by +$0/day'
    beside 'would cut busy-GPU spend by $0.143/day', and -$0.90 read -$1. It takes the busy
    saving's digits (_dollars: $0.30, $7.20, $173)."""
    [*_, lever] = headline_facts(_tables(_what_if(-0.00596, -0.0125)))
    assert "changes by -$0.30/day" in lever.text and "+$0" not in lever.text
    [*_, lever] = headline_facts(_tables(_what_if(-0.00596, -0.0375)))
    assert "changes by -$0.90/day" in lever.text
    [*_, lever] = headline_facts(_tables(_what_if(-0.3, -0.0)))
    assert "changes by +$0/day" in lever.text


def test_a_lever_that_resizes_the_fleet_needs_no_resizing_note():
    [*_, lever] = headline_facts(_tables(_what_if(-30.0, -50.0)))
    assert "changes by -$1,200/day" in lever.text and "resized" not in lever.text


def test_the_headline_names_the_stage_that_holds_the_top_shapes_dollars():
    """A long prompt with a one-line answer spends most of its time in decode steps but most of its
    dollars in prefill: the headline, a sentence on spend, names prefill and its lever."""
    facts = headline_facts(_tables(_what_if(-8.0, -0.15), dominant_stage="decode", lever="batching",
                                   cost_stage="prefill", cost_lever="prompt/prefix caching"))
    assert "(60%, most of its dollars in prefill: prompt/prefix caching)" in facts[1].text
    assert "batching" not in facts[1].text and "cost_stage, cost_lever" in facts[1].source


def test_the_what_if_table_says_the_bills_change_per_day_beside_the_busy_spends():
    """Δ $/day (busy spend) and the fleet's change sat side by side in different periods (per day,
    and over the replay: -708/day beside -47.56); both are per day now, so the bill's change
    (removing 8 of 24 GPUs: about -1,180/day on the demo) reads against the busy spend's."""
    assert WHAT_IF_COLUMNS["delta_usd_per_day"] == "Δ $/day"
    assert WHAT_IF_COLUMNS["delta_fleet_usd_per_day"] == "Δ fleet $/day"
    assert "delta_fleet_usd" not in WHAT_IF_COLUMNS
    assert "Δ fleet $/day is the change of what the fleet costs (busy + idle) per day" in WHAT_IF_NOTE


def test_a_small_share_is_written_out_not_in_exponent_form():
    """A rare shape's % of requests printed as 3.7e-06; three significant digits stay."""
    assert [_fmt(v) for v in (3.7e-06, 0.011, 0.21, -0.00384, 4.9)] == [
        "0.0000037", "0.011", "0.21", "-0.00384", "4.90"]


def test_a_cell_reads_in_the_form_of_its_rounded_value():
    """0.9995 rounds to 1 and reads 1.00 as 1.0 does (it read '1'); 999.999 reads 1,000 as
    1000.0 does (it read '1,000.00'); a NaN (a 0/0 share) reads nan instead of stopping the
    report with "cannot convert float NaN to integer"."""
    assert [_fmt(v) for v in (0.9995, -0.9996, 0.99949, 1.0, 999.999, 999.994, 1000.0)] == [
        "1.00", "-1.00", "0.999", "1.00", "1,000", "999.99", "1,000"]
    assert [_fmt(v) for v in (float("nan"), float("inf"), 1e-12)] == ["nan", "inf", "0.000000000001"]


def test_a_fleet_of_one_token_answers_still_gets_a_lever():
    """Every answer one token long (a classifier's log): no trace has a p95 TPOT, so its worst
    change is null; that is no TPOT made worse, and the lever is still the headline's."""
    what_if = _what_if(-8.0, -0.15).with_columns(
        worst_trace_delta_p95_tpot_s=pl.lit(None, pl.Float64), delta_p95_tpot_s=pl.lit(None, pl.Float64),
        baseline_p95_tpot_s=pl.lit(None, pl.Float64), p95_tpot_s=pl.lit(None, pl.Float64))
    [*_, lever] = headline_facts(_tables(what_if))
    assert "the best lever that keeps every trace's p95 latency no worse, 'lever'" in lever.text


def test_a_lever_that_leaves_no_token_interval_is_not_the_headlines():
    """An output cap of one token removes every token interval the baseline had: its worst
    trace's TPOT change is null too, but there was a TPOT to compare, and a lever that ends
    every answer after its first token does not keep it 'no worse' (it was named the best
    lever, -$1,759/day on the demo, with a scenario capped at 1 token)."""
    what_if = pl.concat([
        _what_if(-70.0, -0.2, scenario="cap1").with_columns(
            worst_trace_delta_p95_tpot_s=pl.lit(None, pl.Float64),
            delta_p95_tpot_s=pl.lit(None, pl.Float64), p95_tpot_s=pl.lit(None, pl.Float64)),
        _what_if(-8.0, -0.15, scenario="safe")])
    [*_, lever] = headline_facts(_tables(what_if))
    assert "'safe'" in lever.text and "'cap1'" not in lever.text


def test_the_headline_lever_is_the_one_that_frees_the_most_per_day():
    """Of two levers that keep every trace's p95 no worse, the headline names the larger daily
    saving, whichever order the table lists them in."""
    for order in ((-8.0, -20.0), (-20.0, -8.0)):
        what_if = pl.concat([_what_if(d, -0.15, scenario=f"save-{-d:.0f}") for d in order])
        [*_, lever] = headline_facts(_tables(what_if))
        assert "'save-20'" in lever.text and "$480/day" in lever.text


def test_a_lever_that_makes_one_traces_tpot_worse_is_not_the_headlines():
    """The TPOT side of the same rule: a trace whose own p95 TPOT gets worse rules the lever out."""
    what_if = pl.concat([
        _what_if(-20.0, -0.2, scenario="slower-tokens").with_columns(
            worst_trace_delta_p95_tpot_s=pl.lit(0.002)),
        _what_if(-8.0, -0.15, scenario="safe")])
    [*_, lever] = headline_facts(_tables(what_if))
    assert "'safe'" in lever.text


def test_a_lever_that_barely_moves_the_bill_still_says_the_fleet_must_be_resized():
    """Freeing $192/day of busy GPUs while the bill moves by -$3.60/day (a replay that ends a
    little sooner) is not a resized fleet: the note stays."""
    [*_, lever] = headline_facts(_tables(_what_if(-8.0, -0.15)))
    assert "changes by -$3.60/day: a fleet of fixed size saves busy dollars only once it is resized" \
        in lever.text


def test_without_a_lever_the_headline_says_why_it_names_none():
    """When every scenario that saves makes some trace's p95 worse (one replica of three on a
    conv slice: -$1,104/day, p95 TTFT 0.302 → 0.411 s), the headline said nothing of levers above
    a table whose first row cuts spend; it says why it names none (and it is not an IndexError).
    Where none saves it says that; where none was replayed, the what-if section says so."""
    what_if = _what_if(-8.0, -0.15, worst_trace_ttft=0.2)
    *_, why = headline_facts(_tables(what_if))
    assert why.source.startswith("what_if: shape = 'all', delta_usd_per_day")
    text = headline(_tables(what_if))
    assert text.startswith("Decode owns 80% of attributed GPU spend;") and text.endswith(
        "the fleet cost. No what-if lever cuts busy-GPU spend without making some trace's p95 TTFT"
        " or TPOT worse (the what-if table shows what each one trades).")
    assert headline(_tables(_what_if(5.0, 0.0))).endswith(
        "the fleet cost. No what-if lever cuts busy-GPU spend.")
    skipped = _what_if(0.0, 0.0).with_columns(delta_usd_per_day=pl.lit(None, pl.Float64),
                                               skipped=pl.lit("no tp 3"))
    assert headline(_tables(skipped)).endswith("the fleet cost.")


@pytest.mark.parametrize(("prefill", "decode", "said"), [(100.0, 0.0, "Prefill owns 100%"),
                                                           (55.0, 45.0, "Prefill owns 55%"),
                                                           (20.0, 80.0, "Decode owns 80%")])
def test_the_headline_names_the_stage_that_owns_most_of_the_spend(prefill, decode, said):
    """A log of one-token answers (all prefill) read "Decode owns 0% of attributed GPU spend",
    and a burst of long prompts "Decode owns 45%": the headline names where the money goes."""
    stages = pl.DataFrame({"shape": ["all"] * 4, "stage": ["queue", "prefill", "decode", "network"],
                           "pct_spend": [0.0, prefill, decode, 0.0]})
    tables = dataclasses.replace(_tables(_what_if(-8.0, 0.0)), stage_breakdown=stages)
    [first, *_] = headline_facts(tables)
    assert first.text == f"{said} of attributed GPU spend"
    assert first.source == f"stage_breakdown: shape = 'all', stage = '{said.split()[0].lower()}', pct_spend"


def test_the_what_if_table_lists_the_scenarios_by_daily_saving():
    """The report's and the summary's what-if table: the largest saving first, skipped scenarios
    under it with their reason, not as rows."""
    what_if = pl.concat([_what_if(-8.0, 0.0, scenario="small"), _what_if(-20.0, 0.0, scenario="big"),
                         _what_if(5.0, 0.0, scenario="dearer"),
                         _what_if(0.0, 0.0, scenario="tp3").with_columns(
                             delta_usd_per_day=pl.lit(None, pl.Float64), skipped=pl.lit("no tp 3"))])
    replayed, skipped = what_if_scenarios(what_if)
    assert replayed["scenario"].to_list() == ["big", "small", "dearer"]
    assert skipped == ["`tp3`: no tp 3"]


def test_a_whole_number_cell_has_thousands_separators():
    assert [_fmt(v) for v in (28185, 7, -1200)] == ["28,185", "7", "-1,200"]


def test_a_boolean_cell_reads_true_or_false_not_a_number():
    """The UI's table previews (calibration.at_bound, prices.is_default, roofline.chunked_prefill,
    what_if.lower_precision) showed a switch as 0 or 1, the formatting of a count."""
    assert [_fmt(v) for v in (True, False)] == ["true", "false"]
    frame = pl.DataFrame({"parameter": ["compute_efficiency"], "at_bound": [False]})
    assert markdown_table(frame, {c: c for c in frame.columns}).splitlines()[-1] == (
        "| compute_efficiency | false |")


def test_the_requests_set_aside_are_one_sentence_and_none_says_nothing():
    rows = [("a", 1_257, "a:1005", "has 5019 tokens"), ("b", 3, "b:7", "needs more")]
    assert unserved_sentence(rows) == (
        "**Left out:** 1,260 request(s) (a 1,257, b 3) were set aside, not replayed, because the"
        " deployment their trace replays on cannot serve them (e.g. a:1005, which has 5019 tokens);"
        " every figure of this report leaves them out (`unserved_requests`).")
    assert unserved_sentence([]) is None


def test_the_rejected_rows_are_one_sentence_of_the_report():
    """Rows the ingest rejected are in no figure; the summary named their files, the report did
    not, and a reader of the report alone took its requests for every row of the logs."""
    rows = [("/logs/conv.csv", 1046, 1041, 5, 7, "GeneratedTokens is -3: a token count cannot be negative"),
            ("/logs/empty.csv", 0, 0, 0, None, None)]
    assert rejected_sentence(rows) == (
        "**Rows left out:** 5 of 1,046 rows of conv.csv (e.g. line 7: GeneratedTokens is -3: a token"
        " count cannot be negative) were rejected at ingest; every figure of this report leaves them"
        " out (`rejected_requests`, with each row's reason). empty.csv has no data row.")
    assert rejected_sentence([]) is None


def test_the_rows_left_out_sentence_names_a_few_files_and_counts_the_rest():
    """A folder of many partly rejected (or empty) files made one sentence as long as the folder:
    the first FILES_NAMED of each kind are named, the rest counted."""
    partly = [(f"/logs/day{n}.csv", 100, 98, 2, 3, "bad") for n in range(FILES_NAMED + 2)]
    empty = [(f"/logs/blank{n}.csv", 0, 0, 0, None, None) for n in range(FILES_NAMED + 1)]
    said = rejected_sentence(partly + empty)
    assert said.count("rows of day") == FILES_NAMED and "day5.csv" not in said
    assert ("; 4 rows of 2 more files were rejected at ingest" in said
            and "blank4.csv and 1 more file have no data row." in said and "blank5" not in said)


def test_the_files_the_last_ingest_could_not_read_are_named_each_with_what_the_figures_hold():
    """A file the ingest could not read is in no figure as it is now; the summary and an asset
    check named it, the report did not. One that ingested before keeps its previous rows in
    the figures, and says so; one never ingested is wholly missing."""
    at = dt.datetime(2026, 12, 1, 9, 30, tzinfo=dt.timezone.utc)
    rows = [("/logs/conv.csv", "/logs/conv.csv: binary data, expected a trace", 19_366, at, "ab"),
            ("/logs/new.csv", "empty file", None, None, None)]
    assert failed_blocks(rows) == [
        ("p", "**Trace files not read:** the last ingest could not read 2 trace files; what they"
              " hold now is in no figure of this report (`failed_trace_files`):"),
        ("ul", ["/logs/conv.csv: binary data, expected a trace — the figures hold its previous"
                " version: 19,366 requests ingested 2026-12-01 09:30:00 UTC",
                "new.csv: empty file — never ingested: none of its requests is in any figure"])]
    assert failed_blocks([]) == []


def test_a_folder_of_many_unread_files_names_the_first_and_counts_the_rest():
    rows = [(f"/logs/{n}.csv", f"/logs/{n}.csv: the file is empty", None, None, None)
            for n in range(FILES_NAMED + 3)]
    [(_, lead), (_, items)] = failed_blocks(rows)
    assert f"could not read {FILES_NAMED + 3} trace files" in lead
    assert len(items) == FILES_NAMED + 1
    assert items[-1] == "and 3 more files (`failed_trace_files` holds each with its error)"


@pytest.mark.parametrize(("before", "after", "said"), [(1.5, 1.0, "p95 TTFT 1.50 → 1.00 s"),
                                                       (0.0688, 0.0652, "p95 TTFT 0.069 → 0.065 s"),
                                                       (0.05, 0.05, "p95 TTFT 0.05 → 0.05 s")])
def test_the_headlines_ttft_shows_the_change_it_names(before, after, said):
    """A single request's best lever cut p95 TTFT from 0.0688 to 0.0652 s: it read "0.07 → 0.07 s"."""
    what_if = _what_if(-8.0, 0.0).with_columns(baseline_p95_ttft_s=pl.lit(before), p95_ttft_s=pl.lit(after))
    assert f"{said};" in headline(_tables(what_if))


def test_the_what_if_note_says_why_delta_pct_and_the_headlines_pct_differ():
    """A 2-minute trace beside a 3-hour one: tp2-fp8 read -42.71 under Δ spend % and -5% in the
    headline, with no word on why; one span (or spans that do not move the %) adds nothing."""
    tables = _tables(_what_if(-8.0, 0.0))
    assert what_if_note(tables.what_if, tables.fleet_summary) == WHAT_IF_NOTE
    fleet = pl.DataFrame({"trace": ["short", "long", "all"], "span_s": [126.0, 10_768.0, 10_768.0]})
    apart = tables.what_if.with_columns(baseline_usd_per_day=pl.lit(19_200.0))  # -1% a day vs -8%
    note = what_if_note(apart, fleet)
    assert note.startswith(WHAT_IF_NOTE) and "The traces' spans differ (2.1 min–3.0 h)" in note
    assert "the headline's % is Δ $/day's share of the baseline's busy dollars a day" in note
    assert "(-1%)" in headline(dataclasses.replace(tables, what_if=apart))


def test_the_what_if_note_says_a_scenario_replays_the_baselines_requests_not_whole_traces():
    """Requests the baseline set aside (unserved_requests) are in no scenario: 'a full replay of
    the same traces' told a reader of seed-example's report that its 2,869 were replayed there."""
    assert "a full replay of the requests the baseline replayed" in WHAT_IF_NOTE
    assert "same traces" not in WHAT_IF_NOTE


def _chargeback(*rows) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=["dimension", "value", "requests", "spend_usd", "pct_spend"],
                        orient="row")


FLEET = pl.DataFrame({"trace": ["t", "all"], "requests": [8870, 8870], "attributed_usd": [24.35, 24.35],
                      "idle_usd": [114.07, 114.07], "spend_usd": [138.42, 138.42]})


def test_chargeback_says_its_dollars_leave_out_idle_gpus_and_unnamed_requests():
    """A log where 51 of 8,870 requests name a tenant and a model (the BurstGPT sample beside the
    Azure code trace): the table's tenants held 10.7% of spend and $2.60 of a $138.42 fleet, and
    the report did not say what the rest was, so a bill split by it recovered 2% of the cost."""
    note = chargeback_note(_chargeback(("model", "ChatGPT", 36, 2.05, 8.42), ("model", "GPT-4", 15, 0.55, 2.26),
                                       ("tenant", "Conversation log", 34, 1.68, 6.90),
                                       ("tenant", "API log", 17, 0.92, 3.78)), FLEET)
    assert note == ("The $ and % spend columns are attributed (busy) GPU spend: $24.35 of the $138.42 the fleet"
                    " cost; its idle GPU time ($114.07) is charged to no one. A dimension's shares"
                    " add up to 100% only where every request names one: 8,819 requests name no"
                    " model (89.32% of attributed spend, $21.75); 8,819 name no tenant (89.32%,"
                    " $21.75).")


def test_a_fleets_dollars_read_the_same_in_its_summary_line_headline_and_chargeback_note():
    """A small fleet (23 requests on one A100, $0.0143 of which $0.00481 idle) read "$0.01 (idle
    72.9% = $0.00)" in its summary line and the headline, and "$0.0143 ... ($0.00481)" in the
    chargeback note; a big one read $1,234.56 in the summary line and $1,235 in the note."""
    for spend, idle, said, idle_said in ((0.0143, 0.00481, "$0.0143", "$0.00481"),
                                         (1234.56, 114.07, "$1,234.56", "$114.07")):
        summary = _summary(0.0123, 0.0456).with_columns(spend_usd=pl.lit(spend), idle_usd=pl.lit(idle))
        [line] = summary_lines(summary)
        assert f"= {said} (idle 50.0% = {idle_said};" in line
        fleet = FLEET.with_columns(spend_usd=pl.lit(spend), idle_usd=pl.lit(idle))
        note = chargeback_note(_chargeback(("tenant", "acme", 8870, 24.35, 100.0)), fleet)
        assert f"$24.35 of the {said} the fleet cost; its idle GPU time ({idle_said})" in note
        tables = _tables(_what_if(-8.0, 0.0))
        tables = dataclasses.replace(tables, fleet_summary=tables.fleet_summary.with_columns(
            spend_usd=pl.lit(spend)))
        assert f"% of the {said} the fleet cost" in headline(tables)


def test_chargeback_note_names_a_dimension_no_request_names():
    note = chargeback_note(_chargeback(("tenant", "acme", 8870, 24.35, 100.0)), FLEET)
    assert note.endswith("charged to no one. No request names a model.")


def _report_tables(what_if: pl.DataFrame) -> ReportTables:
    """_tables with the columns report_blocks reads besides the headline's: a one-trace fleet
    summary line and the stage rows."""
    t = _tables(what_if)
    fleet = _summary(0.0123, 0.0456).with_columns(trace=pl.lit("all"), spend_usd=pl.lit(100.0),
                                                  idle_share=pl.lit(0.3), idle_usd=pl.lit(30.0))
    stages = t.stage_breakdown.with_columns(stage_order=pl.lit(3))
    return ReportTables(fleet_summary=fleet, shape_spend=t.shape_spend, stage_breakdown=stages,
                        what_if=what_if, chargeback=t.chargeback,
                        fleet_timeline_minute=t.fleet_timeline_minute,
                        deployment_summary=t.deployment_summary)


def test_the_report_says_the_requests_set_aside_before_its_dollar_figures():
    """The summary names the requests set aside before any dollar figure; the report put its
    sentence under the Fleet heading, after the headline's $ figures, which a reader acts on
    without knowing they leave requests out."""
    blocks = report_blocks(_report_tables(_what_if(-8.0, 0.0)), "d",
                           caveats=[("baseline", "d: it is off")],
                           unserved=[("t", 3, "t:9", "is long")])
    texts = [b[1] if isinstance(b[1], str) else "" for b in blocks]
    left_out = next(i for i, text in enumerate(texts) if text.startswith("**Left out:**"))
    first_dollar = next(i for i, text in enumerate(texts) if "$" in text)
    assert texts.index("**Caveat:** d: it is off") < left_out < first_dollar


def test_the_report_says_a_trace_priced_as_another_model_before_its_dollar_figures():
    """The summary and the replay's check name a log priced as another model than it names;
    report.md and report.html, which a reader may read alone, said nothing of it."""
    line = "t: the log names model 'x' (llama-2-70b in the catalog) on 3 of its 5 requests, ..."
    blocks = report_blocks(_report_tables(_what_if(-8.0, 0.0)), "d",
                           unserved=[("t", 3, "t:9", "is long")], other_models=[line])
    texts = [b[1] if isinstance(b[1], str) else "" for b in blocks]
    named = texts.index(f"**Another model:** {line}")
    first_dollar = next(i for i, text in enumerate(texts) if "$" in text)
    assert texts.index(next(t for t in texts if t.startswith("**Left out:**"))) < named < first_dollar
    assert not any("Another model" in text for text in texts if text != texts[named])
    plain = report_blocks(_report_tables(_what_if(-8.0, 0.0)), "d")
    assert not any(isinstance(b[1], str) and "Another model" in b[1] for b in plain)


def test_the_report_says_a_log_counted_twice_before_its_dollar_figures():
    """Two files of one log are two traces: every figure counts its traffic twice. The run log
    and the summary said so; report.md and report.html, which a reader may read alone, did not."""
    line = "logs/day1.csv, logs/day1.csv.gz: the same requests (...): ... count 2 times; remove the copies"
    blocks = report_blocks(_report_tables(_what_if(-8.0, 0.0)), "d", copies=[line])
    texts = [b[1] if isinstance(b[1], str) else "" for b in blocks]
    named = texts.index(f"**Counted more than once:** {line}")
    assert named < next(i for i, text in enumerate(texts) if "$" in text)
    plain = report_blocks(_report_tables(_what_if(-8.0, 0.0)), "d")
    assert not any(isinstance(b[1], str) and "more than once" in b[1] for b in plain)


def test_a_report_whose_every_scenario_was_skipped_says_so_instead_of_an_empty_table():
    """Every scenario skipped (a tp that splits nothing, fp4 on an MI300X): the report showed an
    empty what-if chart, a table of headers alone under "Each scenario ... is a full replay", and
    report.html embedded the empty chart; now one sentence, then the skipped list."""
    skipped = _what_if(-8.0, 0.0).with_columns(skipped=pl.lit("tp=3 cannot split it"),
                                               delta_usd_per_day=pl.lit(None, pl.Float64))
    blocks = report_blocks(_report_tables(skipped), "d")
    assert ("chart", "what_if") not in blocks
    assert not any(b[0] == "table" and b[2] is WHAT_IF_COLUMNS for b in blocks)
    texts = [b[1] for b in blocks if b[0] == "p"]
    assert texts.index(NO_WHAT_IF) + 1 == texts.index(SKIPPED_INTRO) and WHAT_IF_NOTE not in texts
    assert ("chart", "what_if") in report_blocks(_report_tables(_what_if(-8.0, 0.0)), "d")


def test_report_html_embeds_only_the_charts_it_shows(monkeypatch):
    """A chart the report leaves out (the what-if chart where no scenario was replayed) is not
    embedded either: vegaEmbed of a missing element only logs an error in the page."""
    monkeypatch.setattr(html_module, "report_blocks", lambda *args: [("chart", "pareto")])
    page = html_module.report_html(_report_tables(_what_if(-8.0, 0.0)), "d",
                                   {stem: {"mark": "point"} for stem in CHARTS})
    assert "vegaEmbed('#chart-pareto'" in page and "chart-what_if" not in page


def test_the_two_dollars_per_million_output_tokens_say_their_bases():
    """The shapes table's $/1M out is attributed (busy) spend, the fleet line's includes idle
    GPUs: the demo's conv trace read $17.61 per 1M output tokens above a table whose top shape
    read $16.40 "$/1M out", under one label for two bases."""
    [line] = summary_lines(_summary(0.0123, 0.0456))
    assert "$12.50 per 1M output tokens (busy + idle)" in line
    assert SHAPE_COLUMNS["usd_per_1m_output_tokens"] == "busy $/1M out"
    assert CHARGEBACK_COLUMNS["usd_per_1m_output_tokens"] == "busy $/1M out"


def test_the_what_if_table_shows_the_baseline_its_deltas_are_measured_against():
    """Every row's Δ is against the baseline's busy $ and p95s, which the table never showed:
    a reader saw tp2-fp8's busy $86.41 and -7.40% but not the $93.31 it is measured from."""
    replayed, _ = what_if_scenarios(pl.concat([_what_if(-8.0, 0.0, scenario="small"),
                                               _what_if(-20.0, 0.0, scenario="big")]))
    rows = table_rows(with_baseline_row(replayed), WHAT_IF_COLUMNS)
    assert [row[0] for row in rows] == ["baseline", "big", "small"]
    cells = dict(zip(WHAT_IF_COLUMNS, rows[0], strict=True))
    assert (cells["spend_usd"], cells["p95_ttft_s"], cells["p95_tpot_s"]) == ("100.00", "1.50", "0.05")
    assert {cells[c] for c in WHAT_IF_COLUMNS if c.startswith("delta_")} == {"–"}
    assert with_baseline_row(replayed.clear()).height == 0   # every scenario skipped: no figures


def test_the_headlines_daily_saving_says_the_span_it_is_scaled_from():
    """The demo's "$173/day" is 58.5 min of traffic scaled to a day, which only the what-if
    note said: a planner took it for a measured day. Traces of different spans give the range."""
    [*_, lever] = headline_facts(_tables(_what_if(-8.0, 0.0)))
    assert "cut busy-GPU spend by $192/day (-8%) scaled from 60.0 min of traffic, p95" in lever.text
    t = _tables(_what_if(-8.0, 0.0))
    for spans, said in (([3450.0, 3510.0], "57.5–58.5 min"), ([3450.0, 6 * 3600.0], "57.5 min–6.0 h")):
        fleet = t.fleet_summary.with_columns(span_s=pl.Series(spans))
        [*_, lever] = headline_facts(dataclasses.replace(t, fleet_summary=fleet))
        assert f"(-8%) scaled from {said} of traffic," in lever.text


def test_a_lever_that_cuts_answers_says_how_many_it_cuts():
    """An output cap frees dollars by generating less: the headline named 'output-cap-256'
    (outputs capped at 256 tokens) as a saving, not as the change of the product it is."""
    capped = _what_if(-8.0, 0.0, scenario="output-cap-256").with_columns(
        change=pl.lit("outputs capped at 256 tokens"), truncated_requests=pl.lit(1_234),
        truncated_output_pct=pl.lit(41.234))
    [*_, lever] = headline_facts(_tables(capped))
    assert ("'output-cap-256' (outputs capped at 256 tokens; it cuts 1,234 of 28,185 answers short,"
            " 41.23% of all output tokens)") in lever.text
    assert "truncated_requests" in lever.source


def test_a_lever_that_rests_on_an_assumed_cache_hit_share_says_so():
    assumed = _what_if(-8.0, 0.0, scenario="prefix-cache").with_columns(
        change=pl.lit("an assumed 50% of each prompt served from the prefix cache"),
        prefix_cache=pl.lit("0.5"))
    [*_, lever] = headline_facts(_tables(assumed))
    assert ("'prefix-cache' (an assumed 50% of each prompt served from the prefix cache; the saving"
            " holds only if the traffic hits the cache that often)") in lever.text
    assert lever.source.endswith("delta_fleet_usd_per_day, prefix_cache; fleet_summary: span_s")
    for setting in (None, "off", "0"):
        plain = assumed.with_columns(prefix_cache=pl.lit(setting, pl.Utf8))
        [*_, lever] = headline_facts(_tables(plain))
        assert "holds only if" not in lever.text
        assert "prefix_cache" not in lever.source and "truncated" not in lever.source


def test_a_lever_in_fewer_bits_says_to_check_the_answers():
    """The demo's headline lever, tp2-fp8, stores weights and KV cache in fp8: the numerics
    change and so can the answers, which no replay measures; the headline said nothing of it."""
    fp8 = _what_if(-8.0, 0.0, scenario="tp2-fp8").with_columns(
        change=pl.lit("tp 4 → 2; weights bf16 → fp8; KV cache bf16 → fp8"), lower_precision=pl.lit(True))
    [*_, lever] = headline_facts(_tables(fp8))
    assert ("'tp2-fp8' (tp 4 → 2; weights bf16 → fp8; KV cache bf16 → fp8; a lower-precision"
            " format can change the answers: check their quality before switching)") in lever.text
    assert "lower_precision" in lever.source
    [*_, lever] = headline_facts(_tables(fp8.with_columns(lower_precision=pl.lit(False))))
    assert "lower-precision" not in lever.text and "lower_precision" not in lever.source


def test_a_fleet_line_says_how_full_its_busy_gpus_are():
    """"idle 0.3%" read as "the GPUs are full" for the demo's conv trace, which ran batches of
    9.6 of the 256 sequences a step may hold with its KV cache 3% full at most."""
    [line] = summary_lines(_summary(0.0123, 0.0456))
    assert "(idle 50.0% = $0.50; mean batch 9.6 of max 256, peak KV use 3.18%)" in line
    # the `all` row over deployments of different limits has none to compare with
    [line] = summary_lines(_summary(0.0123, 0.0456).with_columns(max_seqs=pl.lit(None, pl.Int64)))
    assert "mean batch 9.6 (max_seqs differs by deployment), peak KV use 3.18%)" in line


def test_a_markdown_cell_keeps_its_row_whole():
    """calibration.implausible holds one reason per line and a rejected row's raw text can hold
    a |: in the UI's previews (and report.md) a line break ended the table row and a | split the
    cell, so the row lost its columns."""
    frame = pl.DataFrame({"trace": ["t"], "implausible": ["faster than it can be\nfactor at its bound"],
                          "raw": ["2023-11-16 18:17:04,12|3,8"]})
    table = markdown_table(frame, {c: c for c in frame.columns})
    assert table.splitlines()[2:] == [
        r"| t | faster than it can be; factor at its bound | 2023-11-16 18:17:04,12\|3,8 |"]


def test_the_report_says_the_price_its_dollars_are_at():
    """A deployments.csv row without a price plan takes its GPU's default price (a reserved one,
    say); the report named the deployment but not the price every dollar of it is at."""
    blocks = report_blocks(_report_tables(_what_if(-8.0, 0.0)), "my-fleet",
                           prices=[("my-fleet", "mycloud", "reserved-1y", 1.85)])
    assert ("p", "Deployment replayed: `my-fleet` (the `roofline` table holds its coefficients),"
                 " priced at $1.85 per GPU-hour, mycloud reserved-1y (`deployment_prices`).") in blocks
    plain = report_blocks(_report_tables(_what_if(-8.0, 0.0)), "my-fleet")
    assert ("p", "Deployment replayed: `my-fleet` (the `roofline` table holds its"
                 " coefficients).") in plain


def test_a_fleet_of_several_deployments_names_each_with_its_traces_and_price():
    """Logs whose sidecars name their own deployments: one sentence said "Deployment replayed:
    `a, b`" and listed the prices without the traces they price."""
    blocks = report_blocks(_report_tables(_what_if(-8.0, 0.0)), "big, small", prices=[
        ("big", "coreweave", "on-demand", 6.155, "chat, code", 2),
        ("small", "runpod", "on-demand", 1.39, "batch", 1)])
    assert ("p", "Deployments replayed, each trace on its own (the one its log's sidecar names,"
                 " else the run's; the `roofline` table holds their coefficients): `big` (traces"
                 " chat, code) at $6.155 per GPU-hour, coreweave on-demand; `small` (trace batch) at"
                 " $1.39 per GPU-hour, runpod on-demand (`deployment_prices`).") in blocks


def test_a_deployments_traces_are_counted_not_guessed_from_a_comma_in_their_names():
    """_traces_of said "traces" wherever the joined names held ", ": one log named
    "chat, eu.csv" read as two traces."""
    sentence = deployment_sentence("big, small", [
        ("big", "coreweave", "on-demand", 6.155, "chat, eu", 1),
        ("small", "runpod", "on-demand", 1.39, "batch, a, batch, b", 2)])
    assert "`big` (trace chat, eu) at" in sentence
    assert "`small` (traces batch, a, batch, b) at" in sentence


def _deployments(*names: str) -> pl.DataFrame:
    """deployment_summary rows: `big` of two traces, `small` of one."""
    rows = {"big": (2, ["chat", "code"], 1_234, 36.04, 221.83, 0.41, 90.95, 18.42),
            "small": (1, ["batch"], 1, 0.0137, 0.0846, 0.5, 0.0423, 0.0083)}
    columns = ("traces", "trace_names", "requests", "gpu_hours", "spend_usd", "idle_share",
               "idle_usd", "usd_per_1m_output_tokens")
    return pl.DataFrame([{"deployment": n, **dict(zip(columns, rows[n]))} for n in names])


def test_a_fleet_of_several_deployments_gets_a_line_per_deployment_before_the_trace_lines():
    """Two deployments: the Fleet lines gave each trace and the whole, and what each deployment
    costs was left to add up by hand (or to sql/examples/deployment_bill.sql)."""
    tables = dataclasses.replace(_report_tables(_what_if(-8.0, 0.0)),
                                 deployment_summary=_deployments("big", "small"))
    [fleet] = [b[1] for b in report_blocks(tables, "big, small")
               if b[0] == "ul" and any("**all**" in item for item in b[1])]
    assert fleet[:2] == [
        "**deployment `big`** (traces chat, code): 1,234 requests; 36.0 GPU-hours = $221.83"
        " (idle 41.0% = $90.95); $18.42 per 1M output tokens (busy + idle)",
        "**deployment `small`** (trace batch): 1 request; 0.0137 GPU-hours = $0.0846"
        " (idle 50.0% = $0.0423); $0.0083 per 1M output tokens (busy + idle)"]
    assert fleet[2:] == summary_lines(tables.fleet_summary)


def test_a_fleet_of_one_deployment_gets_no_deployment_line():
    """Its line would be the `all` line again: the demo's report and summary are as they were."""
    tables = dataclasses.replace(_report_tables(_what_if(-8.0, 0.0)),
                                 deployment_summary=_deployments("big"))
    lists = [b[1] for b in report_blocks(tables, "big") if b[0] == "ul"]
    assert summary_lines(tables.fleet_summary) in lists
    assert not any("deployment `big`" in item for items in lists for item in items)


def test_the_skipped_scenarios_intro_holds_on_a_fleet_of_several_deployments():
    """Four logs on four deployments, 'b200' skipped for one of them: the list read "Not
    replayed, as they cannot apply to this deployment" under a report of four deployments."""
    skipped = _what_if(-8.0, 0.0).with_columns(
        skipped=pl.lit("scenario 'b200' does not apply to deployment 'small': ..."),
        delta_usd_per_day=pl.lit(None, pl.Float64))
    blocks = report_blocks(_report_tables(skipped), "big, small", prices=[
        ("big", "coreweave", "on-demand", 6.155, "chat", 1),
        ("small", "runpod", "on-demand", 1.39, "batch", 1)])
    assert ("p", "Not replayed, as each cannot apply to a deployment the traces were replayed on"
                 " (`what_if.skipped`):") in blocks


def test_a_share_that_is_not_all_or_nothing_never_reads_100_or_0_percent():
    """Ten requests of a week-long log on one A10: $0.00268 of the $216.72 the fleet cost was
    busy, and the headline read "idle GPUs are 100%" (the fleet line "idle 100.0%") beside the
    prefill and decode dollars it splits; a share that is exactly 100 or 0 still reads so."""
    tables = _tables(_what_if(-8.0, 0.0))
    week = dataclasses.replace(tables, fleet_summary=tables.fleet_summary.with_columns(
        idle_share=pl.lit(1 - 0.00268 / 216.72), idle_usd=pl.lit(100 * (1 - 0.00268 / 216.72))))
    assert "idle GPUs are 99.999% of the $100.00 the fleet cost" in headline(week)
    [line] = summary_lines(_summary(0.0123, 0.0456).with_columns(idle_share=pl.lit(1 - 0.00268 / 216.72)))
    assert "(idle 99.999% = $0.50;" in line
    stages = pl.DataFrame({"shape": ["all"] * 2, "stage": ["prefill", "decode"], "pct_spend": [0.3, 99.7]})
    assert headline(dataclasses.replace(tables, stage_breakdown=stages)).startswith(
        "Decode owns 99.7% of attributed GPU spend;")
    assert headline(tables).startswith("Decode owns 80% of attributed GPU spend; all 2 request"
                                       " shapes are 100% of it, led by 'long prompt / one-line"
                                       " answer' (60%,")


def test_the_headlines_idle_share_is_of_the_dollars_it_names():
    """"idle GPUs are 45% of the $76.70 the fleet cost" on a fleet of three deployments at
    $6.00-6.305 per GPU-hour: 45% was fleet_summary.idle_share, a share of GPU time, while the
    idle dollars were $35.04 of the $76.70, 46%. Where the idle GPUs are the dearer ones (8 x
    H200 idling beside busy A100s) the two part further: 48% of the GPU time, 59% of the dollars.
    The sentence says a share of dollars, so it takes idle_usd / spend_usd."""
    tables = _tables(_what_if(-8.0, 0.0))

    def said(idle_share, idle_usd, spend_usd):
        fleet = tables.fleet_summary.with_columns(idle_share=pl.lit(idle_share),
                                                  idle_usd=pl.lit(idle_usd),
                                                  spend_usd=pl.lit(spend_usd))
        return headline(dataclasses.replace(tables, fleet_summary=fleet))

    assert "idle GPUs are 46% of the $76.70 the fleet cost" in said(0.4521, 35.04, 76.70)
    assert "idle GPUs are 59% of the $58.70 the fleet cost" in said(0.479, 34.83, 58.70)
    [*_, fact, _] = headline_facts(tables)
    assert fact.source == "fleet_summary: trace = 'all', idle_usd, spend_usd"


def _capped(delta_usd: float) -> pl.DataFrame:
    """An output cap's all-shapes row: it cuts 1,234 of 28,185 answers short."""
    return _what_if(delta_usd, 0.0, scenario="output-cap-256").with_columns(
        change=pl.lit("outputs capped at 256 tokens"), truncated_requests=pl.lit(1_234, pl.Int64),
        truncated_output_pct=pl.lit(41.234))


def _what_if_rows(blocks: list[tuple]) -> list[list[str]]:
    [(_, frame, columns)] = [b for b in blocks if b[0] == "table" and b[2] is WHAT_IF_COLUMNS]
    return table_rows(frame, columns)


def test_a_scenario_that_cuts_answers_short_says_so_in_its_what_if_row():
    """The demo's output-cap-256 cuts 6,614 of 28,185 answers short (25.9% of the output tokens)
    for -2.05% of busy dollars: per output token its busy cost rises 32%. Only the headline said
    it, where it names that lever; the report's and the summary's tables showed a plain -2.05
    beside the levers that serve the same answers. Its row says it, in the "what changes" cell
    (the summary's table has none: in its scenario cell); every other row reads as it did."""
    what_if = pl.concat([_what_if(-8.0, 0.0, scenario="fp8"), _capped(-4.0)])
    plain, _ = what_if_scenarios(what_if)
    before = table_rows(with_baseline_row(plain), WHAT_IF_COLUMNS)
    rows = _what_if_rows(report_blocks(_report_tables(what_if), "d"))
    said = "cuts 1,234 of 28,185 answers short, 41.23% of all output tokens"
    assert [row[0] for row in rows] == ["baseline", "fp8", "output-cap-256"]
    assert rows[2][1] == f"outputs capped at 256 tokens; {said}"
    assert rows[2][2:] == before[2][2:] and rows[:2] == before[:2]
    terminal = table_rows(what_if_table(plain, WHAT_IFS_SHOWN), WHAT_IFS_SHOWN)
    assert terminal[2][0] == f"output-cap-256; {said}"
    assert terminal[:2] == table_rows(with_baseline_row(plain), WHAT_IFS_SHOWN)[:2]
    # the headline's words are the row's
    [*_, lever] = headline_facts(_tables(_capped(-8.0)))
    assert f"(outputs capped at 256 tokens; it {said})" in lever.text


def _shape(what_if: pl.DataFrame, rank: int, shape: str, delta_pct: float) -> pl.DataFrame:
    """A shape row of `what_if`'s scenario, its Δ spend % as given."""
    return what_if.with_columns(rank=pl.lit(rank, pl.Int64), shape=pl.lit(shape), delta_pct=pl.lit(delta_pct))


def test_a_shape_whose_delta_goes_against_its_scenarios_is_explained_under_the_table():
    """On the demo's conv trace (busy 99.7% of the time), fp8 cuts busy GPU-seconds 0.26% while
    shape #1 costs 2.36% more and 44% of the requests cost more: each step's GPU time is split
    among the requests in it, and faster steps are shared by fewer. The report pointed readers
    to per-shape deltas with no word of it; one sentence under the table names the first such
    shape (in the table's order, then by rank) with its figures, and none is said where every
    shape goes the scenario's way."""
    fp8, cap = _what_if(-8.0, 0.0, scenario="fp8"), _capped(-4.0)
    what_if = pl.concat([fp8, _shape(fp8, 1, "long prompt / one-line answer", -12.0),
                         _shape(fp8, 2, "short prompt / long answer", 0.0),
                         cap, _shape(cap, 2, "short prompt / long answer", 28.374),
                         _shape(cap, 1, "long prompt / one-line answer", 3.5)])
    blocks = report_blocks(_report_tables(what_if), "d")
    table = next(i for i, b in enumerate(blocks) if b[0] == "table" and b[2] is WHAT_IF_COLUMNS)
    assert blocks[table + 1] == ("p", (
        "A shape's Δ spend % in the `what_if` table can have the opposite sign to its"
        " scenario's: under `output-cap-256`, shape #1 'long prompt / one-line answer' changes"
        " by +3.50% while all shapes change by -4.00%, because each step's GPU time is split"
        " among the requests in it, and a lever that changes how long steps take also changes"
        " how many requests share each one; the lever's effect is the `all` row and Δ fleet"
        " $/day."))
    assert shape_sign_note(what_if) == blocks[table + 1][1]
    along = what_if.filter(pl.col("scenario") == "fp8")
    assert shape_sign_note(along) is None
    assert not any("opposite sign" in b[1] for b in report_blocks(_report_tables(along), "d")
                   if b[0] == "p")
