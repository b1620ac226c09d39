/**
 * `parley/client`: a typed Effect client of the whole contract (`ParleyApi`,
 * `src/Api.ts`), for integrations written with Effect. Imports no server
 * code: only `effect` and the contract's schemas.
 *
 * ```ts
 * import { Effect } from "effect"
 * import { FetchHttpClient } from "effect/http"
 * import { makeClient } from "parley/client"
 *
 * const program = Effect.gen(function* () {
 *   const parley = yield* makeClient({ baseUrl: "http://localhost:8080", apiKey: process.env.PARLEY_TOKEN })
 *   const session = yield* parley.sessions.create({ payload: { contact_id: "+15550100", contact_name: "Ada" } })
 *   yield* parley.messages.create({
 *     params: { session_id: session.id },
 *     payload: { role: "user", content: { type: "text", text: "Hello" } }
 *   })
 * }).pipe(Effect.provide(FetchHttpClient.layer))
 * ```
 *
 * Assistants in production go through the same client (A12-A14): roll a
 * branch out to 10% of new sessions, then compare its runs with `main`'s:
 *
 * ```ts
 * yield* parley.assistants.putRollout({ params: { assistant_id }, payload: { branch_name: "friendlier", percent: 10 } })
 * const { commits } = yield* parley.assistants.runStats({ params: { assistant_id }, query: {} })
 * ```
 *
 * Evaluating a draft against `main` on the conversations of the last week
 * (A16), then reading the changed turns:
 *
 * ```ts
 * const evaluation = yield* parley.evaluations.createEvaluation({
 *   params: { assistant_id },
 *   payload: {
 *     baseline: { branch_name: "main" },
 *     candidate: { branch_name: "friendlier", draft: true },
 *     sessions: { since: new Date(Date.now() - 7 * 86_400_000).toISOString() }
 *   }
 * })
 * // ... once `getEvaluation` says `completed`: its `summary.changed_rate` and `summary.interval`
 * const changed = yield* parley.evaluations.listEvaluationTurns({
 *   params: { assistant_id, evaluation_id: evaluation.id },
 *   query: { changed: "true" }
 * })
 * ```
 *
 * Erasing a contact (D22) and following the erasure:
 *
 * ```ts
 * const erasure = yield* parley.erasures.erase({ params: { contact_id: "+15550100" } })
 * const { status, counts } = yield* parley.erasures.get({ params: { erasure_id: erasure.id } })
 * ```
 *
 * Redacting one message (D23): the answer carries `content: {type: "redacted"}` and `redacted_at`:
 *
 * ```ts
 * yield* parley.messages.redact({ params: { session_id: session.id, message_id: message.id } })
 * ```
 *
 * Each method fails with the errors its endpoint declares, decoded as tagged
 * errors (`SessionNotFound`, `MergeConflict {paths}`, ...), so a client tells
 * them apart by `_tag` while the wire stays `{detail}`.
 *
 * A write made safe to retry (D19) sends an `Idempotency-Key`: wrap the call
 * in {@link withIdempotencyKey} and retry that same effect on a 5xx or a
 * network error, and the operation runs once:
 *
 * ```ts
 * const create = parley.messages.create({ params, payload }).pipe(withIdempotencyKey(crypto.randomUUID()))
 * yield* Effect.retry(create, { times: 3, schedule: Schedule.exponential("200 millis") })
 * ```
 */
import { Context, Effect } from "effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import { HttpApiClient } from "effect/http-api"
import { ParleyApi } from "./Api.ts"
import { adminBasePath } from "./Domain/BasePaths.ts"

export { ParleyApi }

/** Where the server is and the credentials to send. */
export interface ClientOptions {
  /** The server's origin, such as `http://localhost:8080`. */
  readonly baseUrl: string | URL
  /** An organization's API key (`prl_...`), sent to the conversations and assistants APIs. */
  readonly apiKey?: string | undefined
  /** The server's `ADMIN_TOKEN`, sent to the admin API (`/admin/v1`). */
  readonly adminToken?: string | undefined
}

/** The `Idempotency-Key` the client sends with the requests of an effect (D19); none by default. */
export const IdempotencyKey = Context.Reference<string | undefined>("parley/client/IdempotencyKey", {
  defaultValue: () => undefined
})

/**
 * Sends `key` as the `Idempotency-Key` of every request `self` makes (D19:
 * 1-255 visible ASCII characters, such as a UUID; POST and PATCH of the
 * conversations and assistants APIs). Keep the key of a write for its retries:
 * the server sends the stored response to a repeat and changes nothing.
 */
export const withIdempotencyKey = (key: string) => Effect.provideService(IdempotencyKey, key)

/**
 * The client: one method per operation, grouped as the API is
 * (`sessions.create`, `assistants.merge`, `admin.createOrganization`, ...).
 * Each request carries `Authorization: Bearer` with `adminToken` under
 * `/admin/v1` and `apiKey` elsewhere (none when not given), and the
 * {@link IdempotencyKey} of the calling effect when set. Requires an
 * `HttpClient` (for example `FetchHttpClient.layer`).
 */
export const makeClient = (options: ClientOptions) =>
  HttpApiClient.make(ParleyApi, {
    baseUrl: options.baseUrl,
    transformClient: HttpClient.mapRequestEffect<never, never>((request) =>
      Effect.map(Effect.service(IdempotencyKey), (key) => {
        const admin = new URL(request.url, "http://base").pathname.includes(`${adminBasePath}/`)
        const token = admin ? options.adminToken : options.apiKey
        const authorized = token === undefined ? request : HttpClientRequest.bearerToken(request, token)
        return key === undefined ? authorized : HttpClientRequest.setHeader(authorized, "idempotency-key", key)
      })
    )
  })
