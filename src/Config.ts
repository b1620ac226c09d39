/**
 * Every environment variable Parley reads (DECISIONS.md O3), decoded once with
 * `effect/Config` into {@link AppConfig}. A bad value stops start-up with one
 * line naming the variable ({@link formatConfigError}).
 */

import type { LogLevel } from "effect"
import { Config, Context, Duration, Effect, Layer, Redacted, Schema } from "effect"

/** A duration written as a number and a unit among `ms`, `s`, `m`, `h` (O3). */
const DurationText = Schema.String.pipe(
  Schema.check(Schema.isPattern(/^\d+(ms|s|m|h)$/, { message: "Expected a duration such as 200ms, 5s, 30m or 2h" }))
)

const unitMillis = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const

/** Parses an O3 duration (`200ms`, `5s`, `30m`, `2h`) into a `Duration`. */
export const parseDuration = (text: string): Duration.Duration => {
  const match = /^(\d+)(ms|s|m|h)$/.exec(text.trim())
  if (match === null) throw new Error(`Invalid duration: ${text}`)
  return Duration.millis(Number(match[1]) * unitMillis[match[2] as keyof typeof unitMillis])
}

const duration = (name: string, fallback: string) =>
  Config.schema(DurationText, name).pipe(Config.withDefault(fallback), Config.map(parseDuration))

const DurationList = Schema.String.pipe(
  Schema.check(
    Schema.isPattern(/^\s*\d+(ms|s|m|h)(\s*,\s*\d+(ms|s|m|h))*\s*$/, {
      message: "Expected a comma list of durations such as 5s,5m,30m"
    })
  )
)

/** A comma list of origins (`https://app.example.com`, `http://localhost:3000`) or `*`. */
const OriginList = Schema.String.pipe(
  Schema.check(
    Schema.isPattern(/^\s*(\*|[a-z][a-z0-9+.-]*:\/\/[^\s,/]+)(\s*,\s*(\*|[a-z][a-z0-9+.-]*:\/\/[^\s,/]+))*\s*$/i, {
      message: "Expected a comma list of origins such as https://app.example.com,http://localhost:3000, or *"
    })
  )
)

const optionalString = (name: string) =>
  Config.String(name).pipe(
    Config.option,
    Config.map((o) => (o._tag === "Some" && o.value.trim() !== "" ? o.value : undefined))
  )

/**
 * A PostgreSQL connection URL (`postgres://user:password@host:5432/database`).
 * The failure message never repeats the value: it may hold a password.
 */
const PostgresUrl = Schema.String.pipe(
  Schema.check(
    Schema.makeFilter<string>(
      (text) => {
        try {
          const url = new URL(text)
          return (url.protocol === "postgres:" || url.protocol === "postgresql:") && url.hostname !== ""
        } catch {
          return false
        }
      },
      { message: "Expected a URL such as postgres://user:password@host:5432/database" }
    )
  )
)

const optionalSecret = (name: string) =>
  Config.Redacted(name).pipe(
    Config.option,
    Config.map((o) => (o._tag === "Some" ? o.value : undefined))
  )

const logLevels = {
  trace: "Trace",
  debug: "Debug",
  info: "Info",
  warn: "Warn",
  warning: "Warn",
  error: "Error",
  fatal: "Fatal",
  none: "None"
} as const satisfies Record<string, LogLevel.LogLevel>

