/**
 * The HTTP server (O4, "Errors"): the `ParleyApi` routes with their handlers and
 * middleware, `/healthz`, `/readyz`, `/openapi.json`, `/docs`, and one
 * router-level middleware that gives every failure outside the handlers the
 * `{"detail": ...}` form: 413 over `MAX_BODY_BYTES` (checked before reading),
 * 415 for bodies that are not JSON, 404 for unknown routes, 503 with
 * `Retry-After: 1` while the database cannot be reached (O9) or when it refused
 * the request's work for now (a lock past `DATABASE_LOCK_TIMEOUT`, a deadlock:
 * `isContention`), 500 for defects (cause logged, never sent).
 */
import * as crypto from "node:crypto"
import { createServer } from "node:http"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { ByteSize, Cause, Context, Duration, Effect, Layer, Redacted, Ref, Schema, type Types } from "effect"
import {
  FindMyWay,
  HttpEffect,
  HttpMethod,
  HttpMiddleware,
  HttpRouter,
  HttpServer,
  HttpServerError,
  HttpServerRequest,
  HttpServerResponse
} from "effect/http"
import { HttpApi, HttpApiBuilder, type HttpApiEndpoint, HttpApiError } from "effect/http-api"
import { Admin } from "./Admin/Admin.ts"
import { AdminHttp } from "./Admin/Http.ts"
import { ParleyApi } from "./Api.ts"
import { AssistantsAdminHttp, AssistantsHttp } from "./Assistants/Http.ts"
import { AppConfig } from "./Config.ts"
import * as Database from "./Database/Database.ts"
import { DatabaseHealth, DatabaseTimeout, isContention } from "./Database/Health.ts"
import { adminBasePath, isOrganizationApiPath } from "./Domain/BasePaths.ts"
import { transportDetails, Unauthorized, ValidationFailed, type ValidationIssue } from "./Domain/Errors.ts"
import { REPLAYED_HEADER } from "./Domain/Idempotency.ts"
import { detailResponse } from "./Domain/JsonResponse.ts"
import { isStorableString, STRING_INVALID_MESSAGE, unstorableStringPaths } from "./Domain/Limits.ts"
import { CurrentOrganization } from "./Domain/Organization.ts"
import { AdminAuthorization, Authorization, ValidationErrors } from "./Domain/Security.ts"
import { dedupeIssues, validationIssues } from "./Domain/Validation.ts"
import { ErasuresHttp } from "./Erasures/Http.ts"
import { EvaluationsHttp } from "./Evaluations/Http.ts"
import { ExportHttp } from "./Export/Http.ts"
import { Idempotency } from "./Idempotency/Idempotency.ts"
import { IngestHttp } from "./Ingest/Http.ts"
import { MessagesHttp } from "./Messages/Http.ts"
import { RateLimiter, rateLimitHeaderNames, type Verdict } from "./RateLimits/RateLimiter.ts"
import { ReferencePageRoutes, referencePaths } from "./ReferencePage.ts"
import { RepliesHttp } from "./Replies/Http.ts"
import { SessionsHttp } from "./Sessions/Http.ts"
import { Ids } from "./Shared/Ids.ts"
import * as Metrics from "./Telemetry/Metrics.ts"
import { AppsHttp } from "./Webhooks/Http.ts"

/** The `RateLimit-*` headers of a response to a limited organization (D20). */
const rateLimitHeaders = (verdict: Verdict): Record<string, string> => ({
  [rateLimitHeaderNames.limit]: String(verdict.limit),
  [rateLimitHeaderNames.remaining]: String(verdict.remaining),
  [rateLimitHeaderNames.reset]: String(verdict.reset)
})

/** D20: the 429 `Rate limit exceeded` of a refused request, with `Retry-After` (whole seconds) and the `RateLimit-*` headers. */
const rateLimitedResponse = (verdict: Verdict) =>
  detailResponse(429, transportDetails.rateLimited, {
    "retry-after": String(verdict.retryAfter),
    ...rateLimitHeaders(verdict)
  })

