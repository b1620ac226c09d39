/**
 * A Citus-ready schema (DECISIONS.md O11, issue 43 item 1;
 * migrations/0027_organization_keys.ts). A database as the release before
 * left it (every migration through 0026), with rows of two organizations in
 * every table, is migrated: every row is kept, the tables that had no
 * `organization_id` get their parent's, and the catalog shows every
 * per-organization table keyed by `organization_id` first (primary key and
 * unique keys), every foreign key between such tables carrying it, and the
 * reference tables (`organizations`, `api_keys`, `parley_migrations`) as the
 * only tables keyed otherwise. The triggers that write the changed tables go
 * on working after it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import * as Database from "../../src/Database/Database.ts"
import { emptyDatabase } from "../support/Database.ts"

/** Tables of no organization (O11): they keep their keys. */
const REFERENCE_TABLES = ["api_keys", "organizations", "parley_migrations"]

/** The tables 0027 adds `organization_id` to, with the parent it is taken from (`parent.id = child.column`). */
const FILLED: ReadonlyArray<readonly [table: string, parent: string, column: string]> = [
  ["assistant_files", "assistants", "assistant_id"],
  ["assistant_commits", "assistants", "assistant_id"],
  ["assistant_commit_files", "assistants", "assistant_id"],
  ["assistant_branches", "assistants", "assistant_id"],
  ["assistant_draft_files", "assistant_branches", "branch_id"],
  ["assistant_rollouts", "assistants", "assistant_id"],
  ["session_assignments", "sessions", "session_id"]
]

