/**
 * Wire JSON a Citus router statement may return (DECISIONS.md O11, issue 43
 * item 3). Citus refuses a modification on a distributed table whose
 * RETURNING calls a function that is not IMMUTABLE ("non-IMMUTABLE functions
 * are not allowed in the RETURNING clause"), and `to_char` and `row_to_json`,
 * with which Parley renders its wire JSON in SQL (`src/Database/Json.ts`),
 * are STABLE: their output depends on settings (`TimeZone`, `DateStyle`,
 * `lc_time`). Parley never depends on those settings:
 *
 * - `parley_iso(timestamptz)` formats a moment in UTC with numeric fields
 *   only (`YYYY-MM-DD"T"HH24:MI:SS.US"Z"`): the same text under any setting;
 * - `parley_row_json(anyelement)` renders a row whose members are text,
 *   numbers, booleans, uuids and json (timestamps already through
 *   `parley_iso`): the same text under any setting.
 *
 * So both are declared IMMUTABLE, which is what they are for those inputs;
 * on one server nothing else changes (same text, same plans). On a cluster
 * the functions are created on every node (`Citus.distribute`).
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE FUNCTION parley_iso(moment timestamptz) RETURNS text
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
    AS $$BEGIN RETURN to_char(moment AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'); END$$`
  yield* sql`CREATE FUNCTION parley_row_json(member_row anyelement) RETURNS json
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
    AS $$BEGIN RETURN row_to_json(member_row); END$$`
})