/**
 * Bearer API key -> `CurrentOrganization`; 401 for a missing, unknown, revoked
 * or expired token. Then the organization's rate limit (D20): over it, 429
 * `Rate limit exceeded` with `Retry-After`; every response to a limited
 * organization carries the `RateLimit-*` headers, errors included. The
 * request's `Authorization` header goes to the limiter, which remembers a
 * refused key (refused from memory by {@link ErrorShaping} until its refusal
 * ends, issue 38 item 4) and forgets it at its first 401.
 */
const AuthorizationLive = Layer.effect(
  Authorization,
  Effect.gen(function* () {
    const admin = yield* Admin
    const limiter = yield* RateLimiter
    return Authorization.of({
      apiKey: Effect.fnUntraced(function* (httpEffect, { credential }) {
        const authorization = (yield* HttpServerRequest.HttpServerRequest).headers.authorization
        const organizationId = yield* admin.authenticate(Redacted.value(credential))
        if (organizationId === undefined) {
          limiter.forget(authorization)
          return yield* new Unauthorized()
        }
        const verdict = yield* Effect.orDie(limiter.take(organizationId, authorization))
        if (verdict !== undefined) {
          if (!verdict.allowed) return rateLimitedResponse(verdict)
          const headers = rateLimitHeaders(verdict)
          yield* HttpEffect.appendPreResponseHandler((_, response) =>
            Effect.succeed(HttpServerResponse.setHeaders(response, headers))
          )
        }
        return yield* Effect.provideService(httpEffect, CurrentOrganization, { id: organizationId })
      })
    })
  })
)

const sameSecret = (given: string, expected: string): boolean => {
  const a = crypto.createHash("sha256").update(given).digest()
  const b = crypto.createHash("sha256").update(expected).digest()
  return crypto.timingSafeEqual(a, b)
}

/** Bearer `ADMIN_TOKEN`, compared in constant time; 401 for everything when it is unset (O6). */
const AdminAuthorizationLive = Layer.effect(
  AdminAuthorization,
  Effect.gen(function* () {
    const config = yield* AppConfig
    const expected = config.adminToken === undefined ? undefined : Redacted.value(config.adminToken)
    return AdminAuthorization.of({
      adminToken: Effect.fnUntraced(function* (httpEffect, { credential }) {
        if (expected === undefined || expected.length === 0 || !sameSecret(Redacted.value(credential), expected)) {
          return yield* new Unauthorized()
        }
        return yield* httpEffect
      })
    })
  })
)

const locationOf = { Payload: "body", Params: "path", Query: "query", Headers: "header" } as const

const stringInvalid = (loc: ReadonlyArray<string | number>): ValidationIssue => ({
  loc,
  msg: STRING_INVALID_MESSAGE,
  type: "string_invalid"
})

/** The bytes of `\u` in UTF-8. */
const ESCAPE = Buffer.from("\\u")

/**
 * D18: the strings of a request's path parameters and query (names and
 * values) that storage cannot hold (a NUL or a lone surrogate), as validation
 * entries. Synchronous: it runs on every request.
 */
const unstorableParams = (
  params: Readonly<Record<string, string | undefined>>,
  query: Readonly<Record<string, string | ReadonlyArray<string>>>
): Array<ValidationIssue> => {
  const issues: Array<ValidationIssue> = []
  for (const name in params) {
    const value = params[name]
    if (value !== undefined && !isStorableString(value)) issues.push(stringInvalid(["path", name]))
  }
  for (const name in query) {
    const value = query[name]!
    if (
      !isStorableString(name) ||
      (typeof value === "string" ? !isStorableString(value) : !value.every(isStorableString))
    ) {
      issues.push(stringInvalid(["query", name]))
    }
  }
  return issues
}

