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
 * Each method fails with the errors its endpoint declares, decoded as tagged
 * errors (`SessionNotFound`, `MergeConflict {paths}`, ...), so a client tells
 * them apart by `_tag` while the wire stays `{detail}`.
 */
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

/**
 * The client: one method per operation, grouped as the API is
 * (`sessions.create`, `assistants.merge`, `admin.createOrganization`, ...).
 * Each request carries `Authorization: Bearer` with `adminToken` under
 * `/admin/v1` and `apiKey` elsewhere (none when not given). Requires an
 * `HttpClient` (for example `FetchHttpClient.layer`).
 */
export const makeClient = (options: ClientOptions) =>
  HttpApiClient.make(ParleyApi, {
    baseUrl: options.baseUrl,
    transformClient: HttpClient.mapRequest((request) => {
      const admin = new URL(request.url, "http://base").pathname.includes(`${adminBasePath}/`)
      const token = admin ? options.adminToken : options.apiKey
      return token === undefined ? request : HttpClientRequest.bearerToken(request, token)
    })
  })
