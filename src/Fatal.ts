/**
 * Fatal failures an operator can read (DECISIONS.md O9): a start-up or CLI
 * failure prints ONE line on stderr naming its cause and exits 1; the full
 * cause goes to the debug log (`LOG_LEVEL=debug`). Used by `main.ts` and
 * `cli.ts`, so stdout never carries an error (`eval "$(npx parley bootstrap)"`
 * never evaluates one).
 *
 * Lines: `Cannot connect to PostgreSQL at 127.0.0.1:5433: connection refused`,
 * `Port 8080 is already in use`, `Cannot listen on 0.0.0.0:80: permission
 * denied`, `Embedded PostgreSQL could not start under ...: ...`,
 * `Database migration failed: ...`, else `Parley failed: <message>`.
 */
import { Cause, Effect, Exit, Redacted, type Runtime } from "effect"
import * as SqlError from "effect/sql/SqlError"

/** The `code` of an error-like value (`ECONNREFUSED`, a SQLSTATE). */
const codeOf = (value: unknown): string | undefined => {
  const code = typeof value === "object" && value !== null ? (value as { code?: unknown }).code : undefined
  return typeof code === "string" ? code : undefined
}

const messageOf = (value: unknown): string =>
  (value instanceof Error ? value.message : typeof value === "string" ? value : String(value)).split("\n")[0]!.trim()

/** Socket error codes in words. */
const socketReasons: Record<string, string> = {
  ECONNREFUSED: "connection refused",
  ECONNRESET: "connection reset",
  ETIMEDOUT: "timed out",
  ENOTFOUND: "host not found",
  EAI_AGAIN: "host not found (DNS lookup failed)",
  EHOSTUNREACH: "host unreachable",
  ENETUNREACH: "network unreachable",
  EADDRINUSE: "address already in use",
  EACCES: "permission denied",
  EADDRNOTAVAIL: "address not available"
}

/** `host:port` of a PostgreSQL URL, without credentials. */
const targetOf = (url: Redacted.Redacted<string> | undefined): string | undefined => {
  if (url === undefined) return undefined
  try {
    const parsed = new URL(Redacted.value(url))
    return `${parsed.hostname}:${parsed.port || "5432"}`
  } catch {
    return undefined
  }
}

/** The errors and defects of a cause, failures first. */
const errorsOf = (cause: Cause.Cause<unknown>): Array<unknown> =>
  cause.reasons.flatMap((reason) =>
    reason._tag === "Fail" ? [reason.error] : reason._tag === "Die" ? [reason.defect] : []
  )

/**
 * The one line describing a fatal `cause` (see module docs). `databaseUrl`
 * names the server a connection failure was about (its credentials are never
 * printed); `listen` the configured HTTP address.
 */
const describeFatal = (
  cause: Cause.Cause<unknown>,
  context: { readonly databaseUrl?: Redacted.Redacted<string> | undefined; readonly listen?: string | undefined } = {}
): string => {
  for (const error of errorsOf(cause)) {
    const tag = typeof error === "object" && error !== null ? (error as { _tag?: unknown })._tag : undefined
    if (tag === "EmbeddedPostgresError") return messageOf(error)
    if (SqlError.isSqlError(error)) {
      const reason = error.reason
      const inner = reason.cause
      const code = codeOf(inner)
      const address = inner as { address?: unknown; port?: unknown }
      const target =
        typeof address?.address === "string" && typeof address.port === "number"
          ? `${address.address}:${address.port}`
          : (targetOf(context.databaseUrl) ?? "the configured address")
      if (reason._tag === "ConnectionError" || reason._tag === "AuthenticationError" || code === "3D000") {
        const why =
          (code !== undefined ? socketReasons[code] : undefined) ??
          (messageOf(inner) || reason.message || "connection failed")
        return `Cannot connect to PostgreSQL at ${target}: ${why}`
      }
      return `Database error: ${messageOf(inner) || reason.message || reason._tag}`
    }
    if (tag === "MigrationError") return `Database migration failed: ${messageOf(error)}`
    if (tag === "ServeError") {
      const serveCause = (error as { cause?: unknown }).cause
      const code = codeOf(serveCause)
      const listen = context.listen ?? "the configured address"
      if (code === "EADDRINUSE") return `Port ${listen.slice(listen.lastIndexOf(":") + 1)} is already in use`
      return `Cannot listen on ${listen}: ${(code !== undefined ? socketReasons[code] : undefined) ?? messageOf(serveCause)}`
    }
  }
  const [first] = errorsOf(cause)
  return `Parley failed: ${first === undefined ? Cause.pretty(cause).split("\n")[0] : messageOf(first)}`
}

/**
 * Reports a fatal `cause` as O9 asks: the full cause at debug level, one line
 * on stderr, exit code 1. Interruptions (SIGTERM, SIGINT) are not failures and
 * pass through.
 */
export const reportFatal = (
  cause: Cause.Cause<unknown>,
  context: Parameters<typeof describeFatal>[1] = {}
): Effect.Effect<void, unknown> =>
  Cause.hasInterruptsOnly(cause)
    ? Effect.failCause(cause)
    : Effect.logDebug("Fatal failure", cause).pipe(
        Effect.andThen(
          Effect.sync(() => {
            process.stderr.write(`${describeFatal(cause, context)}\n`)
            process.exitCode = 1
          })
        )
      )

/**
 * How a server process ends (O5, O9): exit 0 when it stopped on SIGTERM or
 * SIGINT (interrupted only: a graceful shutdown) or returned, 1 when it
 * failed. The `teardown` of `NodeRuntime.runMain` for `npm start`
 * (`main.ts`) and `parley serve` (`cli.ts`); without it an interrupted
 * program exits 130.
 */
export const serverTeardown: Runtime.Teardown = (exit, onExit) =>
  onExit(Exit.isFailure(exit) && !Cause.hasInterruptsOnly(exit.cause) ? 1 : 0)
