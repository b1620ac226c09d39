/**
 * Fast tests of the domains' rules on PostgreSQL (issue 37 item 1): the rules
 * live in the repositories' SQL and in the services, so their tests run the
 * production services (`servicesWith`, `Server.ts`) over the file's own
 * database (a clone of the migrated template, test/support/Database.ts), with
 * time on `TestClock` where a test needs it (every time a rule reads is passed
 * from `Clock` into the SQL). No in-memory copy of a table, a statement or a
 * trigger exists to drift from the SQL.
 *
 * A file shares one database and one pool: `onDatabase(services)` is
 * `layer(...)` of @effect/vitest over the given services, and each test makes
 * its own organization ({@link organization}), so tests never see each
 * other's rows. The fixtures below write what the admin API would (agents,
 * settings: O6) straight into the tables, and read what the rules wrote
 * (events in commit order: W1, W2; a snapshot of every table for "nothing
 * changed").
 */
import type { PgClient } from "@effect/sql-pg"
import { layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import type { AppConfig, AppConfigShape } from "../../src/Config.ts"
import type { JsonObject } from "../../src/Domain/Common.ts"
import { Models } from "../../src/Runtime/Models.ts"
import { EchoLanguageModel } from "../../src/Runtime/Providers/Echo.ts"
import { servicesWith } from "../../src/Server.ts"
import { makeIdGenerator } from "../../src/Shared/Ids.ts"
import { FileDatabase, fileDatabaseClient } from "./Database.ts"
import { testConfig } from "./TestApp.ts"

/** Ids for the fixtures (UUIDv7, as the application makes them). */
const newId = makeIdGenerator()

/** What a rules test's services may require: the file's pool and the configuration. */
export type DatabaseServices = SqlClient.SqlClient | PgClient.PgClient | AppConfig

/** The file's database, a pool of `connections` to it, and the test configuration with `config` over it. */
export const fileDatabase = (config: Partial<AppConfigShape> = {}, connections = 4) =>
  fileDatabaseClient(connections).pipe(Layer.provideMerge(testConfig(config)), Layer.provideMerge(FileDatabase))

/** The production domain services (`servicesWith`) with the echo model (R3) for every AI node. */
export const RulesServices = servicesWith(Models.layerTest(EchoLanguageModel, "echo"))

/**
 * `layer(...)` of @effect/vitest for a file of rules tests: `services`
 * (default {@link RulesServices}) over the file's database, built once for the
 * file on the real clock (so the pool's own timers run); `SqlClient` is
 * provided too, for the fixtures. Each `it.effect` runs on a `TestClock` of
 * its own, starting at 0: a test that moves time never moves another's.
 */
export const onDatabase = <ROut, E>(
  services: Layer.Layer<ROut, E, DatabaseServices> = RulesServices as never,
  config: Partial<AppConfigShape> = {}
) => {
  const shared = layer(services.pipe(Layer.provideMerge(fileDatabase(config))), {
    timeout: "120 seconds",
    excludeTestServices: true
  })
  return (name: string, f: (it: Parameters<Parameters<typeof shared>[1]>[0]) => void) =>
    shared(name, (it) => f(withOwnClock(it)))
}

/** `it` whose `it.effect` tests each run on a fresh `TestClock` (see {@link onDatabase}). */
const withOwnClock = <It extends { readonly effect: (...args: Array<any>) => void }>(it: It): It => {
  const effect = (name: string, self: (ctx: any) => Effect.Effect<any, any, any>, timeout?: any) =>
    it.effect(name, (ctx: any) => Effect.provide(self(ctx), TestClock.layer()), timeout)
  return new Proxy(it, {
    get: (target, property, receiver) =>
      property === "effect" ? Object.assign(effect, target.effect) : Reflect.get(target, property, receiver)
  })
}

/** Runs `statement` on the file's database (`SqlClient` required); SQL errors are defects. */
const run = <A extends object>(statement: (sql: SqlClient.SqlClient) => Effect.Effect<ReadonlyArray<A>, unknown>) =>
  Effect.flatMap(Effect.service(SqlClient.SqlClient), (sql) => Effect.orDie(statement(sql)))

/** A new organization named `name` (`SqlClient` required); returns its id. */
export const organization = (name = "Rules organization") =>
  Effect.gen(function* () {
    const id = newId()
    yield* run((sql) => sql`INSERT INTO organizations (id, name, created_at) VALUES (${id}, ${name}, now())`)
    return id
  })

/** An agent row (admin API, O6): AI agents have an `assistant_id`, human ones a `profile_id`. */
export interface AgentRow {
  readonly id: string
  readonly organization_id: string
  readonly name: string
  readonly type: "ai" | "human"
  readonly assistant_id: string | null
  readonly profile_id: string | null
}

/**
 * Adds an agent of `type` to the organization (O6), an AI one answering from
 * `assistantId` (default: a new id, an assistant that does not exist);
 * returns it (`SqlClient` required).
 */
export const addAgent = (
  organizationId: string,
  type: "ai" | "human",
  name = type === "ai" ? "Bot" : "Operator",
  assistantId: string = newId()
) =>
  Effect.gen(function* () {
    const agent: AgentRow = {
      id: newId(),
      organization_id: organizationId,
      name,
      type,
      assistant_id: type === "ai" ? assistantId : null,
      profile_id: type === "human" ? "profile_test" : null
    }
    yield* run(
      (sql) => sql`INSERT INTO agents (id, organization_id, name, type, assistant_id, profile_id, created_at)
        VALUES (${agent.id}, ${organizationId}, ${name}, ${type}, ${agent.assistant_id}, ${agent.profile_id}, now())`
    )
    return agent
  })

/** The organization settings the conversation rules read (O6); what is not given keeps its default. */
export interface SettingsFixture {
  /** D9: the agent of a new ingest session given no `agent_id`. */
  readonly default_agent_id?: string | null
  /** D11: whole seconds, 0-60 (default 3). */
  readonly reply_debounce_seconds?: number
  /** D16: whole seconds, or null for never (the default). */
  readonly session_idle_timeout_seconds?: number | null
  /** D20: requests per second, or null for no limit (the default). */
  readonly rate_limit_per_second?: number | null
  readonly rate_limit_burst?: number | null
  /** D21: whole days a closed session is kept, or null for forever (the default). */
  readonly message_retention_days?: number | null
  /** D21: whole days an event is kept (default 30), or null for forever. */
  readonly event_retention_days?: number | null
}

/** Sets organization settings (O6) over the current ones, as the admin API's PATCH does (`SqlClient` required). */
export const setSettings = (organizationId: string, settings: SettingsFixture) =>
  Effect.gen(function* () {
    yield* run(
      (sql) =>
        sql`INSERT INTO organization_settings (organization_id) VALUES (${organizationId}) ON CONFLICT DO NOTHING`
    )
    for (const [column, value] of Object.entries(settings)) {
      yield* run(
        (sql) =>
          sql`UPDATE organization_settings SET ${sql(column)} = ${value as never}, updated_at = now() WHERE organization_id = ${organizationId}`
      )
    }
  })

/** An event as stored (W3 envelope): `data.object` is the resource as JSON. */
export interface StoredEvent {
  readonly id: string
  readonly timestamp: number
  readonly type: string
  readonly organization_id: string
  readonly data: { readonly object: JsonObject }
}

/** The organization's events in commit order (W1, W2), their envelopes parsed (`SqlClient` required). */
export const eventsOf = (organizationId: string) =>
  Effect.map(
    run((sql) => sql<{ body: string }>`SELECT body FROM events WHERE organization_id = ${organizationId} ORDER BY id`),
    (rows): ReadonlyArray<StoredEvent> => rows.map((row) => JSON.parse(row.body))
  )

/** The `data.object` of an event as a loose record, for assertions. */
export const objectOf = (event: StoredEvent | undefined): Record<string, any> => event?.data.object ?? {}

/** `[type, action]` of each event of the organization (action `"-"` when the object has none), optionally of one resource id. */
export const eventLog = (organizationId: string, resourceId?: string) =>
  Effect.map(eventsOf(organizationId), (events) =>
    events
      .filter((event) => resourceId === undefined || event.data.object.id === resourceId)
      .map((event) => [event.type, "action" in event.data.object ? event.data.object.action : "-"] as const)
  )

/** The types of the organization's events, in order (W1). */
export const eventTypes = (organizationId: string) =>
  Effect.map(eventsOf(organizationId), (events) => events.map((event) => event.type))

/**
 * Every row of every table of the file's database (the migrations' own
 * bookkeeping aside), each table's rows in a fixed order, as JSON: equal
 * snapshots before and after a refused operation show it stored nothing
 * anywhere (`SqlClient` required). The file's tests run one at a time, so no
 * other test writes meanwhile.
 */
export const snapshotTables = Effect.gen(function* () {
  const tables = yield* run(
    (sql) => sql<{ name: string }>`SELECT table_name AS name FROM information_schema.tables
      WHERE table_schema = 'public' AND table_type = 'BASE TABLE' AND table_name <> 'parley_migrations'
      ORDER BY table_name`
  )
  const snapshot: Record<string, ReadonlyArray<string>> = {}
  for (const { name } of tables) {
    const rows = yield* run(
      (sql) => sql<{ row: string }>`SELECT to_jsonb(t)::text AS row FROM ${sql(name)} t ORDER BY 1`
    )
    snapshot[name] = rows.map((row) => row.row)
  }
  return snapshot
})

/** Rows of `table` matching `where` (a column and its value), as objects (`SqlClient` required). */
export const rowsOf = (table: string, column: string, value: unknown) =>
  run(
    (sql) => sql<Record<string, any>>`SELECT * FROM ${sql(table)} WHERE ${sql(column)} = ${value as never} ORDER BY 1`
  )

/** Sets `column` of the row of `table` whose `id` is `id` to `value`, as another writer would (`SqlClient` required). */
export const setColumn = (table: string, id: string, column: string, value: unknown) =>
  run((sql) => sql`UPDATE ${sql(table)} SET ${sql(column)} = ${value as never} WHERE id = ${id} RETURNING id`)

/**
 * Moves the database's clock on by `seconds` for the given organizations: every
 * timestamp column of their rows (tables with `organization_id`) is moved back
 * by that much (`SqlClient` required). The rules that compare with the
 * database's own time (`statement_timestamp()`: session expiry, D16) then see
 * that much time gone by; the rules timed by the application's clock (reply
 * debounce, schedules) move with `TestClock` instead.
 */
export const elapse = (seconds: number, ...organizationIds: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const columns = yield* run(
      (sql) => sql<{ table_name: string; column_name: string }>`SELECT c.table_name, c.column_name
        FROM information_schema.columns c
        JOIN information_schema.columns o ON o.table_schema = c.table_schema AND o.table_name = c.table_name
          AND o.column_name = 'organization_id'
        WHERE c.table_schema = 'public' AND c.data_type = 'timestamp with time zone'
        ORDER BY 1, 2`
    )
    const byTable = new Map<string, Array<string>>()
    for (const { table_name, column_name } of columns) {
      byTable.set(table_name, [...(byTable.get(table_name) ?? []), column_name])
    }
    for (const [table, names] of byTable) {
      yield* run(
        (sql) =>
          sql`UPDATE ${sql(table)} SET ${sql.csv(
            // In UTC (\`timestamp - interval\` is IMMUTABLE, \`timestamptz - interval\` STABLE, which
            // Citus refuses over a column in an UPDATE: O11); the same moment either way.
            names.map(
              (name) =>
                sql`${sql(name)} = (${sql(name)} AT TIME ZONE 'UTC' - make_interval(secs => ${seconds})) AT TIME ZONE 'UTC'`
            )
          )} WHERE organization_id IN ${sql.in(organizationIds)} RETURNING 1`
      )
    }
  })
