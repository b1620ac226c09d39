/**
 * The fan-out's sequence on every node (DECISIONS.md O11, issue 43 item 4).
 *
 * On Citus the fan-out trigger (`parley_fan_out`) runs on the node that holds
 * the event's shard and takes `nextval('deliveries_sequence_number_seq')`
 * there for an ordered delivery (W7). Citus creates a sequence on every node
 * only when a distributed table's column default uses it (each node's copy
 * then counts in a range of its own: 2^48 x the node's group), so
 * `deliveries.sequence_number` gets it as its default. Nothing else changes:
 * the fan-out always writes the column itself (null for an unordered
 * delivery), so the default is never taken on one server. A queue's rows are
 * one organization's, on one node, so its numbers keep rising there.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE deliveries ALTER COLUMN sequence_number SET DEFAULT nextval('deliveries_sequence_number_seq')`
})