/**
 * D18: the strings (keys included) of a JSON body that storage cannot hold. A
 * JSON text can carry a NUL or a lone surrogate only as a `\u` escape (raw
 * control characters are invalid JSON, and UTF-8 has no lone surrogates), so
 * the body is parsed a second time only when its bytes hold one: ordinary
 * requests pay one byte search (`npm run bench`, messages).
 */
const unstorableBody = (body: ArrayBuffer): Array<ValidationIssue> => {
  const bytes = Buffer.from(body)
  if (bytes.indexOf(ESCAPE) === -1) return []
  let parsed: unknown
  try {
    parsed = JSON.parse(bytes.toString("utf8"))
  } catch {
    return [] // Malformed JSON: decoding reports it.
  }
  return unstorableStringPaths(parsed).map((path) => stringInvalid(["body", ...path]))
}

/** Every schema problem of a request's params, query and JSON body, for a complete 422 (Errors). */
const schemaIssues = (endpoint: HttpApiEndpoint.Top) =>
  Effect.gen(function* () {
    const request = yield* HttpServerRequest.HttpServerRequest
    const route = yield* HttpRouter.RouteContext
    const query = yield* HttpServerRequest.ParsedSearchParams
    const issues: Array<ValidationIssue> = []
    const check = (schema: Schema.Top | undefined, input: unknown, location: string) => {
      if (schema === undefined) return
      const exit = Schema.decodeUnknownExit(schema as Schema.Codec<unknown, unknown>, { errors: "all" })(input)
      if (exit._tag === "Success") return
      const error = Cause.findErrorOption(exit.cause)
      if (error._tag === "Some" && Schema.isSchemaError(error.value)) {
        issues.push(...validationIssues(error.value.issue, [location]))
      }
    }
    check(endpoint.params, route.params, "path")
    check(endpoint.query === undefined ? undefined : Schema.toCodecArrayFromSingle(endpoint.query), query, "query")
    const json = endpoint.payload.get("application/json")
    if (json !== undefined && HttpMethod.hasBody(request.method)) {
      const text = yield* Effect.orElseSucceed(request.text, () => "")
      try {
        check(Schema.Union(json.schemas), text === "" ? undefined : JSON.parse(text), "body")
      } catch {}
    }
    return issues
  })

/** Request decoding failures -> 422 with every problem (Errors); an empty body is `["body"]` missing. */
const schemaFailure = (
  error: HttpApiError.HttpApiSchemaError
): Effect.Effect<never, ValidationFailed | HttpApiError.HttpApiSchemaError, HttpServerRequest.HttpServerRequest> => {
  if (error.kind === "Body" || error.kind === "ResponseHeaders") return Effect.fail(error)
  const issues: Array<ValidationIssue> = validationIssues(error.cause.issue, [locationOf[error.kind]])
  if (error.kind !== "Payload" || issues.length !== 1 || issues[0]!.loc.length !== 1) {
    return Effect.fail(new ValidationFailed({ detail: issues }))
  }
  return Effect.gen(function* () {
    const request = yield* HttpServerRequest.HttpServerRequest
    const text = yield* Effect.orElseSucceed(request.text, () => "")
    return yield* new ValidationFailed({
      detail: text.trim() === "" ? [{ loc: ["body"], msg: "Field required", type: "missing" }] : issues
    })
  })
}

/**
 * Every request's input checks (DECISIONS.md "Errors", D18): strings storage
 * cannot hold are refused before decoding, with the schemas' own problems of
 * the same request; decoding failures become 422 with every problem.
 */
