-- The fleet per trace and minute (fleet_timeline's per-replica bins rolled up), baseline:
-- utilization = busy share of the fleet's GPU time; sequences and queued = mean number running /
-- waiting over the whole fleet; kv_use = mean share of KV capacity holding tokens per replica;
-- spend_usd = busy + idle GPU-seconds priced; arrivals = replayed requests (request_stages: not
-- unserved_requests) that arrived in the row's bins.
-- A row holds the bins that start in its minute: with a timeline_bin_s over 60 s a row spans a
-- whole bin (minute_s 0, 300, ... for 300-s bins), so an arrival is counted in the row of its
-- bin (bin width = the second bin's start), never in a minute that has no row.
CREATE OR REPLACE TABLE fleet_timeline_minute AS
WITH minutes AS (
    SELECT
        t.trace,
        t.scenario,
        floor(t.bin_start_s / 60) * 60 AS minute_s,
        count(DISTINCT t.replica) AS replicas,
        sum(t.bin_s) AS replica_s,
        sum(t.busy_share * t.bin_s) AS busy_s,
        sum(t.mean_batch * t.bin_s) AS sequence_s,
        sum(t.mean_kv_use * t.bin_s) AS kv_s,
        sum(t.mean_queue * t.bin_s) AS queued_s,
        sum(t.busy_gpu_s) AS busy_gpu_s,
        sum(t.idle_gpu_s) AS idle_gpu_s,
        sum((t.busy_gpu_s + t.idle_gpu_s) * dp.usd_per_gpu_hour / 3600) AS spend_usd
    FROM fleet_timeline AS t
    JOIN deployment_prices AS dp USING (deployment)
    WHERE t.scenario = 'baseline'
    GROUP BY ALL
),
widths AS (
    SELECT trace, scenario, min(bin_start_s) FILTER (WHERE bin_start_s > 0) AS bin_width_s
    FROM fleet_timeline
    WHERE scenario = 'baseline'
    GROUP BY ALL
),
arrivals AS (
    SELECT
        s.trace,
        s.scenario,
        floor(coalesce(floor(s.arrival_s / w.bin_width_s) * w.bin_width_s, 0) / 60) * 60 AS minute_s,
        count(*) AS arrivals
    FROM request_stages AS s
    JOIN widths AS w USING (trace, scenario)
    WHERE s.scenario = 'baseline'
    GROUP BY ALL
)
SELECT
    m.trace,
    m.scenario,
    m.minute_s,
    m.replicas,
    coalesce(a.arrivals, 0) AS arrivals,
    m.busy_s / m.replica_s AS utilization,
    m.sequence_s * m.replicas / m.replica_s AS sequences,
    m.kv_s / m.replica_s AS kv_use,
    m.queued_s * m.replicas / m.replica_s AS queued,
    m.busy_gpu_s,
    m.idle_gpu_s,
    m.spend_usd
FROM minutes AS m
LEFT JOIN arrivals AS a USING (trace, scenario, minute_s)
ORDER BY m.trace, m.minute_s;
