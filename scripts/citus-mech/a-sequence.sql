-- (a3b) Getting deliveries_sequence_number_seq onto the workers: as a column default Citus
-- propagates the sequence, each node with its own range (bigint: the node's group id << 48).
ALTER TABLE deliveries ALTER COLUMN sequence_number SET DEFAULT nextval('deliveries_sequence_number_seq');
SELECT * FROM run_command_on_workers($$SELECT to_regclass('deliveries_sequence_number_seq')::text || ' start ' || (SELECT seqstart FROM pg_sequence WHERE seqrelid = 'deliveries_sequence_number_seq'::regclass)$$);
SELECT groupid, nodeport FROM pg_dist_node ORDER BY groupid;