const ValidationErrorsLive = Layer.succeed(ValidationErrors)((httpEffect, { endpoint }) =>
  Effect.withFiber((fiber) => {
    const request = Context.getUnsafe(fiber.context, HttpServerRequest.HttpServerRequest)
    const params = unstorableParams(
      Context.getUnsafe(fiber.context, HttpRouter.RouteContext).params,
      Context.getUnsafe(fiber.context, HttpServerRequest.ParsedSearchParams)
    )
    const refuse = (unstorable: Array<ValidationIssue>) =>
      Effect.flatMap(schemaIssues(endpoint), (issues) =>
        Effect.fail(new ValidationFailed({ detail: dedupeIssues([...unstorable, ...issues]) }))
      )
    const decode = Effect.catch(httpEffect, (error) =>
      HttpApiError.HttpApiSchemaError.is(error)
        ? (schemaFailure(error) as Effect.Effect<
            never,
            ValidationFailed | Types.unhandled,
            HttpServerRequest.HttpServerRequest
          >)
        : Effect.fail(error)
    )
    if (!HttpMethod.hasBody(request.method)) return params.length > 0 ? refuse(params) : decode
    return Effect.flatMap(
      Effect.orElseSucceed(request.arrayBuffer, () => new ArrayBuffer(0)),
      (body) => {
        const unstorable = [...params, ...unstorableBody(body)]
        return unstorable.length > 0 ? refuse(unstorable) : decode
      }
    )
  })
)

const isBodyTooLarge = (error: unknown) =>
  HttpServerError.isHttpServerError(error) &&
  error.reason._tag === "RequestParseError" &&
  error.reason.reason === "BodyTooLarge"

/**
 * Whether the path of `url` percent-decodes to text: an encoded NUL decodes
 * (and is refused by the validation middleware), but a percent-encoded lone
 * surrogate or other ill-formed UTF-8 does not, and no route can match it.
 */
const isDecodablePath = (url: string): boolean => {
  const end = url.indexOf("?")
  try {
    decodeURIComponent(end === -1 ? url : url.slice(0, end))
    return true
  } catch {
    return false
  }
}

/** D18: a path that is not percent-encoded UTF-8 (an encoded lone surrogate) is refused like one decoded. */
const undecodablePath = HttpServerResponse.jsonUnsafe(
  { detail: [{ loc: ["path"], msg: STRING_INVALID_MESSAGE, type: "string_invalid" }] },
  { status: 422 }
)

/** O9: the response while the database cannot be reached; clients retry 5xx after `Retry-After`. */
const unavailable = detailResponse(503, transportDetails.unavailable, { "retry-after": "1" })

/** Maps a failure that escaped the handlers to its `{detail}` response (see module docs). */
const shapeFailure = (
  health: typeof DatabaseHealth.Service,
  request: HttpServerRequest.HttpServerRequest,
  cause: Cause.Cause<unknown>
) => {
  const failure = Cause.findErrorOption(cause)
  if (failure._tag === "Some" && HttpServerError.isHttpServerError(failure.value)) {
    if (failure.value.reason._tag === "RouteNotFound") {
      return Effect.succeed(isDecodablePath(request.url) ? detailResponse(404, "Not Found") : undecodablePath)
    }
    if (isBodyTooLarge(failure.value)) return Effect.succeed(detailResponse(413, transportDetails.tooLarge))
  }
  const defect = Cause.findDefect(cause)
  if (defect._tag === "Success" && isBodyTooLarge(defect.success)) {
    return Effect.succeed(detailResponse(413, transportDetails.tooLarge))
  }
  if (Cause.hasInterruptsOnly(cause)) return Effect.failCause(cause)
  // O8: with the request id (annotated for the whole request) the line leads to the request.
  const annotated = Effect.annotateLogs({
    "http.request.method": request.method,
    "http.route": routeOf(request) ?? "unmatched"
  })
  return Effect.flatMap(health.isOutage(cause), (outage) =>
    outage
      ? Effect.succeed(unavailable)
      : isContention(cause)
        ? Effect.logWarning(
            "Request refused by the database for now (lock, timeout or conflict); answered 503",
            cause
          ).pipe(annotated, Effect.as(unavailable))
        : Effect.logError("Unhandled error in request", cause).pipe(
            annotated,
            Effect.as(detailResponse(500, transportDetails.internal))
          )
  )
}

