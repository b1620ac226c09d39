/**
 * Idempotency-Key (DECISIONS.md D19, issue 15): every POST and PATCH of the
 * conversations and assistants APIs sent with an `Idempotency-Key` runs in one
 * transaction that first claims (organization, key) and last keeps the answer,
 * so a change and its kept answer commit together or not at all (a process
 * killed in between leaves neither, and the retry runs the operation once).
 *
 * - The claim ({@link IdempotencyRepo.claim}) tries an advisory transaction
 *   lock of (organization, key): held by another transaction, in any process,
 *   the answer is 409 `A request with this Idempotency-Key is in progress`.
 * - A kept answer for the key is sent again, status and bytes as kept, with
 *   `Idempotent-Replayed: true`, when the method, path and body (compared as
 *   RFC 8785 canonical JSON, so member order and spacing do not matter) are
 *   those of the first request; else 422 `Idempotency-Key was used with a
 *   different request`. Nothing changes either way.
 * - Answers that did not start the operation are not kept and their
 *   transaction rolls back: 401, 413, 415, 422, 429 and 5xx (and a failure
 *   that escapes the handler). Every other answer is kept 24 hours.
 * - A key that is not 1-255 visible ASCII characters answers 422 at
 *   `["header","idempotency-key"]` before anything runs. A request without the
 *   header, or to another API (admin, health, docs), runs as before.
 */
import * as crypto from "node:crypto"
import { PgClient } from "@effect/sql-pg"
import canonicalize from "canonicalize"
import { Context, Data, Duration, Effect, Layer, Redacted } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import type { SqlError } from "effect/sql"
import { hashToken } from "../Admin/Admin.ts"
import { logUnlessOutage } from "../Database/Health.ts"
import { assistantsBasePath, conversationsBasePath } from "../Domain/BasePaths.ts"
import {
  IDEMPOTENCY_KEY_HEADER,
  idempotencyDetails,
  invalidKeyIssue,
  isIdempotencyKey,
  REPLAYED_HEADER
} from "../Domain/Idempotency.ts"
import { Authorization } from "../Domain/Security.ts"
import { IdempotencyRepo, type KeptAnswer } from "./Repo.ts"

/** Whether `request` falls under D19: a POST or PATCH of the conversations or assistants API. */
const isIdempotentOperation = (request: HttpServerRequest.HttpServerRequest): boolean =>
  (request.method === "POST" || request.method === "PATCH") &&
  (request.url.startsWith(`${conversationsBasePath}/`) || request.url.startsWith(`${assistantsBasePath}/`))

/** Statuses of answers that did not start the operation, never kept (D19). */
const isKeptStatus = (status: number): boolean =>
  status < 500 && status !== 401 && status !== 413 && status !== 415 && status !== 422 && status !== 429

/**
 * The fingerprint of a request (D19: same method, path and body): SHA-256 of
 * the method, the path with its query, and the body as RFC 8785 canonical JSON
 * (its raw bytes when it is not JSON; such a request answers 415 or 422 and is
 * never kept).
 */
const fingerprintOf = (method: string, url: string, body: ArrayBuffer): Uint8Array => {
  const bytes = new Uint8Array(body)
  let canonical: string | undefined
  try {
    canonical = bytes.length === 0 ? "" : canonicalize(JSON.parse(Buffer.from(bytes).toString("utf8")))
  } catch {
    canonical = undefined
  }
  const hash = crypto.createHash("sha256").update(`${method} ${url}\n`, "utf8")
  if (canonical === undefined) hash.update("raw\n").update(bytes)
  else hash.update("json\n").update(canonical, "utf8")
  return hash.digest()
}

/** The bytes and content type of `response`, when its body is held in memory (JSON answers, 204). */
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

/** The kept answer sent again (D19): its status and bytes, `Idempotent-Replayed: true`. */
const replay = (kept: KeptAnswer): HttpServerResponse.HttpServerResponse =>
  kept.body.length === 0 && kept.contentType === ""
    ? HttpServerResponse.empty({ status: kept.status, headers: { [REPLAYED_HEADER]: "true" } })
    : HttpServerResponse.uint8Array(kept.body, {
        status: kept.status,
        contentType: kept.contentType,
        headers: { [REPLAYED_HEADER]: "true" }
      })

const detail = (status: number, text: string) => HttpServerResponse.jsonUnsafe({ detail: text }, { status })

