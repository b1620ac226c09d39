/**
 * Idempotency-Key (DECISIONS.md D19, issue 15): every POST and PATCH of the
 * conversations and assistants APIs sent with an `Idempotency-Key` runs in one
 * transaction that first claims (organization, key) and last stores the
 * response, so a change and its stored response commit together or not at all
 * (a process killed in between leaves neither, and the retry runs the
 * operation once).
 *
 * - The claim ({@link IdempotencyRepo.claim}) tries an advisory transaction
 *   lock of (organization, key): held by another transaction, in any process,
 *   the response is 409 `A request with this Idempotency-Key is in progress`
 *   with `Retry-After: 1`.
 * - A stored response for the key is sent again, status and bytes as stored, with
 *   `Idempotent-Replayed: true`, when the method, path and body (compared as
 *   RFC 8785 canonical JSON, so member order and spacing do not matter) are
 *   those of the first request; else 422 `Idempotency-Key was used with a
 *   different request`. Nothing changes either way.
 * - Responses that did not start the operation are not stored and their
 *   transaction rolls back: 401, 413, 415, 422, 429 and 5xx (and a failure
 *   that escapes the handler). Every other response is stored 24 hours.
 * - POST message (the hot path) does the same in its one statement instead of
 *   a transaction ({@link statementStoredRoutes}, `IdempotencyRequest`): the
 *   statement tries the lock, reads the live response and inserts the message
 *   and its response only when it may; a response that changed nothing (404,
 *   400) is stored after it.
 * - A key that is not 1-255 visible ASCII characters gets 422 at
 *   `["header","idempotency-key"]` before anything runs. A request without the
 *   header, or to another API (admin, health, docs), runs as before.
 */
import * as crypto from "node:crypto"
import { PgClient } from "@effect/sql-pg"
import canonicalize from "canonicalize"
import { type Cause, Context, Duration, Effect, Equal, Hash, Layer, Redacted } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import type { SqlError } from "effect/sql"
import { Admin } from "../Admin/Admin.ts"
import { logUnlessOutage } from "../Database/Health.ts"
import { conversationsBasePath, isOrganizationApiPath } from "../Domain/BasePaths.ts"
import {
  IDEMPOTENCY_KEY_HEADER,
  IdempotencyRequest,
  IN_PROGRESS_RETRY_AFTER_SECONDS,
  idempotencyDetails,
  invalidKeyIssue,
  isIdempotencyKey,
  REPLAYED_HEADER,
  type StoredResponse
} from "../Domain/Idempotency.ts"
import { detailResponse } from "../Domain/JsonResponse.ts"
import { Authorization } from "../Domain/Security.ts"
import { IdempotencyRepo } from "./Repo.ts"

/** Whether `request` falls under D19: a POST or PATCH of the conversations or assistants API. */
const isIdempotentOperation = (request: HttpServerRequest.HttpServerRequest): boolean =>
  (request.method === "POST" || request.method === "PATCH") && isOrganizationApiPath(request.url)

/**
 * Routes whose operation claims the key and stores its response in its own single
 * statement (`IdempotencyRequest`): POST message, the measured hot path
 * (`npm run bench`: the transaction of every other route gave 0.42 of plain
 * POST message's throughput there). Route templates as the router has them.
 */
const statementStoredRoutes: ReadonlySet<string> = new Set([
  `POST ${conversationsBasePath}/sessions/:session_id/messages`
])

/** 409: the key's first request still runs (D19), with `Retry-After` (issue 38 item 6). */
const inProgress = detailResponse(409, idempotencyDetails.inProgress, {
  "retry-after": String(IN_PROGRESS_RETRY_AFTER_SECONDS)
})

/** Whether a response of `status` is stored (D19): not one that did not start the operation (401, 413, 415, 422, 429, 5xx). */
const isStoredStatus = (status: number): boolean =>
  status < 500 && status !== 401 && status !== 413 && status !== 415 && status !== 422 && status !== 429

