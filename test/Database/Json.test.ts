/**
 * The two renderings of wire JSON in SQL (src/Database/Json.ts; O11, issue 43
 * item 3): the inlined `to_char` and `row_to_json` that bulk reads use, and
 * the IMMUTABLE `parley_iso` and `parley_row_json` (migration
 * `0030_immutable_json`) that a RETURNING list needs on Citus. They must
 * render the same text under any session setting, or a message would read
 * differently when it is returned by its POST and by a later GET.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import {
  immutableIsoTimestamp,
  immutableObjectJson,
  immutableRendering,
  isoTimestamp,
  type Members,
  objectJson,
  sessionJson
} from "../../src/Database/Json.ts"
import { FileDatabase, fileDatabaseClient } from "../support/Database.ts"

/** Moments around the edges of the format: microseconds, leap day, year 1 and 9999, null. */
const moments = [
  "2026-11-29 09:10:11.123456+00",
  "2024-02-29 23:59:59.999999-05",
  "2000-01-01 00:00:00+14",
  "0001-01-01 00:00:00+00",
  "9999-12-31 23:59:59.5+00",
  null
]

/** Members of several kinds: text needing escapes, numbers, booleans, json, null, a timestamp. */
const members = (timestamp: (expression: string) => string): Members => [
  ["id", "'01234567-89ab-7def-8123-456789abcdef'::uuid"],
  ["text", `'quote " backslash \\ tab \t é ☃'::text`],
  ["count", "42"],
  ["ratio", "0.25::float8"],
  ["flag", "true"],
  ["object", `'{"b":1,"a":[1,2]}'::json`],
  ["missing", "null::text"],
  ["at", timestamp("'2026-11-29 09:10:11.000001+00'::timestamptz")]
]

describe("wire JSON renderings (src/Database/Json.ts, O11)", () => {
  // One connection: the settings the first test makes are the session's.
  it.layer(fileDatabaseClient(1).pipe(Layer.provide(FileDatabase)), { timeout: 60_000 })((it) => {
    it.effect("parley_iso renders what the inlined to_char renders, under any TimeZone and DateStyle", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        for (const settings of [
          ["UTC", "ISO, MDY"],
          ["America/New_York", "SQL, DMY"],
          ["Asia/Kathmandu", "German"]
        ] as const) {
          yield* sql`SELECT set_config('TimeZone', ${settings[0]}, false), set_config('DateStyle', ${settings[1]}, false)`
          for (const moment of moments) {
            const [row] = yield* sql<{ inline: string | null; immutable: string | null }>`SELECT
              ${sql.literal(isoTimestamp("m"))} AS inline, ${sql.literal(immutableIsoTimestamp("m"))} AS immutable
              FROM (SELECT ${moment}::timestamptz AS m) t`
            assert.strictEqual(row!.immutable, row!.inline, `${moment} under ${settings.join(" / ")}`)
            if (moment !== null) assert.match(row!.immutable!, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/)
          }
        }
        yield* sql`RESET TimeZone`
        yield* sql`RESET DateStyle`
      })
    )

    it.effect("parley_row_json renders an object as row_to_json does, members in order, compact", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const [row] = yield* sql<{ inline: string; immutable: string }>`SELECT
          ${sql.literal(objectJson(members(isoTimestamp)))}::text AS inline,
          ${sql.literal(immutableObjectJson(members(immutableIsoTimestamp)))}::text AS immutable`
        assert.strictEqual(row!.immutable, row!.inline)
        assert.deepStrictEqual(
          Object.keys(JSON.parse(row!.immutable)),
          members(isoTimestamp).map(([name]) => name)
        )
        assert.strictEqual(JSON.parse(row!.immutable).text, 'quote " backslash \\ tab \t é ☃')
      })
    )

    it.effect("a session with its agent renders alike by both renderings (the session events' form, W1)", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        for (const type of ["ai", "human", null]) {
          const [row] = yield* sql<{ inline: string; immutable: string }>`SELECT
            ${sql.literal(sessionJson("s", "a", "'expired'::text"))}::text AS inline,
            ${sql.literal(sessionJson("s", "a", "'expired'::text", immutableRendering))}::text AS immutable
            FROM (SELECT '01234567-89ab-7def-8123-456789abcdef'::uuid AS id, 'c"1' AS contact_id,
              '01234567-89ab-7def-8123-456789abcde0'::uuid AS organization_id,
              '01234567-89ab-7def-8123-456789abcde1'::uuid AS conversation_id, NULL::uuid AS thread_id,
              'closed' AS status, '{"k":[1,"é"]}'::json AS metadata, NULL::text AS ending_survey_submission_id,
              '2024-02-29 23:59:59.999999-05'::timestamptz AS created_at, NULL::timestamptz AS updated_at) s
            LEFT JOIN (SELECT '01234567-89ab-7def-8123-456789abcde2'::uuid AS id, 'Ada' AS name, ${type}::text AS type,
              NULL::uuid AS assistant_id, 'p1' AS profile_id, '01234567-89ab-7def-8123-456789abcde0'::uuid AS organization_id,
              '2000-01-01 00:00:00+14'::timestamptz AS created_at) a ON a.type IS NOT NULL`
          assert.strictEqual(row!.immutable, row!.inline, `agent ${type}`)
          assert.strictEqual(JSON.parse(row!.immutable).action, "expired")
        }
      })
    )

    it.effect("both functions are IMMUTABLE, which is what lets Citus accept them in RETURNING", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const rows = yield* sql<{ proname: string; provolatile: string }>`
          SELECT proname, provolatile FROM pg_proc WHERE proname IN ('parley_iso', 'parley_row_json') ORDER BY proname`
        assert.deepStrictEqual(
          rows.map((row) => [row.proname, row.provolatile]),
          [
            ["parley_iso", "i"],
            ["parley_row_json", "i"]
          ]
        )
      })
    )
  })
})