const unsupportedMediaType = (response: HttpServerResponse.HttpServerResponse) =>
  response.status === 415 ? detailResponse(415, transportDetails.unsupportedMediaType) : response

/** Headers browsers may read from Parley's responses (issue 15): request ids, retry delays, rate limits, replays. */
const CORS_EXPOSED_HEADERS = ["x-request-id", "retry-after", ...Object.values(rateLimitHeaderNames), REPLAYED_HEADER]

/**
 * CORS for browser integrations (issue 15): with `CORS_ORIGINS` set, every
 * response carries `Access-Control-Allow-Origin` for an allowed `Origin` and
 * exposes {@link CORS_EXPOSED_HEADERS}; a preflight `OPTIONS` gets 204
 * with the methods and the requested headers allowed (max age 10 minutes).
 * Unset: no CORS header, and `OPTIONS` is routed as any method (404/405).
 */
const corsOf = (origins: ReadonlyArray<string>) =>
  origins.length === 0
    ? <E, R>(self: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) => self
    : HttpMiddleware.cors({
        allowedOrigins: origins.includes("*") ? ["*"] : (origin: string) => origins.includes(origin),
        exposedHeaders: CORS_EXPOSED_HEADERS,
        maxAge: 600
      })

/**
 * The router-level error shaping described in the module docs, CORS ({@link corsOf}), Idempotency-Key
 * around every handler (D19, `Idempotency.around`: after the 413 check, inside
 * the error shaping, so a stored response is the one sent), 503 while the
 * database is unreachable (O9) and for an API request with no response within
 * `REQUEST_TIMEOUT` ({@link boundedRequest}), the request id of every response, log line and
 * server span (O8, {@link requestIdOf}), and the
 * `http.server.request.duration` metric of every request (on every request:
 * kept lean). A request the rate limiter refuses from memory (D20, issue 38
 * item 4, `RateLimiter.refusalOf`) gets its 429 here, after the 413 check and
 * before routing, authentication, the body and Idempotency-Key: no database
 * round trip, and no server span ({@link ServerSpansLive}).
 */
const ErrorShaping = HttpRouter.middleware(
  Effect.gen(function* () {
    const config = yield* AppConfig
    const health = yield* DatabaseHealth
    const draining = yield* Draining
    const { newId } = yield* Ids
    const idempotency = yield* Idempotency
    const limiter = yield* RateLimiter
    const maxBytes = ByteSize.bytes(config.maxBodyBytes)
    const cors = corsOf(config.corsOrigins)
    const tooLarge = Effect.succeed(detailResponse(413, transportDetails.tooLarge, { connection: "close" }))
    const bounded = boundedRequest(health, config.requestTimeout)
    return (httpEffect) =>
      cors(
        Effect.flatMap(Effect.service(HttpServerRequest.HttpServerRequest), (request) => {
          const started = performance.now()
          const route = routeOf(request)
          const length = request.headers["content-length"]
          const refusal = limiter.refusalOf(request)
          const response =
            length !== undefined && Number(length) > config.maxBodyBytes
              ? tooLarge
              : refusal !== undefined
                ? Effect.as(Effect.sleep(Duration.millis(refusal.holdMs)), rateLimitedResponse(refusal.verdict))
                : Effect.provideService(
                    bounded(request.url, idempotency.around(request, route, httpEffect)),
                    HttpServerRequest.MaxBodySize,
                    maxBytes
                  ).pipe(
                    Effect.map(unsupportedMediaType),
                    Effect.catchCause((cause) => shapeFailure(health, request, cause))
                  )
          const requestId = requestIdOf(request.headers["x-request-id"], newId)
          return Effect.map(response, (sent) =>
            HttpServerResponse.setHeaders(
              sent,
              Ref.getUnsafe(draining)
                ? { "x-request-id": requestId, connection: "close" }
                : { "x-request-id": requestId }
            )
          ).pipe(
            Effect.tap((sent) =>
              Metrics.record(Metrics.requestDuration, (performance.now() - started) / 1000, {
                "http.request.method": request.method,
                "http.route": route ?? "unmatched",
                "http.response.status_code": sent.status
              })
            ),
            Effect.tap(Effect.annotateCurrentSpan("parley.request_id", requestId)),
            Effect.annotateLogs("request_id", requestId)
          )
        })
      )
  }),
  { global: true }
)

