/**
 * The bounds of Parley's connections (issue 38 item 1, O9): the pool of
 * `Database.layer` starts every connection with the configured
 * `statement_timeout` and `lock_timeout`, so a statement or a lock wait past
 * them fails with SQLSTATE 57014 or 55P03 instead of waiting on.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import * as SqlError from "effect/sql/SqlError"
import postgres from "postgres"
import { AppConfig } from "../../src/Config.ts"
import * as Database from "../../src/Database/Database.ts"
import { FileDatabase, TestDatabaseUrl } from "../support/Database.ts"

/** `Database.layer` on the file's database with test-sized bounds. */
const bounded = Layer.unwrap(
  Effect.map(Effect.service(TestDatabaseUrl), (url) =>
    Database.layer.pipe(
      Layer.provide(
        AppConfig.layerWith({
          databaseUrl: Redacted.make(url),
          databaseStatementTimeout: Duration.millis(300),
          databaseLockTimeout: Duration.millis(200)
        })
      )
    )
  )
).pipe(Layer.provideMerge(FileDatabase))

/** The SQLSTATE under a failed statement. */
const sqlStateOf = (error: unknown): unknown =>
  SqlError.isSqlError(error) ? (error.reason.cause as { code?: unknown } | undefined)?.code : undefined

describe("connection bounds (issue 38 item 1)", () => {
  it.layer(bounded, { timeout: 60_000 })((it) => {
    it.effect("connections start with the configured statement_timeout and lock_timeout", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const [row] = yield* sql<{ statement: string; lock: string }>`
          SELECT current_setting('statement_timeout') AS statement, current_setting('lock_timeout') AS lock`
        assert.deepStrictEqual(row, { statement: "300ms", lock: "200ms" })
      })
    )

    it.effect("a statement past statement_timeout fails with 57014 instead of running on", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const error = yield* Effect.flip(sql`SELECT pg_sleep(5)`)
        assert.strictEqual(sqlStateOf(error), "57014")
      })
    )

    it.effect("a lock wait past lock_timeout fails with 55P03", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        yield* sql`CREATE TABLE IF NOT EXISTS bound_check (id int PRIMARY KEY)`
        // Another client holds the table's lock while Parley's pool reads it.
        const holder = postgres(yield* TestDatabaseUrl, { max: 1 })
        const locked = yield* Effect.promise(() => holder.reserve())
        yield* Effect.promise(() => locked`BEGIN`.then(() => locked`LOCK TABLE bound_check IN ACCESS EXCLUSIVE MODE`))
        const error = yield* Effect.flip(sql`SELECT count(*) FROM bound_check`)
        yield* Effect.promise(async () => {
          await locked`ROLLBACK`
          locked.release()
          await holder.end()
        })
        assert.strictEqual(sqlStateOf(error), "55P03")
      })
    )
  })
})