/** The decoded configuration; durations are `Duration`s, sizes bytes. */
export const AppConfigSpec = Config.all({
  port: Config.Port("PORT").pipe(Config.withDefault(8080)),
  host: Config.String("HOST").pipe(Config.withDefault("0.0.0.0")),
  databaseUrl: Config.schema(PostgresUrl, "DATABASE_URL").pipe(
    Config.option,
    Config.map((o) => (o._tag === "Some" && o.value.trim() !== "" ? Redacted.make(o.value) : undefined))
  ),
  dataDir: Config.String("DATA_DIR").pipe(Config.withDefault("./.parley")),
  adminToken: optionalSecret("ADMIN_TOKEN"),
  role: Config.Literals(["api", "worker", "all"], "PARLEY_ROLE").pipe(Config.withDefault("all" as const)),
  logLevel: Config.Literals(Object.keys(logLevels), "LOG_LEVEL").pipe(
    Config.withDefault("info"),
    Config.map((level) => logLevels[level as keyof typeof logLevels])
  ),
  logFormat: Config.Literals(["json", "pretty"], "LOG_FORMAT").pipe(
    Config.option,
    Config.map((o) => (o._tag === "Some" ? o.value : process.stdout.isTTY ? "pretty" : "json"))
  ),
  webhookTimeout: Config.Int("WEBHOOK_TIMEOUT_MS").pipe(Config.withDefault(10_000), Config.map(Duration.millis)),
  webhookRetrySchedule: Config.schema(DurationList, "WEBHOOK_RETRY_SCHEDULE").pipe(
    Config.withDefault("5s,5m,30m,2h,5h,10h,10h"),
    Config.map((text) => text.split(",").map(parseDuration))
  ),
  allowPrivateNetworkTargets: Config.Boolean("ALLOW_PRIVATE_NETWORK_TARGETS").pipe(Config.withDefault(false)),
  /** Browser origins allowed by CORS (issue 15); empty: no CORS headers at all. */
  corsOrigins: Config.schema(OriginList, "CORS_ORIGINS").pipe(
    Config.option,
    Config.map(
      (o): ReadonlyArray<string> => (o._tag === "Some" ? o.value.split(",").map((origin) => origin.trim()) : [])
    )
  ),
  aiProvider: Config.Literals(["echo", "openai", "anthropic"], "AI_PROVIDER").pipe(Config.withDefault("echo" as const)),
  openaiApiKey: optionalSecret("OPENAI_API_KEY"),
  openaiBaseUrl: optionalString("OPENAI_BASE_URL"),
  anthropicApiKey: optionalSecret("ANTHROPIC_API_KEY"),
  aiModel: optionalString("AI_MODEL"),
  otlpEndpoint: optionalString("OTEL_EXPORTER_OTLP_ENDPOINT"),
  serviceName: Config.String("OTEL_SERVICE_NAME").pipe(Config.withDefault("parley")),
  sessionExpirySweepInterval: duration("SESSION_EXPIRY_SWEEP_INTERVAL", "30s"),
  maxBodyBytes: Config.Int("MAX_BODY_BYTES").pipe(Config.withDefault(1_048_576)),
  /** How long opening a connection to PostgreSQL may take (issue 38 item 1). */
  databaseConnectTimeout: duration("DATABASE_CONNECT_TIMEOUT", "5s"),
  /** PostgreSQL `statement_timeout` of the API's and the workers' connections (issue 38 item 1). */
  databaseStatementTimeout: duration("DATABASE_STATEMENT_TIMEOUT", "30s"),
  /** PostgreSQL `lock_timeout` of the API's and the workers' connections (issue 38 item 1). */
  databaseLockTimeout: duration("DATABASE_LOCK_TIMEOUT", "10s"),
  /** An API request not done within it responds 503 (issue 38 item 1, O9). */
  requestTimeout: duration("REQUEST_TIMEOUT", "30s")
})

/** The decoded configuration's shape. */
export type AppConfigShape = Config.Success<typeof AppConfigSpec>

/** The decoded configuration as a service, read once at start-up (O3). */
export class AppConfig extends Context.Service<AppConfig, AppConfigShape>()("parley/AppConfig") {
  /** Decodes the environment; fails with `ConfigError` on a bad value. */
  static readonly layer = Layer.effect(AppConfig, AppConfigSpec)

  /** A fixed configuration, for tests: the defaults overridden by `overrides`. */
  static readonly layerWith = (overrides: Partial<AppConfigShape>) =>
    Layer.effect(
      AppConfig,
      Effect.map(AppConfigSpec, (config) => ({ ...config, ...overrides }))
    )
}

/**
 * One line naming the variable and the problem, for a `ConfigError`'s message
 * (`Invalid configuration: PORT: Expected ...`).
 */
export const formatConfigError = (message: string): string => {
  const match = /^(?:SchemaError\()?([\s\S]*?)\n\s*at \["?([A-Z0-9_]+)"?\]\)?$/.exec(message.trim())
  if (match === null) return `Invalid configuration: ${message.replace(/\s+/g, " ")}`
  return `Invalid configuration: ${match[2]}: ${match[1]!.replace(/\s+/g, " ")}`
}
