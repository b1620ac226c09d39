/**
 * The real application served in-process on a random loopback port over the
 * run's test database (see globalSetup.ts), and a small HTTP client for tests.
 * Each test makes its own organization (`TestApi.organization()`), so tests
 * never depend on each other's data.
 */
import { NodeHttpServer } from "@effect/platform-node"
import type { PgClient } from "@effect/sql-pg"
import { layer } from "@effect/vitest"
import { Context, Effect, Layer, Redacted } from "effect"
import { HttpRouter, HttpServer } from "effect/http"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import { AppConfig, type AppConfigShape } from "../../src/Config.ts"
import { DatabaseLocation } from "../../src/Database/Database.ts"
import { AllRoutes, createHttpServer, Draining, ServerSpansLive, serveOptions } from "../../src/Http.ts"
import { repliesChannel } from "../../src/Replies/Repo.ts"
import { ServicesLive, WorkersLive } from "../../src/Server.ts"
import { Ids } from "../../src/Shared/Ids.ts"
import { deliveriesChannel } from "../../src/Webhooks/Repo.ts"
import { FileDatabase, fileDatabaseClient, TestDatabaseUrl } from "./Database.ts"
import { waitFor } from "./Wait.ts"

/** The admin token of test servers. */
export const ADMIN_TOKEN = "test-admin-token"

/** The conversations base path (O4). */
export const C = "/conversations/v2/api/v1"

/** A response as tests see it: status, parsed JSON body (or text), headers. */
export interface TestResponse {
  readonly status: number
  readonly body: any
  readonly text: string
  readonly headers: Headers
}

/** A test organization with an API key and helpers bound to it. */
export interface TestOrganization {
  readonly id: string
  readonly token: string
  /** A request with this organization's API key. */
  readonly call: (method: string, path: string, body?: unknown) => Effect.Effect<TestResponse>
  /** Creates an agent of the organization through the admin API; returns its id. */
  readonly agent: (type: "ai" | "human", name?: string) => Effect.Effect<string>
  /** Creates a session for `contactId` (POST /sessions) and returns it. */
  readonly session: (fields?: Record<string, unknown>) => Effect.Effect<any>
}

/** Client of the test server. */
export class TestApi extends Context.Service<
  TestApi,
  {
    readonly baseUrl: string
    /** A raw request; `body` is sent as JSON unless it is a string. */
    readonly request: (
      method: string,
      path: string,
      options?: { readonly body?: unknown; readonly token?: string; readonly headers?: Record<string, string> }
    ) => Effect.Effect<TestResponse>
    /** A new organization with an API key. */
    readonly organization: () => Effect.Effect<TestOrganization>
    /** The outbox events of an organization, oldest first, parsed. */
    readonly events: (organizationId: string) => Effect.Effect<ReadonlyArray<any>>
  }
>()("test/TestApi") {}

/** The test configuration: defaults with a loopback server and the admin token. */
export const testConfig = (overrides: Partial<AppConfigShape> = {}) =>
  AppConfig.layerWith({
    port: 0,
    host: "127.0.0.1",
    adminToken: Redacted.make(ADMIN_TOKEN),
    logLevel: "Error",
    logFormat: "json",
    ...overrides
  })

/** {@link testConfig} with the file's database (test/support/Database.ts). */
const fileConfig = (overrides: Partial<AppConfigShape>) =>
  Layer.unwrap(
    Effect.map(Effect.service(TestDatabaseUrl), (url) => testConfig({ databaseUrl: Redacted.make(url), ...overrides }))
  )

/** The test database connection (a small pool) to the file's database. */
export const TestDatabase = fileDatabaseClient(6)