/** Rows of one organization in every table of the 0026 schema, as the services would have written them. */
const populate = (name: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const id = () => crypto.randomUUID()
    const org = id()
    const [agent, conversation, session, closed, assistant, branch, feature, app, event, message] = Array.from(
      { length: 10 },
      id
    )
    const run = id()
    const evaluation = id()
    yield* sql`INSERT INTO organizations (id, name, created_at) VALUES (${org}, ${name}, now())`
    yield* sql`INSERT INTO api_keys (id, organization_id, name, token_hash, token_last4, created_at)
      VALUES (${id()}, ${org}, 'key', decode(md5(${org}), 'hex'), 'abcd', now())`
    yield* sql`INSERT INTO assistants (id, organization_id, name, versioned, created_at)
      VALUES (${assistant}, ${org}, 'Bot', true, now())`
    yield* sql`INSERT INTO agents (id, organization_id, name, type, assistant_id, created_at)
      VALUES (${agent}, ${org}, 'AI', 'ai', ${assistant}, now())`
    yield* sql`INSERT INTO organization_settings (organization_id, default_agent_id, rate_limit_per_second)
      VALUES (${org}, ${agent}, 10)`
    yield* sql`INSERT INTO contacts (organization_id, contact_id, name, created_at) VALUES (${org}, '+1555', 'Ann', now())`
    yield* sql`INSERT INTO conversations (id, organization_id, contact_id, channel_type, channel_to, created_at)
      VALUES (${conversation}, ${org}, '+1555', 'whatsapp', '+1666', now())`
    yield* sql`INSERT INTO apps (id, organization_id, name, webhook_url, events, signing_secret, created_at)
      VALUES (${app}, ${org}, 'hook', 'https://example.com/hook', ARRAY['message.created'], 'whsec_x', now())`
    yield* sql`INSERT INTO sessions (id, organization_id, conversation_id, contact_id, status, agent_id, created_at)
      VALUES (${session}, ${org}, ${conversation}, '+1555', 'open', ${agent}, now()),
        (${closed}, ${org}, ${conversation}, '+1555', 'closed', NULL, now() - interval '1 day')`
    yield* sql`INSERT INTO messages (id, organization_id, session_id, conversation_id, role, content, provider_message_id,
        created_at)
      VALUES (${message}, ${org}, ${session}, ${conversation}, 'user', '{"type":"text","text":"Hi"}', 'wamid.1', now())`
    // The fan-out makes the app's delivery of the event.
    yield* sql`INSERT INTO events (id, organization_id, type, body, created_at, conversation_id)
      VALUES (${event}, ${org}, 'message.created', '{}', now(), ${conversation})`
    yield* sql`INSERT INTO ingest_receipts (organization_id, conversation_id, provider_message_id, message_id, session_id,
        created_at)
      VALUES (${org}, ${conversation}, 'wamid.1', ${message}, ${session}, now())`
    yield* sql`INSERT INTO export_cursors (organization_id, kind, record_id, sort_key, created_at)
      VALUES (${org}, 'messages', ${message}, now(), now())`
    yield* sql`INSERT INTO idempotency_keys (organization_id, key, fingerprint, status, content_type, body, expires_at)
      VALUES (${org}, 'k1', '\\x00', 201, 'application/json', '\\x7b7d', now() + interval '1 day')`
    yield* sql`INSERT INTO rate_limit_buckets (organization_id, rate, burst, tokens, granted, updated_at)
      VALUES (${org}, 10, 20, 19, 1, now())`
    yield* sql`INSERT INTO assistant_files (assistant_id, content_hash, content)
      VALUES (${assistant}, 'h1', '{"a":1}'), (${assistant}, 'h2', '{"a":2}')`
    yield* sql`INSERT INTO assistant_commits (assistant_id, id, parent_commit_id, message, author_type, created_at)
      VALUES (${assistant}, 'c0000000000a', NULL, 'first', 'human', now()),
        (${assistant}, 'c0000000000b', 'c0000000000a', 'second', 'human', now())`
    yield* sql`INSERT INTO assistant_commit_files (assistant_id, commit_id, path, content_hash)
      VALUES (${assistant}, 'c0000000000a', 'context', 'h1'), (${assistant}, 'c0000000000b', 'context', 'h2')`
    yield* sql`INSERT INTO assistant_branches (id, assistant_id, name, head_commit_id, created_at, updated_at)
      VALUES (${branch}, ${assistant}, 'main', 'c0000000000b', now(), now()),
        (${feature}, ${assistant}, 'feature', 'c0000000000a', now(), now())`
    yield* sql`INSERT INTO assistant_draft_files (branch_id, path, content_hash)
      VALUES (${branch}, 'context', 'h2'), (${feature}, 'context', 'h1')`
    yield* sql`INSERT INTO assistant_rollouts (assistant_id, id, branch_id, percent, created_at, updated_at)
      VALUES (${assistant}, ${id()}, ${feature}, 25, now(), now())`
    yield* sql`INSERT INTO session_assignments (session_id, assistant_id, branch_name, commit_id, created_at, updated_at)
      VALUES (${session}, ${assistant}, 'main', 'c0000000000b', now(), now())`
    // The roll-up trigger of 0015 fills run_rollups.
    yield* sql`INSERT INTO runs (id, organization_id, session_id, trigger, assistant_id, commit_id, branch_name, status,
        input_tokens, output_tokens, started_at, finished_at, duration_ms)
      VALUES (${run}, ${org}, ${session}, 'reply', ${assistant}, 'c0000000000b', 'main', 'succeeded', 10, 20,
          now() - interval '2 hours', now() - interval '2 hours', 120),
        (${id()}, ${org}, ${session}, 'reply', ${assistant}, 'c0000000000b', 'main', 'failed', NULL, NULL,
          now() - interval '2 hours', now() - interval '2 hours', 120),
        -- An agent's assistant id is text: two organizations may name the same one; their runs shared a roll-up.
        (${id()}, ${org}, ${session}, 'reply', 'legacy-bot', 'c0000000000z', NULL, 'succeeded', 1, 1,
          date_trunc('hour', now()) - interval '3 hours', date_trunc('hour', now()) - interval '3 hours', 50)`
    yield* sql`INSERT INTO reply_jobs (id, organization_id, session_id, status, due_at, created_at)
      VALUES (${id()}, ${org}, ${session}, 'pending', now() + interval '1 hour', now()),
        (${id()}, ${org}, ${session}, 'running', now(), now())`
    yield* sql`INSERT INTO session_schedules (id, organization_id, session_id, scheduled_for, config, status, created_at)
      VALUES (${id()}, ${org}, ${session}, now() + interval '1 day', '{"type":"node","node_id":"n"}', 'pending', now())`
    yield* sql`INSERT INTO erasures (organization_id, id, contact_id, status, requested_at)
      VALUES (${org}, ${id()}, '+1777', 'completed', now())`
    yield* sql`INSERT INTO evaluations (organization_id, id, assistant_id, status, baseline, candidate, baseline_snapshot,
        candidate_snapshot, repeats, turns_total, created_at)
      VALUES (${org}, ${evaluation}, ${assistant}, 'queued', '{}', '{}', '{}', '{}', 1, 1, now())`
    yield* sql`INSERT INTO evaluation_turns (organization_id, evaluation_id, id, position, session_id, run_id, node_id,
        started_at, recorded)
      VALUES (${org}, ${evaluation}, ${id()}, 1, ${session}, ${run}, 'n', now(), '{}')`
    return { org, session, closed, assistant, app }
  })

