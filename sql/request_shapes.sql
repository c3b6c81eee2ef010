-- Every baseline request's shape: its prompt bucket x output bucket (edges in shape_buckets).
CREATE OR REPLACE VIEW request_shapes AS
SELECT
    c.*,
    pb.label AS prompt_bucket,
    ob.label AS output_bucket,
    pb.lower AS prompt_lower,
    ob.lower AS output_lower,
    pb.label || ' / ' || ob.label AS shape
FROM request_costs AS c
JOIN shape_buckets AS pb
  ON pb.dimension = 'prompt' AND c.prompt_tokens >= pb.lower
 AND (pb.upper IS NULL OR c.prompt_tokens < pb.upper)
JOIN shape_buckets AS ob
  ON ob.dimension = 'output' AND c.output_tokens >= ob.lower
 AND (ob.upper IS NULL OR c.output_tokens < ob.upper)
WHERE c.scenario = 'baseline';