/**
 * The fingerprint of a request (D19: same method, path and body): SHA-256 of
 * the method, the path with its query, and the body as RFC 8785 canonical JSON
 * (its raw bytes when it is not JSON; such a request gets 415 or 422, never
 * stored).
 */
const fingerprintOf = (method: string, url: string, body: ArrayBuffer): Uint8Array => {
  const bytes = new Uint8Array(body)
  let canonical: string | undefined
  try {
    canonical = bytes.length === 0 ? "" : canonicalize(JSON.parse(Buffer.from(bytes).toString("utf8")))
  } catch {
    canonical = undefined
  }
  // One-shot hashes (crypto.hash): cheaper than a Hash object on the hot path (`npm run bench`, "parley key").
  return canonical === undefined
    ? crypto.hash("sha256", Buffer.concat([Buffer.from(`${method} ${url}\nraw\n`, "utf8"), bytes]), "buffer")
    : crypto.hash("sha256", `${method} ${url}\njson\n${canonical}`, "buffer")
}

/** The bytes and content type of `response`, when its body is held in memory (JSON responses, 204). */
const bodyOf = (
  response: HttpServerResponse.HttpServerResponse
): { readonly contentType: string; readonly body: Uint8Array } | undefined => {
  const body = response.body
  switch (body._tag) {
    case "Empty":
      return { contentType: "", body: new Uint8Array(0) }
    case "Uint8Array":
      return { contentType: body.contentType, body: body.body }
    case "Raw":
      return typeof body.body === "string"
        ? { contentType: body.contentType ?? "text/plain", body: Buffer.from(body.body, "utf8") }
        : undefined
    default:
      return undefined
  }
}

/** The stored response sent again (D19): its status and bytes, `Idempotent-Replayed: true`. */
const replay = (stored: StoredResponse): HttpServerResponse.HttpServerResponse =>
  stored.body.length === 0 && stored.contentType === ""
    ? HttpServerResponse.empty({ status: stored.status, headers: { [REPLAYED_HEADER]: "true" } })
    : HttpServerResponse.uint8Array(stored.body, {
        status: stored.status,
        contentType: stored.contentType,
        headers: { [REPLAYED_HEADER]: "true" }
      })

/**
 * A failure that rolls the transaction back, carrying what to do next out of
 * it. Equal and hashed by reference: rolling back combines causes, which
 * hashes their errors, and a handler's failure can hold the request with its
 * parsed body (the fuzz test's 5,000-level JSON overflowed the stack hashing
 * it).
 */
abstract class Rollback {
  [Hash.symbol](): number {
    return Hash.random(this)
  }
  [Equal.symbol](that: unknown): boolean {
    return this === that
  }
}

/** A response sent as it is, its transaction rolled back (nothing stored, nothing changed). */
class NotStored extends Rollback {
  readonly response: HttpServerResponse.HttpServerResponse
  constructor(response: HttpServerResponse.HttpServerResponse) {
    super()
    this.response = response
  }
}

/** The handler failed (its transaction rolled back): the cause goes on, as it is, to the error shaping. */
class HandlerFailed extends Rollback {
  readonly cause: Cause.Cause<unknown>
  constructor(cause: Cause.Cause<unknown>) {
    super()
    this.cause = cause
  }
}

/** A live response was stored by a transaction that committed after this one's claim: claim again. */
class StoredMeanwhile extends Rollback {}

/** The Idempotency-Key service (D19). */
export class Idempotency extends Context.Service<
  Idempotency,
  {
    /**
     * Runs `handle` (the whole HTTP handling of `request`: authentication,
     * decoding, the operation, its response) under D19 when `request` carries a
     * valid `Idempotency-Key` and falls under it; else runs it as it is.
     * Fails with what `handle` fails with, and `SqlError` when the claim or the
     * stored response cannot be written (a 503 or 500, not stored).
     */
    readonly around: <E, R>(
      request: HttpServerRequest.HttpServerRequest,
      route: string | undefined,
      handle: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
    ) => Effect.Effect<HttpServerResponse.HttpServerResponse, E | SqlError.SqlError, R>
    /** Deletes at most `limit` expired responses (the worker role's sweep); returns how many. */
    readonly sweep: (limit: number) => Effect.Effect<number, SqlError.SqlError>
  }
