-- Per calibrated trace (the calibration asset, on demand): the deployment it was fitted on, why
-- that deployment cannot have served the log (null for a plausible fit), the observations far
-- off the fitted prediction (null for none), each factor before ->
-- after, and per observed metric the held-out half's median per-request error before -> after
-- beside the shape-median baseline (what a lookup table of the log itself achieves), and whether
-- the fit used that metric. No rows
-- before calibration first runs: the summary then says nothing of it.
WITH fits AS (
    SELECT trace, deployment, any_value(implausible) AS implausible, any_value(outliers) AS outliers,
           list({'parameter': parameter, 'before': before, 'after': after} ORDER BY parameter)
               AS factors
    FROM calibration
    GROUP BY trace, deployment
), held_out AS (
    SELECT trace,
           list({'metric': metric, 'observations': observations, 'before': error_before,
                 'after': error_after, 'baseline': error_baseline, 'fitted': fitted}
                ORDER BY metric DESC) AS errors
    FROM calibration_errors
    WHERE shape = 'all' AND split = 'held_out'
    GROUP BY trace
)
SELECT f.trace, f.deployment, f.implausible, f.outliers, f.factors, h.errors
FROM fits AS f
LEFT JOIN held_out AS h USING (trace)
ORDER BY f.trace;
