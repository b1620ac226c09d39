/**
 * The HTTP server (O4, "Errors"): the `ParleyApi` routes with their handlers and
 * middleware, `/healthz`, `/readyz`, `/openapi.json`, `/docs`, and one
 * router-level middleware that gives every failure outside the handlers the
 * `{"detail": ...}` form: 413 over `MAX_BODY_BYTES` (checked before reading),
 * 415 for bodies that are not JSON, 404 for unknown routes, 500 for defects
 * (cause logged, never sent).
 */
import * as crypto from "node:crypto"
import { createServer } from "node:http"
import { NodeHttpServer } from "@effect/platform-node"
import { ByteSize, Cause, Effect, Layer, Redacted } from "effect"
import {
  FindMyWay,
  HttpMiddleware,
  HttpRouter,
  HttpServer,
  HttpServerError,
  HttpServerRequest,
  HttpServerResponse
} from "effect/http"
import { HttpApi, HttpApiBuilder, HttpApiMiddleware, HttpApiScalar } from "effect/http-api"
import { Admin } from "./Admin/Admin.ts"
import { AdminHttp } from "./Admin/Http.ts"
import { ParleyApi } from "./Api.ts"
import { AssistantsAdminHttp, AssistantsHttp } from "./Assistants/Http.ts"
import { AppConfig } from "./Config.ts"
import * as Database from "./Database/Database.ts"
import { ExportHttp } from "./Export/Http.ts"
import { IngestHttp } from "./Ingest/Http.ts"
import { Unauthorized, ValidationFailed, type ValidationIssue } from "./Domain/Errors.ts"
import { CurrentOrganization } from "./Domain/Organization.ts"
import { AdminAuthorization, Authorization, ValidationErrors } from "./Domain/Security.ts"
import { validationIssues } from "./Domain/Validation.ts"
import { MessagesHttp } from "./Messages/Http.ts"
import { RepliesHttp } from "./Replies/Http.ts"
import { SessionsHttp } from "./Sessions/Http.ts"
import * as Metrics from "./Telemetry/Metrics.ts"
import { AppsHttp } from "./Webhooks/Http.ts"