/**
 * The bound of an API request on the database (issue 38 item 1, O9): a
 * request to the conversations, assistants or admin API that is not done
 * within `timeout` is abandoned (its statements cancelled) and fails with
 * {@link DatabaseTimeout}, which starts an outage (one WARN) and responds 503
 * with `Retry-After: 1`; while an outage is under way such a request responds
 * 503 at once, without waiting for the database. A write may still commit after
 * its request was abandoned (the database applies what it received when it
 * responds again): a retry with the same Idempotency-Key (D19) then gets the
 * stored response instead of writing twice. Health, the document and the
 * reference page are not bounded.
 */
const boundedRequest =
  (health: typeof DatabaseHealth.Service, timeout: Duration.Duration) =>
  <E, R>(
    url: string,
    handled: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
  ): Effect.Effect<HttpServerResponse.HttpServerResponse, E | DatabaseTimeout, R> =>
    !isOrganizationApiPath(url) && !url.startsWith(`${adminBasePath}/`)
      ? handled
      : Effect.flatMap(health.down, (down) =>
          down
            ? Effect.succeed(unavailable)
            : Effect.timeoutOrElse(handled, {
                duration: timeout,
                orElse: () => Effect.fail(new DatabaseTimeout({ timeout }))
              })
        )

/** A request id as clients may send it (O8): 1-200 visible ASCII characters. */
const CLIENT_REQUEST_ID = /^[\x21-\x7e]{1,200}$/

/** O8: the request's own `X-Request-Id` when it is 1-200 visible ASCII characters, else a new UUIDv7 of `newId`. */
const requestIdOf = (header: string | undefined, newId: () => string): string =>
  header !== undefined && CLIENT_REQUEST_ID.test(header) ? header : newId()

/** The body of a `/healthz` 503: no path or reason of the server's (the log has them). */
const LOST_DETAIL = "Embedded PostgreSQL could not be started again; see the log"

/**
 * `/healthz` (process alive: 200 `{"status":"ok"}`, or 503 `{"detail": ...}`
 * once the process has lost its database for good, `DatabaseLocation.lost`,
 * issue 38 item 2, so a liveness probe restarts it; a read of a reference, no
 * I/O) and `/readyz` (database reachable, migrations applied) (O4).
 * Requires `DatabaseLocation`.
 */
const HealthRoutes = HttpRouter.use(
  Effect.fnUntraced(function* (router) {
    const { lost } = yield* Database.DatabaseLocation
    const ok = HttpServerResponse.jsonUnsafe({ status: "ok" })
    const down = HttpServerResponse.jsonUnsafe({ detail: LOST_DETAIL }, { status: 503 })
    yield* router.add(
      "GET",
      "/healthz",
      Effect.map(lost, (reason) => (reason === undefined ? ok : down))
    )
    yield* router.add(
      "GET",
      "/readyz",
      Effect.map(Database.isReady, (ready) =>
        ready
          ? HttpServerResponse.jsonUnsafe({ status: "ready" })
          : HttpServerResponse.jsonUnsafe({ detail: "Database unavailable or migrations pending" }, { status: 503 })
      )
    )
  })
)

