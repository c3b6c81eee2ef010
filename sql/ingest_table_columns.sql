-- The columns of one table, in order (none when it does not exist). $1: the table name.
SELECT column_name FROM information_schema.columns WHERE table_name = $1 ORDER BY ordinal_position;