/** Bearer API key -> `CurrentOrganization`; 401 for a missing, unknown, revoked or expired token. */
export const AuthorizationLive = Layer.effect(
  Authorization,
  Effect.gen(function* () {
    const admin = yield* Admin
    return Authorization.of({
      bearer: Effect.fnUntraced(function* (httpEffect, { credential }) {
        const organizationId = yield* admin.authenticate(Redacted.value(credential))
        if (organizationId === undefined) return yield* new Unauthorized()
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
export const AdminAuthorizationLive = Layer.effect(
  AdminAuthorization,
  Effect.gen(function* () {
    const config = yield* AppConfig
    const expected = config.adminToken === undefined ? undefined : Redacted.value(config.adminToken)
    return AdminAuthorization.of({
      adminBearer: Effect.fnUntraced(function* (httpEffect, { credential }) {
        if (expected === undefined || expected.length === 0 || !sameSecret(Redacted.value(credential), expected)) {
          return yield* new Unauthorized()
        }
        return yield* httpEffect
      })
    })
  })
)

const locationOf = { Payload: "body", Params: "path", Query: "query", Headers: "header" } as const

/** Request decoding failures -> 422 with every problem (Errors); an empty body is `["body"]` missing. */
export const ValidationErrorsLive = HttpApiMiddleware.layerSchemaErrorTransform(ValidationErrors, (error) => {
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
})

const detail = (status: number, text: string, headers?: Record<string, string>) =>
  HttpServerResponse.jsonUnsafe({ detail: text }, { status, ...(headers ? { headers } : {}) })

const isBodyTooLarge = (error: unknown) =>
  HttpServerError.isHttpServerError(error) &&
  error.reason._tag === "RequestParseError" &&
  error.reason.reason === "BodyTooLarge"

/** Maps a failure that escaped the handlers to its `{detail}` response (see module docs). */
const shapeFailure = (cause: Cause.Cause<unknown>) => {
  const failure = Cause.findErrorOption(cause)
  if (failure._tag === "Some" && HttpServerError.isHttpServerError(failure.value)) {
    if (failure.value.reason._tag === "RouteNotFound") return Effect.succeed(detail(404, "Not Found"))
    if (isBodyTooLarge(failure.value)) return Effect.succeed(detail(413, "Request body too large"))
  }
  const defect = Cause.findDefect(cause)
  if (defect._tag === "Success" && isBodyTooLarge(defect.success)) {
    return Effect.succeed(detail(413, "Request body too large"))
  }
  if (Cause.hasInterruptsOnly(cause)) return Effect.failCause(cause)
  return Effect.logError("Unhandled error in request", cause).pipe(Effect.as(detail(500, "Internal server error")))
}

const unsupportedMediaType = (response: HttpServerResponse.HttpServerResponse) =>
  response.status === 415 ? detail(415, "Content-Type must be application/json") : response

/**
 * The router-level error shaping described in the module docs, and the
 * `http.server.request.duration` metric of every request (on every request:
 * kept lean).
 */
export const ErrorShaping = HttpRouter.middleware(
  Effect.gen(function* () {
    const config = yield* AppConfig
    const maxBytes = ByteSize.bytes(config.maxBodyBytes)
    const tooLarge = Effect.succeed(detail(413, "Request body too large", { connection: "close" }))
    return (httpEffect) =>
      Effect.flatMap(Effect.service(HttpServerRequest.HttpServerRequest), (request) => {
        const started = performance.now()
        const length = request.headers["content-length"]
        const response =
          length !== undefined && Number(length) > config.maxBodyBytes
            ? tooLarge
            : Effect.provideService(httpEffect, HttpServerRequest.MaxBodySize, maxBytes).pipe(
                Effect.map(unsupportedMediaType),
                Effect.catchCause(shapeFailure)
              )
        return Effect.map(response, (sent) =>
          draining.active ? HttpServerResponse.setHeader(sent, "connection", "close") : sent
        ).pipe(
          Effect.tap((sent) =>
            Metrics.record(Metrics.requestDuration, (performance.now() - started) / 1000, {
              "http.request.method": request.method,
              "http.route": routeOf(request) ?? "unmatched",
              "http.response.status_code": sent.status
            })
          )
        )
      })
  }),
  { global: true }
)

/** `/healthz` (process alive) and `/readyz` (database reachable, migrations applied) (O4). */
export const HealthRoutes = HttpRouter.use(
  Effect.fnUntraced(function* (router) {
    yield* router.add("GET", "/healthz", HttpServerResponse.jsonUnsafe({ status: "ok" }))
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
export const ApiRoutes = HttpApiBuilder.layer(ParleyApi, { openapiPath: "/openapi.json" }).pipe(
  Layer.provide([
    SessionsHttp,
    MessagesHttp,
    RepliesHttp,
    IngestHttp,
    AdminHttp,
    AssistantsHttp,
    AssistantsAdminHttp,
    ExportHttp,
    AppsHttp
  ]),
  Layer.provide([AuthorizationLive, AdminAuthorizationLive, ValidationErrorsLive])
)

/** All routes: the API, health, docs and the error shaping. */
export const AllRoutes = Layer.mergeAll(
  ApiRoutes,
  HealthRoutes,
  HttpApiScalar.layer(ParleyApi, { path: "/docs" }),
  ErrorShaping
)

/**
 * The route template of a request (`/conversations/v2/api/v1/sessions/:session_id`),
 * or undefined for a path no route matches. Built once from the API's endpoints
 * and the health routes.
 */
export const routeTemplateOf: (method: string, url: string) => string | undefined = (() => {
  const router = FindMyWay.make<string>({ maxParamLength: 1024 })
  HttpApi.reflect(ParleyApi, {
    onGroup: () => undefined,
    onEndpoint: ({ endpoint }) => router.on(endpoint.method, endpoint.path as `/${string}`, endpoint.path)
  })
  for (const path of ["/healthz", "/readyz", "/openapi.json", "/docs"] as const) router.on("GET", path, path)
  return (method, url) => router.find(method, url)?.handler
})()

/** Route templates of requests already looked up (the server span's name and the request metric both need it). */
const routes = new WeakMap<HttpServerRequest.HttpServerRequest, string | null>()

/** {@link routeTemplateOf} of a request, looked up once per request. */
const routeOf = (request: HttpServerRequest.HttpServerRequest): string | undefined => {
  let route = routes.get(request)
  if (route === undefined) {
    route = routeTemplateOf(request.method, request.url) ?? null
    routes.set(request, route)
  }
  return route ?? undefined
}

/**
 * Server spans named by the HTTP semantic conventions: `{method} {route}`
 * (`POST /conversations/v2/api/v1/sessions/:session_id/messages`), the method
 * alone when no route matches. The span also carries `http.route` and
 * `http.response.status_code` (issue 8).
 */
export const ServerSpanNamesLive = Layer.succeed(HttpMiddleware.SpanNameGenerator)((request) => {
  const route = routeOf(request)
  return route === undefined ? request.method : `${request.method} ${route}`
})

/**
 * Options of `HttpRouter.serve`: no built-in per-request logger (it halves
 * light-endpoint throughput), and path parameters up to 1024 characters so an
 * overlong id reaches validation (422) instead of missing the route.
 */
export const serveOptions = { disableLogger: true, routerConfig: { maxParamLength: 1024 } } as const

/**
 * A Node HTTP server: keep-alive longer than common load balancers' idle
 * timeouts, and request heads up to 128 KiB so a batch export of 1000 ids in
 * the query string (D14) fits.
 */
export const createHttpServer = () => createServer({ keepAliveTimeout: 65_000, maxHeaderSize: 128 * 1024 })

/**
 * Whether the server is shutting down (O5): from then on every response
 * carries `Connection: close`, so kept-alive connections end after their
 * current request and the server's close completes as soon as the requests in
 * flight are answered (Node's `server.close()` only drops idle connections).
 * One HTTP server per process.
 */
export const draining = { active: false }

/**
 * Marks the server as {@link draining} when its scope closes, before the
 * Node server's close (it is built after the server, so finalized first).
 */
export const DrainOnShutdown = Layer.effectDiscard(
  Effect.gen(function* () {
    yield* HttpServer.HttpServer
    draining.active = false
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        draining.active = true
      })
    )
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
    // O1: a worker process answers only /healthz and /readyz, for its orchestrator's probes.
    return HttpRouter.serve(config.role === "worker" ? HealthRoutes : AllRoutes, serveOptions).pipe(
      Layer.provide(ServerSpanNamesLive),
      Layer.merge(DrainOnShutdown),
      Layer.provide(
        NodeHttpServer.layer(createHttpServer, {
          port: config.port,
          host: config.host,
          gracefulShutdownTimeout: "10 seconds"
        })
      )
    )
  })
)