/** Every route of the API with its middleware; requires the domain services and `AppConfig`. */
const ApiRoutes = HttpApiBuilder.layer(ParleyApi, { openapiPath: "/openapi.json" }).pipe(
  Layer.provide([
    SessionsHttp,
    MessagesHttp,
    RepliesHttp,
    IngestHttp,
    AdminHttp,
    AssistantsHttp,
    AssistantsAdminHttp,
    ExportHttp,
    AppsHttp,
    ErasuresHttp,
    EvaluationsHttp
  ]),
  Layer.provide([AuthorizationLive, AdminAuthorizationLive, ValidationErrorsLive])
)

/** All routes: the API, health, docs and the error shaping. */
export const AllRoutes = Layer.mergeAll(ApiRoutes, HealthRoutes, ReferencePageRoutes, ErrorShaping)

/**
 * The route template of a request (`/conversations/v2/api/v1/sessions/:session_id`),
 * or undefined for a path no route matches. Built once from the API's endpoints
 * and the health routes.
 */
const routeTemplateOf: (method: string, url: string) => string | undefined = (() => {
  const router = FindMyWay.make<string>({ maxParamLength: 1024 })
  HttpApi.reflect(ParleyApi, {
    onGroup: () => undefined,
    onEndpoint: ({ endpoint }) => router.on(endpoint.method, endpoint.path as `/${string}`, endpoint.path)
  })
  for (const path of ["/healthz", "/readyz", "/openapi.json", ...referencePaths] as const) router.on("GET", path, path)
  return (method, url) => router.find(method, url)?.handler
})()

/** {@link routeTemplateOf} of a request, looked up where needed (about 0.5 µs a lookup, 0.2% of a message create's CPU time). */
const routeOf = (request: HttpServerRequest.HttpServerRequest): string | undefined =>
  routeTemplateOf(request.method, request.url)

/**
 * Server spans named by the HTTP semantic conventions: `{method} {route}`
 * (`POST /conversations/v2/api/v1/sessions/:session_id/messages`), the method
 * alone when no route matches. The span also carries `http.route` and
 * `http.response.status_code` (issue 8).
 */
const ServerSpanNamesLive = Layer.succeed(HttpMiddleware.SpanNameGenerator)((request) => {
  const route = routeOf(request)
  return route === undefined ? request.method : `${request.method} ${route}`
})

/**
 * No server span for a request the rate limiter refuses from memory (D20,
 * issue 38 item 4): the tracer asks `RateLimiter.refusalOf` before it starts
 * the span, and gets the answer {@link ErrorShaping} acts on. Requires `RateLimiter`.
 */
const RefusalsUntracedLive = Layer.effect(
  HttpMiddleware.TracerDisabledWhen,
  Effect.gen(function* () {
    const limiter = yield* RateLimiter
    return (request: HttpServerRequest.HttpServerRequest) => limiter.refusalOf(request) !== undefined
  })
)

/** How the server traces requests: {@link ServerSpanNamesLive} and {@link RefusalsUntracedLive}. Requires `RateLimiter`. */
export const ServerSpansLive = Layer.mergeAll(ServerSpanNamesLive, RefusalsUntracedLive)

/**
 * Options of `HttpRouter.serve`: no built-in per-request logger (it halves
 * light-endpoint throughput), and path parameters up to 1024 characters so an
 * overlong id reaches validation (422) instead of missing the route.
 */
export const serveOptions = { disableLogger: true, routerConfig: { maxParamLength: 1024 } } as const

/**
 * How long kept-alive connections that are idle when the shutdown starts stay
 * open (ms, issue 38 item 5, O5): a request sent on one meanwhile gets its
 * response with `Connection: close`; those still idle then are closed.
 */
const IDLE_CONNECTIONS_GRACE_MS = 1_000

/**
 * A Node HTTP server: keep-alive longer than common load balancers' idle
 * timeouts, and request heads up to 128 KiB so a batch export of 1000 ids in
 * the query string (D14) fits. Requests its parser refuses get a response with
 * a request id of `newId`. On shutdown it stops accepting at once and keeps
 * idle kept-alive connections open {@link IDLE_CONNECTIONS_GRACE_MS}.
 */