const TestApiLive = Layer.effect(
  TestApi,
  Effect.gen(function* () {
    const server = yield* HttpServer.HttpServer
    const sql = yield* SqlClient.SqlClient
    const address = server.address
    if (address._tag === "UnixPathAddress") return yield* Effect.die("unexpected unix socket")
    const baseUrl = `http://127.0.0.1:${address.port}`

    const request = (
      method: string,
      path: string,
      options: { readonly body?: unknown; readonly token?: string; readonly headers?: Record<string, string> } = {}
    ) =>
      Effect.promise(async (): Promise<TestResponse> => {
        const headers: Record<string, string> = { ...options.headers }
        if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`
        let body: string | undefined
        if (options.body !== undefined) {
          body = typeof options.body === "string" ? options.body : JSON.stringify(options.body)
          headers["content-type"] ??= "application/json"
        }
        const response = await fetch(`${baseUrl}${path}`, { method, headers, ...(body !== undefined ? { body } : {}) })
        const text = await response.text()
        let parsed: unknown = text
        try {
          parsed = text === "" ? undefined : JSON.parse(text)
        } catch {}
        return { status: response.status, body: parsed, text, headers: response.headers }
      })

    const admin = (method: string, path: string, body?: unknown) =>
      request(method, `/admin/v1${path}`, { token: ADMIN_TOKEN, body })

    const organization = () =>
      Effect.gen(function* () {
        const org = yield* admin("POST", "/organizations", { name: "Test organization" })
        const key = yield* admin("POST", `/organizations/${org.body.id}/api-keys`, { name: "test" })
        const id: string = org.body.id
        const token: string = key.body.token
        const call = (method: string, path: string, body?: unknown) =>
          request(method, `${C}${path}`, { token, ...(body !== undefined ? { body } : {}) })
        const agent = (type: "ai" | "human", name = `${type} agent`) =>
          admin(
            "POST",
            `/organizations/${id}/agents`,
            type === "ai" ? { name, type, assistant_id: "asst_test" } : { name, type, profile_id: "profile_test" }
          ).pipe(Effect.map((response) => response.body.id as string))
        const session = (fields: Record<string, unknown> = {}) =>
          call("POST", "/sessions", { contact_id: "+15550001", contact_name: "Ada", ...fields }).pipe(
            Effect.map((response) => {
              if (response.status !== 201) throw new Error(`session create failed: ${response.text}`)
              return response.body
            })
          )
        return { id, token, call, agent, session }
      })

    const events = (organizationId: string) =>
      sql<{ body: string }>`SELECT body FROM events WHERE organization_id = ${organizationId} ORDER BY id`.pipe(
        Effect.map((rows) => rows.map((row) => JSON.parse(row.body))),
        Effect.orDie
      )

    return TestApi.of({ baseUrl, request, organization, events })
  })
)

/**
 * The whole application on a random port over the test database, plus
 * `TestApi`, `SqlClient` and `DatabaseLocation` for assertions. `overrides` change the configuration.
 */
export const TestApp = (
  overrides: Partial<AppConfigShape> = {},
  services: Layer.Layer<
    Layer.Success<typeof ServicesLive>,
    never,
    SqlClient.SqlClient | PgClient.PgClient | AppConfig
  > = ServicesLive
) =>
  TestApiLive.pipe(
    Layer.provideMerge(
      HttpRouter.serve(AllRoutes, { ...serveOptions, disableListenLog: true }).pipe(
        Layer.provide([ServerSpansLive, Draining.layer]),
        Layer.provideMerge(
          Layer.unwrap(
            Effect.map(Effect.service(Ids), ({ newId }) =>
              NodeHttpServer.layer(() => createHttpServer(newId), { port: 0, host: "127.0.0.1" })
            )
          )
        )
      )
    ),
    Layer.provideMerge(services),
    Layer.provideMerge(TestDatabase),
    // Where the webhook worker opens its own pool: the file's database, from the configuration.
    Layer.provideMerge(DatabaseLocation.layer),
    Layer.provideMerge(fileConfig(overrides)),
    Layer.provideMerge(FileDatabase)
  )

/**
 * `layer(...)` of @effect/vitest over `TestApp(overrides)`, with live services
 * (real clock): the app talks to a real database and real sockets.
 */
export const withApp = (overrides: Partial<AppConfigShape> = {}, services?: Parameters<typeof TestApp>[1]) =>
  layer(TestApp(overrides, services), { excludeTestServices: true, timeout: "120 seconds" })

/**
 * On TestClock, shutdown timers (graceful HTTP shutdown, worker grace periods)
 * would never fire: once teardown starts, this moves the clock on in the
 * background. Its finalizer runs before the workers' (it is acquired after them).
 */
const advanceClockOnTeardown = Layer.effectDiscard(
  Effect.addFinalizer(() =>
    Effect.forkDetach(
      Effect.forever(
        TestClock.adjust("1 second").pipe(Effect.andThen(Effect.promise(() => new Promise((r) => setTimeout(r, 10)))))
      )
    )
  )
)

/**
 * Waits, in real time and up to 15 s ({@link waitFor}), until the workers listen for their
 * notifications (the webhook deliveries' and the replies' `LISTEN`, each on a
 * connection of its own that shows it in `pg_stat_activity`). On TestClock
 * their fallback polls never fire, so a notification sent before they listen
 * would be lost for good and a test would wait for work that never starts.
 */
const workersListening = Layer.effectDiscard(
  Effect.flatMap(Effect.service(SqlClient.SqlClient), (sql) =>
    waitFor(
      sql<{ query: string }>`SELECT query FROM pg_stat_activity
        WHERE datname = current_database() AND state = 'idle' AND query ILIKE 'LISTEN %'`,
      (rows) => [deliveriesChannel, repliesChannel].every((channel) => rows.some((row) => row.query.includes(channel)))
    )
  )
)

/**
 * {@link withApp} plus the background workers of the role (`WorkersLive`: the
 * webhook delivery worker, O1), stopped gracefully when the file's tests end.
 */
export const withWorkers = (
  overrides: Partial<AppConfigShape> = {},
  services?: Parameters<typeof TestApp>[1],
  options: {
    /** Run the app and its workers on @effect/vitest's TestClock (and TestConsole) instead of the real clock. */
    readonly testClock?: boolean
    /** A tracer for the app and its workers (for example an in-memory span exporter), and what else it provides. */
    readonly tracing?: Layer.Layer<never>
  } = {}
) =>
  layer(
    (options.testClock === true
      ? // Built after the workers, so released before them: the clock moves while they stop.
        advanceClockOnTeardown.pipe(Layer.provide(workersListening), Layer.provide(WorkersLive))
      : WorkersLive
    ).pipe(Layer.provideMerge(TestApp(overrides, services)), Layer.provide(options.tracing ?? Layer.empty)),
    { excludeTestServices: options.testClock !== true, timeout: "120 seconds" }
  )