/** An answer sent as it is, its transaction rolled back (nothing kept, nothing changed). */
class Unkept extends Data.TaggedError("Unkept")<{ readonly response: HttpServerResponse.HttpServerResponse }> {}

/** A live answer was kept by a transaction that committed after this one's claim: claim again. */
class KeptMeanwhile extends Data.TaggedError("KeptMeanwhile")<{}> {}

/** The Idempotency-Key service (D19). */
export class Idempotency extends Context.Service<
  Idempotency,
  {
    /**
     * Runs `handle` (the whole HTTP handling of `request`: authentication,
     * decoding, the operation, its answer) under D19 when `request` carries a
     * valid `Idempotency-Key` and falls under it; else runs it as it is.
     * Fails with what `handle` fails with, and `SqlError` when the claim or the
     * kept answer cannot be written (a 503 or 500, not kept).
     */
    readonly around: <E, R>(
      request: HttpServerRequest.HttpServerRequest,
      handle: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
    ) => Effect.Effect<HttpServerResponse.HttpServerResponse, E | SqlError.SqlError, R>
    /** Deletes at most `limit` expired answers (the worker role's sweep); answers how many. */
    readonly sweep: (limit: number) => Effect.Effect<number, SqlError.SqlError>
  }
>()("parley/Idempotency") {
  /** The service on PostgreSQL. Requires `IdempotencyRepo` and `PgClient`. */
  static readonly layerNoDeps = Layer.effect(
    Idempotency,
    Effect.gen(function* () {
      const repo = yield* IdempotencyRepo
      const sql = yield* PgClient.PgClient
      // The API key as the Authorization middleware reads it (an HTTP bearer scheme reads the request only).
      const credential = HttpApiBuilder.securityDecode(Authorization.security.apiKey) as Effect.Effect<
        Redacted.Redacted<string>,
        never,
        HttpServerRequest.HttpServerRequest
      >

      const around = <E, R>(
        request: HttpServerRequest.HttpServerRequest,
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
          const attempt = sql.withTransaction(
            Effect.gen(function* () {
              const claim = token.length === 0 ? undefined : yield* repo.claim(hashToken(token), key)
              // Not a live key: the handler answers 401, never kept.
              if (claim === undefined) return yield* new Unkept({ response: yield* handle })
              if (!claim.acquired) return yield* new Unkept({ response: detail(409, idempotencyDetails.inProgress) })
              if (claim.kept !== undefined) {
                return yield* new Unkept({
                  response: Buffer.from(claim.kept.fingerprint).equals(fingerprint)
                    ? replay(claim.kept)
                    : detail(422, idempotencyDetails.differentRequest)
                })
              }
              const response = yield* handle
              const answer = isKeptStatus(response.status) ? bodyOf(response) : undefined
              if (answer === undefined) return yield* new Unkept({ response })
              if (!(yield* repo.keep(claim.organizationId, key, { fingerprint, status: response.status, ...answer }))) {
                return yield* new KeptMeanwhile()
              }
              return response
            })
          )
          // Unkept: sent as it is (its transaction rolled back). KeptMeanwhile: this transaction
          // rolled back, and claiming again finds that answer.
          const settle = Effect.catch(attempt, (error) =>
            error instanceof Unkept ? Effect.succeed(error.response) : Effect.fail(error)
          )
          return yield* Effect.catch(settle, (error) =>
            error instanceof KeptMeanwhile
              ? Effect.catch(settle, (again) =>
                  again instanceof KeptMeanwhile
                    ? Effect.die(new Error("Idempotency-Key kept twice"))
                    : Effect.fail(again)
                )
              : Effect.fail(error)
          ) as Effect.Effect<HttpServerResponse.HttpServerResponse, E | SqlError.SqlError, R>
        })
      }

      return Idempotency.of({ around, sweep: repo.sweep })
    })
  )

  /** The service with its repository. Requires `PgClient`. */
  static readonly layer = Idempotency.layerNoDeps.pipe(Layer.provide(IdempotencyRepo.layer))
}

/** Expired answers deleted per statement of a sweep. */
const SWEEP_BATCH = 1_000

/** How often the worker role sweeps expired answers. */
const SWEEP_INTERVAL = Duration.minutes(1)

/**
 * The sweep of expired answers (D19, issue 15: "removed by a sweep in the
 * worker role"): every {@link SWEEP_INTERVAL}, batches of {@link SWEEP_BATCH}
 * until none is left. Answers past `expires_at` are never replayed before
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
