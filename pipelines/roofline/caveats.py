"""Classes of deployment whose costs the physics is known to get wrong by more than a third,
said next to the numbers they qualify.

The validation table (bench/validation/published_measurements.csv, docs/physics.md §5) shows
where the default factors miss published measurements by more than 35%. Most of those misses
fall into a few classes of deployment; a user costing such a fleet should read the warning where
the cost is reported (the `caveat` of the `roofline` and `scenario_fleets` tables, the report),
not only in the docs. tests/roofline/test_validation.py ties each caveat to its evidence: every
row beyond 35% falls under a caveat or is one of the single rows docs/physics.md §5 explains,
and each caveat has a row only it covers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipelines.roofline.deployment import Deployment


@dataclass(frozen=True)
class Caveat:
    """A class of deployment (`applies`) and its warning: one text, or one per deployment where
    the words must name what the deployment runs on."""

    name: str
    applies: Callable[[Deployment], bool]
    text: str | Callable[[Deployment], str]

    def says(self, d: Deployment) -> str:
        return self.text(d) if callable(self.text) else self.text


def _mla_moe(d: Deployment) -> bool:
    return d.model.attention == "MLA" and d.model.experts > 1


MEASURED_CDNA3 = "mi300x"   # the only CDNA3 GPU of the validation's runs


def _cdna3_decode(d: Deployment) -> str:
    """The cdna3 caveat in the words of `d`'s GPU: its figures are MI300X runs, so on another
    CDNA3 GPU (a user's MI325X) it names that GPU and says they are MI300X's, whose estimated
    family factors it is costed with; "MI300X decode" there claimed a measurement of the wrong
    GPU."""
    if d.gpu.gpu.casefold() == MEASURED_CDNA3:
        subject, runs = "MI300X decode", "runs"
    else:
        subject = (f"{d.gpu.gpu} decode (a CDNA3 GPU, costed with the cdna3 factors estimated on"
                   f" MI300X; no measurement of {d.gpu.gpu} is checked)")
        runs = "runs on MI300X"
    return (f"{subject}: against AMD's and Oracle's vLLM {runs} the modelled step is up to 23%"
            f" too slow at batch 1 and up to 36% too fast at batch 128, and max-load throughput"
            f" up to 35% too high (the cdna3 factors are estimates, docs/physics.md sections 4"
            f" and 5); calibrate on your own logs.")


CAVEATS = (
    Caveat(
        "mla-moe",
        _mla_moe,
        "MLA with fine-grained MoE (DeepSeek-V3 class): the modelled time per output token"
        " depends on the serving stack more than for any other model. Against InferenceX's"
        " tensor-parallel runs of late 2025 to March 2026 (SGLang 0.5.6-0.5.9, TensorRT-LLM, 8 x"
        " H200 or 4-8 x B200) it is between 28% too short and 26% too long (median 3% too long);"
        " on 8 x MI300X (SGLang 0.5.9) a measured step takes 1.7-2.7 x the modelled one, and on"
        " the stacks of early 2025 (vLLM 0.7, SGLang 0.4) 1.8-4.4 x, with throughput 2.3-4.5 x"
        " below the modelled. Its time to first token is too short on every one of these stacks:"
        " InferenceX's median TTFT at 4 clients is 1.7-4.0 x the modelled (65-134 ms more at"
        " 1k-token prompts), a per-request cost the step model has no term for, so TTFT and queue"
        " figures here are optimistic. GPU time and dollars here are uncertain by that much;"
        " calibrate on your own logs (docs/physics.md sections 5 and 6).",
    ),
    Caveat(
        "high-tp-heavy-decode",
        # MLA + MoE and MI300X deployments carry their own caveat, whose figures include their
        # large-batch tensor-parallel misses.
        lambda d: d.tp >= 4 and d.gpu.family != "cdna3" and not _mla_moe(d),
        "Tensor parallelism 4-8 under heavy decode load: against NVIDIA's TensorRT-LLM max-load"
        " tables (v0.12 to v0.20 and later, Llama 70B and 405B on A100, L40S, H100, H200 and"
        " B200) the modelled throughput of shapes whose outputs are at least as long as their"
        " prompts (hundreds to thousands of sequences per step) is a median 8% and up to 84%"
        " too high (21% on the TensorRT-engine editions v0.12-v0.17, A100 and L40S; 3% on the"
        " PyTorch-backend ones, whose CUDA-graph padding is modelled), while shorter outputs are"
        " a median 4% off and the latency rows at small"
        " batches a median 6%. Per-GPU throughput falls faster with tp than the modelled"
        " all-reduce and GEMMs explain (both match measurements at these sizes: nccl-tests, and"
        " Vidur's per-shard GEMM profiles). GPU time"
        " and dollars of a busy high-tp fleet may be underestimated by that much"
        " (docs/physics.md section 5).",
    ),
    Caveat(
        "cdna3-decode",
        lambda d: d.gpu.family == "cdna3",
        _cdna3_decode,
    ),
)


def caveats(d: Deployment) -> list[str]:
    """The caveats that apply to deployment `d`, in CAVEATS order."""
    return [c.says(d) for c in CAVEATS if c.applies(d)]


def caveat_column(d: Deployment) -> str:
    """The `caveat` cell of a table row about `d` (roofline, scenario_fleets): its caveats one
    per line (sql/report_caveats.sql splits them to say each once), empty when none applies."""
    return "\n".join(caveats(d))