/** Every table of the public schema with its row count. */
const rowCounts = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const tables = yield* sql<{ name: string }>`SELECT tablename AS name FROM pg_tables
    WHERE schemaname = 'public' ORDER BY tablename`
  const counts: Record<string, number> = {}
  for (const { name } of tables) {
    const [row] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM ${sql(name)}`
    counts[name] = row!.n
  }
  return counts
})

describe("organization keys (migration 0027, O11)", () => {
  it.live(
    "a populated 0026 database keeps its rows and is keyed by organization_id first (O11)",
    () =>
      Effect.gen(function* () {
        const database = yield* Effect.acquireRelease(
          Effect.promise(() => emptyDatabase("organization_keys")),
          (owned) => Effect.promise(owned.drop)
        )
        yield* Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          const applied = yield* Database.migrateThrough(26)
          assert.strictEqual(applied.at(-1)?.[0], 26)
          const first = yield* populate("first")
          const second = yield* populate("second")
          const before = yield* rowCounts
          for (const [table, n] of Object.entries(before)) {
            if (table !== "parley_migrations") assert.isAbove(n, 0, `${table} has rows before the migration`)
          }
          const rolledUp = yield* sql<{ runs: number; succeeded: number }>`SELECT sum(runs)::int AS runs,
            sum(succeeded)::int AS succeeded FROM run_rollups`

          const rest = yield* Database.migrateThrough(27)
          assert.deepStrictEqual(
            rest.map(([id]) => id),
            [27]
          )

          // Rows kept: every table has the rows it had (parley_migrations one more), the roll-ups the same sums,
          // one more row: the runs of the two organizations naming 'legacy-bot' shared one, now each has its own.
          const after = yield* rowCounts
          assert.deepStrictEqual(after, {
            ...before,
            parley_migrations: before.parley_migrations! + 1,
            run_rollups: before.run_rollups! + 1
          })
          assert.deepStrictEqual(
            yield* sql`SELECT organization_id::text, runs FROM run_rollups WHERE assistant_id = 'legacy-bot'
              ORDER BY organization_id`,
            [first.org, second.org].sort().map((organization_id) => ({ organization_id, runs: 1 }))
          )
          assert.deepStrictEqual(
            yield* sql`SELECT sum(runs)::int AS runs, sum(succeeded)::int AS succeeded FROM run_rollups`,
            rolledUp
          )

          // The filled column is the parent's organization, row by row; the roll-ups are the runs' organization.
          for (const [table, parent, column] of FILLED) {
            const [row] = yield* sql<{ wrong: number; total: number }>`SELECT
                count(*) FILTER (WHERE p.organization_id IS DISTINCT FROM t.organization_id)::int AS wrong,
                count(*)::int AS total
              FROM ${sql(table)} t LEFT JOIN ${sql(parent)} p ON p.id = t.${sql(column)}`
            assert.strictEqual(row!.wrong, 0, `${table}.organization_id is ${parent}'s`)
            assert.isAbove(row!.total, 0)
          }
          const [rollups] = yield* sql<{ wrong: number }>`SELECT count(*)::int AS wrong FROM run_rollups u
            WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.organization_id = u.organization_id
              AND r.assistant_id = u.assistant_id)`
          assert.strictEqual(rollups!.wrong, 0)

          // Keys: every primary and unique key starts with organization_id, but the reference tables'.
          const keys = yield* sql<{ table: string; name: string; columns: Array<string> }>`
            SELECT c.relname AS table, i.relname AS name,
              array_agg(a.attname ORDER BY k.n) AS columns
            FROM pg_index x
            JOIN pg_class c ON c.oid = x.indrelid JOIN pg_namespace ns ON ns.oid = c.relnamespace
            JOIN pg_class i ON i.oid = x.indexrelid
            CROSS JOIN LATERAL unnest(x.indkey) WITH ORDINALITY AS k(attnum, n)
            LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
            WHERE ns.nspname = 'public' AND x.indisunique AND c.relkind = 'r'
            GROUP BY c.relname, i.relname ORDER BY 1, 2`
          const keyedOtherwise = keys.filter((key) => key.columns[0] !== "organization_id")
          assert.deepStrictEqual([...new Set(keyedOtherwise.map((key) => key.table))].sort(), REFERENCE_TABLES)
          // Every table has a primary key; all but the reference tables start with organization_id.
          const primary = yield* sql<{ table: string; first: string }>`
            SELECT c.relname AS table, a.attname AS first FROM pg_constraint k
            JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace ns ON ns.oid = c.relnamespace
            JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.conkey[1]
            WHERE ns.nspname = 'public' AND k.contype = 'p' ORDER BY 1`
          assert.deepStrictEqual(
            primary.map((key) => key.table),
            Object.keys(after).sort()
          )
          assert.deepStrictEqual(
            primary.filter((key) => key.first !== "organization_id").map((key) => key.table),
            REFERENCE_TABLES
          )
          for (const table of Object.keys(after)) {
            if (REFERENCE_TABLES.includes(table)) continue
            const [column] = yield* sql<{ nullable: boolean }>`SELECT NOT attnotnull AS nullable FROM pg_attribute
              WHERE attrelid = ${table}::regclass AND attname = 'organization_id'`
            assert.strictEqual(column?.nullable, false, `${table}.organization_id NOT NULL`)
          }

          // Foreign keys: between per-organization tables, each carries organization_id onto organization_id.
          const foreign = yield* sql<{ name: string; table: string; referenced: string; pairs: Array<string> }>`
            SELECT k.conname AS name, c.relname AS table, r.relname AS referenced,
              array_agg(a.attname || '=' || b.attname ORDER BY u.n) AS pairs
            FROM pg_constraint k
            JOIN pg_class c ON c.oid = k.conrelid JOIN pg_class r ON r.oid = k.confrelid
            JOIN pg_namespace ns ON ns.oid = c.relnamespace
            CROSS JOIN LATERAL unnest(k.conkey, k.confkey) WITH ORDINALITY AS u(col, ref, n)
            JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = u.col
            JOIN pg_attribute b ON b.attrelid = r.oid AND b.attnum = u.ref
            WHERE ns.nspname = 'public' AND k.contype = 'f'
            GROUP BY k.conname, c.relname, r.relname ORDER BY 2, 1`
          const between = foreign.filter(
            (key) => !REFERENCE_TABLES.includes(key.table) && !REFERENCE_TABLES.includes(key.referenced)
          )
          assert.isAtLeast(between.length, 19)
          for (const key of between) {
            assert.include(key.pairs, "organization_id=organization_id", `${key.name} carries organization_id`)
          }
          // Only a per-organization table's key to its organization, or a reference table's, reaches organizations.
          for (const key of foreign.filter((key) => key.referenced === "organizations")) {
            assert.deepStrictEqual(key.pairs, ["organization_id=id"], key.name)
          }

          // The triggers that write the changed tables: a run rolls up into its organization's row, a session
          // closed cancels its schedule and drops its pending job, an app deleted takes its deliveries.
          yield* sql`INSERT INTO runs (id, organization_id, session_id, trigger, assistant_id, commit_id, branch_name,
              status, started_at, finished_at, duration_ms)
            VALUES (${crypto.randomUUID()}, ${first.org}, ${first.session}, 'reply', ${first.assistant}, 'c0000000000b',
              'main', 'succeeded', now() - interval '2 hours', now() - interval '2 hours', 120)`
          const [rolled] = yield* sql<{ runs: number }>`SELECT runs FROM run_rollups
            WHERE organization_id = ${first.org} AND assistant_id = ${first.assistant} AND duration_ms = 120`
          assert.strictEqual(rolled!.runs, 3)
          yield* sql`UPDATE sessions SET status = 'closed' WHERE organization_id = ${first.org} AND id = ${first.session}`
          const [closedRows] = yield* sql<{ schedules: string; jobs: number }>`SELECT
              (SELECT string_agg(status, ',') FROM session_schedules WHERE organization_id = ${first.org}) AS schedules,
              (SELECT count(*)::int FROM reply_jobs WHERE organization_id = ${first.org} AND status = 'pending') AS jobs`
          assert.deepStrictEqual(closedRows, { schedules: "canceled", jobs: 0 })
          yield* sql`DELETE FROM apps WHERE organization_id = ${first.org} AND id = ${first.app}`
          const deliveries = yield* sql<{ organization_id: string }>`SELECT organization_id::text FROM deliveries`
          assert.deepStrictEqual(
            deliveries.map((row) => row.organization_id),
            [second.org]
          )
        }).pipe(Effect.provide(Database.clientLayer(Redacted.make(database.url), 1)))
      }).pipe(Effect.scoped),
    120_000
  )
})
