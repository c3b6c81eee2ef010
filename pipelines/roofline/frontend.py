"""What a measurement taken at the client adds to the engine's time to first token: the front end.

A client-side TTFT (genai-perf, benchmark_serving, a user's log) starts when the request leaves
the client and ends when the first token arrives, so besides queueing and prefill it holds the
serving front end's own work: receiving the HTTP request, applying the chat template and
tokenizing the prompt, and detokenizing and streaming the first token back. An engine-side
measurement (trtllm-bench, vLLM's offline latency benchmark, SplitwiseSim's profiler) starts at
the engine's queue and holds none of it. The validation table says which one each row is
(`measured_at`), and client rows get this term on top of the engine's TTFT:

    FRONTEND_S = TOKENIZE_S + HTTP_S

- TOKENIZE_S = 1.56 ms: chat template + tokenizer encode of a chat request measured in a C++
  serving front end, 2.82 / 1.72 / 1.40 / 1.32 ms for four successive 131-token requests (median
  of the four), tenstorrent/tt-inference-server#2173
  (https://github.com/tenstorrent/tt-inference-server/issues/2173). The source notes that the
  cost per token is highest at short inputs (a fixed cost dominates), so it is taken per
  request, not per token.
- HTTP_S = 75 us: send/receive of one HTTP inference request to a local Triton server, as
  Triton's perf_analyzer reports it ("Avg HTTP time: ... send/recv 75 usec"),
  triton-inference-server/server#3386 (https://github.com/triton-inference-server/server/issues/3386).
  Detokenizing one token is microseconds and is left out.

Client network distance is not part of it: it is the deployment's `Network.one_way_s`.
"""

from __future__ import annotations

TOKENIZE_S = 1.56e-3
HTTP_S = 75e-6
FRONTEND_S = TOKENIZE_S + HTTP_S
