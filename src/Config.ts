/**
 * Every environment variable Parley reads (DECISIONS.md O3), decoded once with
 * `effect/Config` into {@link AppConfig}. A bad value stops start-up with one
 * line naming the variable ({@link formatConfigError}).
 */

import * as net from "node:net"
import type { LogLevel } from "effect"
import { Config, ConfigProvider, Context, Duration, Effect, Layer, Redacted, Schema } from "effect"

/** The form of one O3 duration: a number and a unit among `ms`, `s`, `m`, `h`, and `d` (days, W10's `5d`). */
const DURATION = String.raw`(\d+)(ms|s|m|h|d)`

/** A duration written as a number and a unit among `ms`, `s`, `m`, `h`, `d` (O3, W10). */
const DurationText = Schema.String.pipe(
  Schema.check(
    Schema.isPattern(new RegExp(`^${DURATION}$`), { message: "Expected a duration such as 200ms, 5s, 30m or 2h" })
  )
)

const unitMillis = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const

/** Parses an O3 duration (`200ms`, `5s`, `30m`, `2h`, `5d`) into a `Duration`; throws on another form. */
export const parseDuration = (text: string): Duration.Duration => {
  const match = new RegExp(`^${DURATION}$`).exec(text.trim())
  if (match === null) throw new Error(`Invalid duration: ${text}`)
  return Duration.millis(Number(match[1]) * unitMillis[match[2] as keyof typeof unitMillis])
}

/**
 * A duration from `min` to `max` (O3 text, issue 38 item 3): the range a
 * setting can take without breaking the service (a sweep every 0 s spins a
 * core, a timeout of 0 fails every attempt).
 */
const DurationIn = (min: string, max: string) => {
  const [low, high] = [Duration.toMillis(parseDuration(min)), Duration.toMillis(parseDuration(max))]
  return DurationText.pipe(
    Schema.check(
      Schema.makeFilter<string>(
        (text) => {
          const millis = Duration.toMillis(parseDuration(text))
          return millis >= low && millis <= high
        },
        { message: `Expected a duration from ${min} to ${max}` }
      )
    )
  )
}

/** The duration variable `name` (default `fallback`) within `min`..`max` ({@link DurationIn}). */
const duration = (name: string, fallback: string, min: string, max: string) =>
  Config.schema(DurationIn(min, max), name).pipe(Config.withDefault(fallback), Config.map(parseDuration))

/** The integer variable `name` (default `fallback`) within `minimum`..`maximum` (issue 38 item 3). */
const integer = (name: string, fallback: number, minimum: number, maximum: number, unit: string) =>
  Config.schema(
    Schema.Int.pipe(
      Schema.check(Schema.isBetween({ minimum, maximum }, { message: `Expected ${minimum} to ${maximum} ${unit}` }))
    ),
    name
  ).pipe(Config.withDefault(fallback))

/** The bounds of each webhook retry delay, and of their count (W5, issue 38 item 3). */
const RETRY_DELAY_RANGE = ["100ms", "24h"] as const
const MAX_RETRIES = 20

const DurationList = Schema.String.pipe(
  Schema.check(
    Schema.isPattern(new RegExp(String.raw`^\s*${DURATION}(\s*,\s*${DURATION})*\s*$`), {
      message: "Expected a comma list of durations such as 5s,5m,30m"
    }),
    Schema.makeFilter<string>(
      (text) => {
        const delays = text.split(",").map((item) => Duration.toMillis(parseDuration(item)))
        const [low, high] = RETRY_DELAY_RANGE.map((bound) => Duration.toMillis(parseDuration(bound)))
        return delays.length <= MAX_RETRIES && delays.every((delay) => delay >= low! && delay <= high!)
      },
      {
        message: `Expected 1 to ${MAX_RETRIES} delays, each from ${RETRY_DELAY_RANGE[0]} to ${RETRY_DELAY_RANGE[1]}`
      }
    )
  )
)

