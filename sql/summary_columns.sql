-- Every column of every table in the warehouse's own database and schema, as (table, column):
-- the summary checks the tables and columns it reads against these before it reads any, so a
-- warehouse an older release built is named for what it lacks.
SELECT table_name, column_name
FROM information_schema.columns
WHERE table_catalog = current_database() AND table_schema = current_schema();