export const createHttpServer = (newId: () => string) => {
  const server = createServer({ keepAliveTimeout: 65_000, maxHeaderSize: 128 * 1024 })
  // Node's close() destroys idle kept-alive connections at once, and a request a client sent on one
  // a moment before got a reset (issue 38 item 5). They stay open a while, so what arrives on them
  // gets a response with `Connection: close` (Draining) and ends them.
  const closeIdleConnections = server.closeIdleConnections.bind(server)
  server.closeIdleConnections = () => {
    setTimeout(closeIdleConnections, IDLE_CONNECTIONS_GRACE_MS).unref()
  }
  server.on("clientError", (error: NodeJS.ErrnoException, socket: import("node:stream").Duplex) =>
    respondToUnparsable(error, socket, newId)
  )
  return server
}

/** Requests Node's parser refuses before Parley sees them: status, reason phrase and `detail`. */
const unparsable: Record<string, readonly [number, string, string]> = {
  HPE_HEADER_OVERFLOW: [431, "Request Header Fields Too Large", "Request header fields too large"],
  ERR_HTTP_REQUEST_TIMEOUT: [408, "Request Timeout", "Request timeout"]
}

/**
 * Responds to a request Node's HTTP parser refused (a head over 128 KiB, a
 * malformed request line) with the `{detail}` body and request id every other
 * response has ("Errors", O8), instead of Node's bare status line.
 */
const respondToUnparsable = (
  error: NodeJS.ErrnoException,
  socket: import("node:stream").Duplex,
  newId: () => string
) => {
  if (error.code === "ECONNRESET" || !socket.writable) {
    socket.destroy()
    return
  }
  const [status, reason, text] = unparsable[error.code ?? ""] ?? [400, "Bad Request", "Bad request"]
  const body = JSON.stringify({ detail: text })
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n` +
      `x-request-id: ${newId()}\r\nconnection: close\r\n\r\n${body}`
  )
}

/**
 * Whether the server is shutting down (O5): from then on every response
 * carries `Connection: close`, so kept-alive connections end after their
 * current request and the server's close completes as soon as the requests in
 * flight have their responses (Node's `server.close()` only drops idle connections).
 */
export class Draining extends Context.Service<Draining, Ref.Ref<boolean>>()("parley/Http/Draining") {
  /** Not draining until the server's scope starts closing ({@link DrainOnShutdown}). */
  static readonly layer = Layer.effect(Draining, Ref.make(false))
}

/**
 * Marks the server as {@link Draining} when its scope closes, before the
 * Node server's close (it is built after the server, so finalized first).
 */
const DrainOnShutdown = Layer.effectDiscard(
  Effect.gen(function* () {
    yield* HttpServer.HttpServer
    const draining = yield* Draining
    yield* Effect.addFinalizer(() => Ref.set(draining, true))
  })
)

/**
 * The listening server on `HOST:PORT` with {@link serveOptions}: every route,
 * or with `PARLEY_ROLE=worker` only the health routes (O1). In-flight requests
 * get up to 10 s on shutdown (O5).
 */
export const ServerLive = Layer.unwrap(
  Effect.gen(function* () {
    const config = yield* AppConfig
    const { newId } = yield* Ids
    // O1: a worker process serves only /healthz and /readyz, for its orchestrator's probes.
    return HttpRouter.serve(
      config.role === "worker" ? Layer.merge(HealthRoutes, ErrorShaping) : AllRoutes,
      serveOptions
    ).pipe(
      Layer.provide(ServerSpansLive),
      Layer.merge(DrainOnShutdown),
      Layer.provide(
        NodeHttpServer.layer(() => createHttpServer(newId), {
          port: config.port,
          host: config.host,
          gracefulShutdownTimeout: "10 seconds"
        })
      ),
      Layer.provide(Draining.layer)
    )
  })
)