/** A setting that must not be empty (or only spaces) when it is set. */
const NonBlank = Schema.String.pipe(
  Schema.check(
    Schema.makeFilter<string>((text) => text.trim() !== "", { message: "Expected a value, not an empty one" })
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

/**
 * An absolute http(s) URL with a host, for an endpoint Parley sends to (issue
 * 38 item 3: `OTEL_EXPORTER_OTLP_ENDPOINT=localhost:4318` parsed as a URL of
 * scheme `localhost:` and exported nothing, silently). Empty or blank is
 * accepted as unset. The failure message names `example`, never the value.
 */
const HttpUrl = (example: string) =>
  Schema.String.pipe(
    Schema.check(
      Schema.makeFilter<string>(
        (text) => {
          if (text.trim() === "") return true
          try {
            const url = new URL(text.trim())
            return (url.protocol === "http:" || url.protocol === "https:") && url.hostname !== ""
          } catch {
            return false
          }
        },
        { message: `Expected an http or https URL such as ${example}` }
      )
    )
  )

/** The optional http(s) URL variable `name` ({@link HttpUrl}); empty or blank means unset. */
const optionalUrl = (name: string, example: string) =>
  Config.schema(HttpUrl(example), name).pipe(
    Config.option,
    Config.map((o) => (o._tag === "Some" && o.value.trim() !== "" ? o.value.trim() : undefined))
  )

/**
 * A bind address (issue 38 item 3): an IP address (`0.0.0.0`, `::`,
 * `127.0.0.1`) or a host name (`localhost`, RFC 1123 labels), not a URL or a
 * `host:port`.
 */
const BindHost = Schema.String.pipe(
  Schema.check(
    Schema.makeFilter<string>(
      (text) =>
        net.isIP(text) !== 0 ||
        /^(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/i.test(text),
      { message: "Expected an IP address or a host name such as 0.0.0.0, :: or localhost" }
    )
  )
)

const optionalSecret = (name: string) =>
  Config.Redacted(name).pipe(
    Config.option,
    Config.map((o) => (o._tag === "Some" ? o.value : undefined))
  )

/**
 * `ADMIN_TOKEN` (O6): unset, the admin API is off; set, it must not be empty
 * (an empty one was an admin API that refused everything while looking on).
 * A short one is started with a WARN ({@link weakAdminTokenWarning}).
 */
const adminToken = Config.schema(NonBlank, "ADMIN_TOKEN").pipe(
  Config.option,
  Config.map((o) => (o._tag === "Some" ? Redacted.make(o.value) : undefined))
)

/** Characters below which `ADMIN_TOKEN` is weak (issue 38 item 3). */
export const ADMIN_TOKEN_MIN_LENGTH = 32

/** The WARN line for a set `ADMIN_TOKEN` shorter than {@link ADMIN_TOKEN_MIN_LENGTH}, or undefined. */
export const weakAdminTokenWarning = (config: Pick<AppConfigShape, "adminToken">): string | undefined =>
  config.adminToken !== undefined && Redacted.value(config.adminToken).length < ADMIN_TOKEN_MIN_LENGTH
    ? `ADMIN_TOKEN is shorter than ${ADMIN_TOKEN_MIN_LENGTH} characters: use a long random one (openssl rand -hex 32)`
    : undefined

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

/** The port the server listens on when `PORT` is unset (O3). */
export const DEFAULT_PORT = 8080

/** The decoded configuration; durations are `Duration`s, sizes bytes. */
export const AppConfigSpec = Config.all({
  port: Config.Port("PORT").pipe(Config.withDefault(DEFAULT_PORT)),
  host: Config.schema(BindHost, "HOST").pipe(Config.withDefault("0.0.0.0")),
  databaseUrl: Config.schema(PostgresUrl, "DATABASE_URL").pipe(
    Config.option,
    Config.map((o) => (o._tag === "Some" && o.value.trim() !== "" ? Redacted.make(o.value) : undefined))
  ),
  dataDir: Config.schema(NonBlank, "DATA_DIR").pipe(Config.withDefault("./.parley")),
  adminToken,
  role: Config.Literals(["api", "worker", "all"], "PARLEY_ROLE").pipe(Config.withDefault("all" as const)),
  logLevel: Config.Literals(Object.keys(logLevels), "LOG_LEVEL").pipe(
    Config.withDefault("info"),
    Config.map((level) => logLevels[level as keyof typeof logLevels])
  ),
  logFormat: Config.Literals(["json", "pretty"], "LOG_FORMAT").pipe(
    Config.option,
    Config.map((o) => (o._tag === "Some" ? o.value : process.stdout.isTTY ? "pretty" : "json"))
  ),
  webhookTimeout: integer("WEBHOOK_TIMEOUT_MS", 10_000, 100, 300_000, "ms").pipe(Config.map(Duration.millis)),
  webhookRetrySchedule: Config.schema(DurationList, "WEBHOOK_RETRY_SCHEDULE").pipe(
    Config.withDefault("5s,5m,30m,2h,5h,10h,10h"),
    Config.map((text) => text.split(",").map(parseDuration))
  ),
  allowPrivateNetworkTargets: Config.Boolean("ALLOW_PRIVATE_NETWORK_TARGETS").pipe(Config.withDefault(false)),
  /**
   * How long an app's deliveries may all fail before it is disabled (W10),
   * counted from its first failed attempt after its last success, creation
   * or re-enabling; `app.failing` warns at a fifth of it.
   */
  appDisableAfter: duration("APP_DISABLE_AFTER", "5d", "1s", "365d"),
  /** Browser origins allowed by CORS (issue 15); empty: no CORS headers at all. */
  corsOrigins: Config.schema(OriginList, "CORS_ORIGINS").pipe(
    Config.option,
    Config.map(
      (o): ReadonlyArray<string> => (o._tag === "Some" ? o.value.split(",").map((origin) => origin.trim()) : [])
    )
  ),
  aiProvider: Config.Literals(["echo", "openai", "anthropic"], "AI_PROVIDER").pipe(Config.withDefault("echo" as const)),
  openaiApiKey: optionalSecret("OPENAI_API_KEY"),
  openaiBaseUrl: optionalUrl("OPENAI_BASE_URL", "http://localhost:11434/v1"),
  anthropicApiKey: optionalSecret("ANTHROPIC_API_KEY"),
  aiModel: optionalString("AI_MODEL"),
  otlpEndpoint: optionalUrl("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318"),
  serviceName: Config.schema(NonBlank, "OTEL_SERVICE_NAME").pipe(Config.withDefault("parley")),
  sessionExpirySweepInterval: duration("SESSION_EXPIRY_SWEEP_INTERVAL", "30s", "1s", "24h"),
  /** Interval of the retention sweeper (D21, `Retention/Retention.ts`). */
  retentionSweepInterval: duration("RETENTION_SWEEP_INTERVAL", "1m", "1s", "24h"),
  maxBodyBytes: integer("MAX_BODY_BYTES", 1_048_576, 1_024, 268_435_456, "bytes"),
  /** How long opening a connection to PostgreSQL may take (issue 38 item 1). */
  databaseConnectTimeout: duration("DATABASE_CONNECT_TIMEOUT", "5s", "100ms", "5m"),
  /** PostgreSQL `statement_timeout` of the API's and the workers' connections (issue 38 item 1). */
  databaseStatementTimeout: duration("DATABASE_STATEMENT_TIMEOUT", "30s", "100ms", "24h"),
  /** PostgreSQL `lock_timeout` of the API's and the workers' connections (issue 38 item 1). */
  databaseLockTimeout: duration("DATABASE_LOCK_TIMEOUT", "10s", "100ms", "24h"),
  /** An API request not done within it responds 503 (issue 38 item 1, O9). */
  requestTimeout: duration("REQUEST_TIMEOUT", "30s", "100ms", "10m")
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

/** Logs the configuration's warnings once at start-up (a weak `ADMIN_TOKEN`, issue 38 item 3). Requires `AppConfig`. */
export const ConfigWarningsLive = Layer.effectDiscard(
  Effect.flatMap(AppConfig, (config: AppConfigShape) => {
    const warning = weakAdminTokenWarning(config)
    return warning === undefined ? Effect.void : Effect.logWarning(warning)
  })
)

/**
 * Variables whose empty value means "unset" (a compose file's `DATABASE_URL=`
 * falls back to the embedded server). Every other variable set to an empty
 * value is refused: the environment provider would read it as unset and use
 * the default, so `WEBHOOK_RETRY_SCHEDULE=` or `ADMIN_TOKEN=` passed silently
 * (issue 38 item 3).
 */
const EMPTY_MEANS_UNSET: ReadonlySet<string> = new Set([
  "DATABASE_URL",
  "OTEL_EXPORTER_OTLP_ENDPOINT",
  "OPENAI_API_KEY",
  "OPENAI_BASE_URL",
  "ANTHROPIC_API_KEY",
  "AI_MODEL",
  "CORS_ORIGINS",
  "LOG_FORMAT"
])

/** The variables Parley reads ({@link AppConfigSpec}), in the order of the configuration table. */
export const VARIABLES = [
  "PORT",
  "HOST",
  "DATABASE_URL",
  "DATA_DIR",
  "ADMIN_TOKEN",
  "PARLEY_ROLE",
  "LOG_LEVEL",
  "LOG_FORMAT",
  "WEBHOOK_TIMEOUT_MS",
  "WEBHOOK_RETRY_SCHEDULE",
  "ALLOW_PRIVATE_NETWORK_TARGETS",
  "APP_DISABLE_AFTER",
  "CORS_ORIGINS",
  "AI_PROVIDER",
  "OPENAI_API_KEY",
  "OPENAI_BASE_URL",
  "ANTHROPIC_API_KEY",
  "AI_MODEL",
  "OTEL_EXPORTER_OTLP_ENDPOINT",
  "OTEL_SERVICE_NAME",
  "SESSION_EXPIRY_SWEEP_INTERVAL",
  "RETENTION_SWEEP_INTERVAL",
  "MAX_BODY_BYTES",
  "DATABASE_CONNECT_TIMEOUT",
  "DATABASE_STATEMENT_TIMEOUT",
  "DATABASE_LOCK_TIMEOUT",
  "REQUEST_TIMEOUT"
] as const

/**
 * Decodes the configuration from `env` (default `process.env`) before anything
 * starts (O3, O9, issue 38 item 3): fails with the one line to print
 * (`Invalid configuration: NAME: ...`) for a value out of its range, of the
 * wrong form, or empty where empty means nothing.
 */
export const readConfig = (
  env: Readonly<Record<string, string | undefined>> = process.env
): Effect.Effect<AppConfigShape, string> => {
  const empty = VARIABLES.find((name) => !EMPTY_MEANS_UNSET.has(name) && env[name]?.trim() === "")
  if (empty !== undefined) return Effect.fail(`Invalid configuration: ${empty}: Expected a value, not an empty one`)
  return AppConfigSpec.parse(ConfigProvider.fromEnv({ env: env as Record<string, string> })).pipe(
    Effect.mapError((error) => formatConfigError(error.message))
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