>()("parley/Idempotency") {
  /** The service on PostgreSQL. Requires `IdempotencyRepo`, `Admin` (the API-key check: O6, "Errors" 401) and `PgClient`. */
  static readonly layerNoDeps = Layer.effect(
    Idempotency,
    Effect.gen(function* () {
      const repo = yield* IdempotencyRepo
      const admin = yield* Admin
      const sql = yield* PgClient.PgClient
      // The API key as the Authorization middleware reads it (an HTTP bearer scheme reads the request only).
      const credential = HttpApiBuilder.securityDecode(Authorization.security.apiKey) as Effect.Effect<
        Redacted.Redacted<string>,
        never,
        HttpServerRequest.HttpServerRequest
      >

      /** A stored response sent again when `fingerprint` is the request's, else 422 (D19). */
      const responseFor = (stored: StoredResponse, fingerprint: Uint8Array) =>
        Buffer.from(stored.fingerprint).equals(fingerprint)
          ? replay(stored)
          : detailResponse(422, idempotencyDetails.differentRequest)

      /** D19 for a route of {@link statementStoredRoutes}: its statement claims and stores; see the module docs. */
      const aroundStatement = <E, R>(
        handle: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>,
        token: string,
        key: string,
        fingerprint: Uint8Array,
        retried = false
      ): Effect.Effect<HttpServerResponse.HttpServerResponse, E | SqlError.SqlError, R> =>
        Effect.gen(function* () {
          const current: IdempotencyRequest["Service"] = { key, fingerprint, outcome: undefined }
          const response = yield* Effect.provideService(handle, IdempotencyRequest, current)
          const outcome = current.outcome
          if (outcome === "in-progress") return inProgress
          if (outcome === "conflict") {
            // Stored meanwhile (the second run replays it) or expired and not swept yet (deleted first).
            if (retried) return yield* Effect.die(new Error("Idempotency-Key conflicted twice"))
            const organizationId = yield* admin.authenticate(token)
            if (organizationId !== undefined) yield* repo.deleteExpired(organizationId, key)
            return yield* aroundStatement(handle, token, key, fingerprint, true)
          }
          if (outcome !== undefined) return responseFor(outcome, fingerprint)
          // 2xx: stored by the statement with its change. Another stored status changed nothing: stored now.
          if (response.status < 300 || !isStoredStatus(response.status)) return response
          const sent = bodyOf(response)
          // The key revoked since the operation ran: nothing to store it for.
          const organizationId = sent === undefined ? undefined : yield* admin.authenticate(token)
          if (sent === undefined || organizationId === undefined) return response
          const before = yield* repo.storeUnchanged(organizationId, key, {
            fingerprint,
            status: response.status,
            ...sent
          })
          return before === undefined ? response : responseFor(before, fingerprint)
        })

      const around = <E, R>(
        request: HttpServerRequest.HttpServerRequest,
        route: string | undefined,
        handle: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
      ): Effect.Effect<HttpServerResponse.HttpServerResponse, E | SqlError.SqlError, R> => {
        const key = request.headers[IDEMPOTENCY_KEY_HEADER]
        if (key === undefined || !isIdempotentOperation(request)) return handle
        if (!isIdempotencyKey(key)) {
          return Effect.succeed(HttpServerResponse.jsonUnsafe({ detail: [invalidKeyIssue] }, { status: 422 }))
        }
        return Effect.gen(function* () {
          const token = Redacted.value(
            yield* Effect.provideService(credential, HttpServerRequest.HttpServerRequest, request)
          )
          const body = yield* Effect.orElseSucceed(request.arrayBuffer, () => new ArrayBuffer(0))
          const fingerprint = fingerprintOf(request.method, request.url, body)
          if (statementStoredRoutes.has(`${request.method} ${route}`)) {
            // Not a live key (no token): the handler responds 401 before any statement of the operation.
            return yield* aroundStatement(handle, token, key, fingerprint)
          }
          const handled = Effect.catchCause(handle, (cause) => Effect.fail(new HandlerFailed(cause)))
          // The key's organization, through the admin domain's API-key check (O6; a dead key is DECISIONS.md "Errors" 401).
          const organizationId = yield* admin.authenticate(token)
          const attempt = sql.withTransaction(
            Effect.gen(function* () {
              // Not a live key: the handler responds 401, never stored.
              if (organizationId === undefined) return yield* Effect.fail(new NotStored(yield* handled))
              const claim = yield* repo.claim(organizationId, key)
              if (!claim.acquired) return yield* Effect.fail(new NotStored(inProgress))
              if (claim.stored !== undefined)
                return yield* Effect.fail(new NotStored(responseFor(claim.stored, fingerprint)))
              const response = yield* handled
              const sent = isStoredStatus(response.status) ? bodyOf(response) : undefined
              if (sent === undefined) return yield* Effect.fail(new NotStored(response))
              if (!(yield* repo.store(organizationId, key, { fingerprint, status: response.status, ...sent }))) {
                return yield* Effect.fail(new StoredMeanwhile())
              }
              return response
            })
          )
          // NotStored: sent as it is. HandlerFailed: the handler's cause, as it is. StoredMeanwhile: claiming
          // again finds that response. (Each rolled its transaction back.)
          const settle: Effect.Effect<HttpServerResponse.HttpServerResponse, unknown, R> = Effect.catch(
            attempt,
            (error: unknown) =>
              error instanceof NotStored
                ? Effect.succeed(error.response)
                : error instanceof HandlerFailed
                  ? Effect.failCause(error.cause)
                  : Effect.fail(error)
          )
          return yield* Effect.catch(settle, (error) =>
            error instanceof StoredMeanwhile
              ? Effect.catch(settle, (again) =>
                  again instanceof StoredMeanwhile
                    ? Effect.die(new Error("Idempotency-Key stored twice"))
                    : Effect.fail(again)
                )
              : Effect.fail(error)
          ) as Effect.Effect<HttpServerResponse.HttpServerResponse, E | SqlError.SqlError, R>
        })
      }

      return Idempotency.of({ around, sweep: repo.sweep })
    })
  )

  /** The service with its repository. Requires `Admin` and `PgClient`. */
  static readonly layer = Idempotency.layerNoDeps.pipe(Layer.provide(IdempotencyRepo.layer))
}

/** Expired responses deleted per statement of a sweep. */
const SWEEP_BATCH = 1_000

/** How often the worker role sweeps expired responses. */
const SWEEP_INTERVAL = Duration.minutes(1)

/**
 * The sweep of expired responses (D19, issue 15: "removed by a sweep in the
 * worker role"): every {@link SWEEP_INTERVAL}, batches of {@link SWEEP_BATCH}
 * until none is left. Responses past `expires_at` are never replayed before
 * they are swept (the claim reads live rows only). Requires `Idempotency`.
 */
export const IdempotencySweeperLive = Layer.effectDiscard(
  Effect.gen(function* () {
    const idempotency = yield* Idempotency
    const sweep = Effect.gen(function* () {
      while ((yield* idempotency.sweep(SWEEP_BATCH)) === SWEEP_BATCH) {}
    }).pipe(
      Effect.withSpan("Idempotency.sweep"),
      Effect.catchCause((cause) => logUnlessOutage("Idempotency-Key sweep failed", cause))
    )
    yield* Effect.forkScoped(Effect.forever(Effect.andThen(Effect.sleep(SWEEP_INTERVAL), sweep)))
  })
)
