/**
 * The `parley` command (`npx parley ...`, `npm run parley -- ...`; O6): the
 * admin operations on the database directly, for humans, plus `migrate`,
 * `openapi` (the document, with no database) and `serve`. It uses `DATABASE_URL`, or attaches to the embedded server of
 * `DATA_DIR` (starting it for the command when no server runs).
 *
 * `eval run` and `eval show` (issue 41 item 4; A16, A17) are for an
 * integrator's CI instead: they call a running server over HTTP (`--url`,
 * `PARLEY_URL`) with the organization's API key (`--token`, `PARLEY_TOKEN`)
 * and never touch the database. `eval run` is a gate: exit 1 when the
 * evaluation fails it.
 *
 * Output is shell-friendly: `eval "$(npx parley bootstrap)"` sets
 * `PARLEY_ORG_ID` and `PARLEY_TOKEN`. Only results go to stdout (O9): a usage
 * error (unknown flag or command, missing flag or command) is one or two lines
 * on stderr and exit 2, any other failure one line on stderr and exit 1, and
 * `--help` prints on stdout with exit 0 (issue 39 item 5).
 */
import { existsSync, realpathSync } from "node:fs"
import { fileURLToPath } from "node:url"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as NodeServices from "@effect/platform-node/NodeServices"
import {
  Config,
  Console,
  Data,
  Duration,
  Effect,
  Layer,
  Logger,
  Option,
  Redacted,
  References,
  Schedule,
  Schema
} from "effect"
import { Argument, CliError, CliOutput, Command, Flag, type HelpDoc } from "effect/cli"
import * as FetchHttpClient from "effect/http/FetchHttpClient"
import * as HttpClientError from "effect/http/HttpClientError"
import { Admin } from "./Admin/Admin.ts"
import {
  CreateAgentPayload,
  CreateApiKeyPayload,
  CreateOrganizationPayload,
  UpdateAgentPayload,
  UpdateSettingsPayload
} from "./Admin/Api.ts"
import { RolloutPayload, UpdateAssistantPayload } from "./Assistants/Api.ts"
import { Assistants } from "./Assistants/Assistants.ts"
import { AssistantsRepo } from "./Assistants/Repo.ts"
import { Rollouts } from "./Assistants/Rollouts.ts"
import { AppConfig, DEFAULT_PORT, readConfig } from "./Config.ts"
import * as Database from "./Database/Database.ts"
import { PageQuery } from "./Domain/Common.ts"
import type { Erasure } from "./Domain/Erasure.ts"
import { ValidationFailed, type ValidationIssue } from "./Domain/Errors.ts"
import {
  CreateEvaluationPayload,
  type Evaluation,
  EvaluationSessions,
  type EvaluationSide,
  type SideStats
} from "./Domain/Evaluation.ts"
import { validationIssues } from "./Domain/Validation.ts"
import { Erasures } from "./Erasures/Erasures.ts"
import { reportFatal, serverTeardown } from "./Fatal.ts"
import { Ids } from "./Shared/Ids.ts"
import { type App, RecoverPayload } from "./Webhooks/Api.ts"
import { Webhooks } from "./Webhooks/Webhooks.ts"

const AdminLive = Admin.layer.pipe(Layer.provide(Ids.layer), Layer.provide(Database.migratedLayer))

/** The assistants domain and Admin (an unknown organization is Admin's `Organization not found`, O6). */
const AssistantsLive = Layer.merge(Assistants.layer, Admin.layer).pipe(
  Layer.provide(Ids.layer),
  Layer.provide(Database.migratedLayer)
)

const WebhooksLive = Webhooks.layer.pipe(Layer.provide(Ids.layer), Layer.provide(Database.migratedLayer))

const ErasuresLive = Erasures.layer.pipe(Layer.provide(Ids.layer), Layer.provide(Database.migratedLayer))

const RolloutsLive = Rollouts.layerNoDeps.pipe(
  Layer.provide([AssistantsRepo.layer, Ids.layer]),
  Layer.provide(Database.migratedLayer)
)

/** Quiet logs on stderr for one-shot commands, so stdout stays machine-readable. */
const QuietLogging = Layer.merge(
  Logger.layer([Logger.withConsoleError(Logger.formatSimple)]),
  Layer.succeed(References.MinimumLogLevel, "Warn")
)

const shellQuote = (value: string) => `'${value.replace(/'/g, `'\\''`)}'`

const show = (record: Record<string, unknown>) =>
  Console.log(
    Object.entries(record)
      .map(([key, value]) => `${key}=${value === null || value === undefined ? "" : String(value)}`)
      .join("\n")
  )

/** A failure the user reads (O9): `text` as one line on stderr, exit 1; the command goes on to its end. */
const failLine = (text: string) =>
  Effect.sync(() => {
    process.stderr.write(`${text}\n`)
    process.exitCode = 1
  })

/** Records as `show` prints each, separated by an empty line (issue 39 item 6: the lists). */
const showAll = (records: ReadonlyArray<Record<string, unknown>>) =>
  Effect.forEach(records, (record, i) => (i === 0 ? show(record) : Effect.andThen(Console.log(""), show(record))), {
    discard: true
  })

const orgFlag = Flag.String("org").pipe(Flag.withDescription("Organization id"))

/** The flags of a list paged by id (`Domain/Common.ts` `PageQuery`, issue 39 item 6). */
const pageFlags = {
  limit: Flag.String("limit").pipe(Flag.withDescription("Most items to print, 1-1000 (default 100)"), Flag.optional),
  afterId: Flag.String("after-id").pipe(
    Flag.withDescription("The last id of the previous page: print the items after it"),
    Flag.optional
  )
}

/** The page the flags ask for, checked as the API checks its query. */
const pageOf = (flags: { readonly limit: Option.Option<string>; readonly afterId: Option.Option<string> }) =>
  decodeAsBody(PageQuery)({
    ...Option.match(flags.limit, { onNone: () => ({}), onSome: (text) => ({ limit: wholeNumber(text) }) }),
    ...Option.match(flags.afterId, { onNone: () => ({}), onSome: (id) => ({ after_id: id }) })
  })

/**
 * Decodes a command's input with an admin API body schema (one rule for both:
 * what the API refuses, the command refuses; issue 37 item 3), failing with
 * `ValidationFailed` whose `loc` starts with `body` and which lists every
 * problem, as the API responds.
 */
const decodeAsBody =
  <S extends Schema.Top>(schema: S) =>
  (input: unknown) =>
    Schema.decodeUnknownEffect(schema, { errors: "all" })(input).pipe(
      Effect.mapError((error) => new ValidationFailed({ detail: validationIssues(error.issue, ["body"]) }))
    )

/**
 * Where the admin API's line of `bootstrap` points. The command cannot see the
 * environment of the running server, so it says how the admin API is reached,
 * never whether it is on, and names no token of its own (issue 39 item 5: it
 * said "off" to a server started with `ADMIN_TOKEN`, with a random token other
 * than the walkthrough's).
 */
const ADMIN_API_HINT =
  "# Admin API (/admin/v1): Authorization: Bearer $ADMIN_TOKEN, the token the server was started with (docs/walkthroughs.md)"

const bootstrap = Command.make(
  "bootstrap",
  { name: Flag.String("name").pipe(Flag.withDescription("Organization name"), Flag.withDefault("Default")) },
  Effect.fn(function* ({ name }) {
    const admin = yield* Admin
    const organization = yield* admin.createOrganization(
      (yield* decodeAsBody(CreateOrganizationPayload)({ name })).name
    )
    const key = yield* admin.createApiKey(organization.id, { name: "bootstrap" })
    yield* Console.log(`export PARLEY_ORG_ID=${shellQuote(organization.id)}`)
    yield* Console.log(`export PARLEY_TOKEN=${shellQuote(key.token)}`)
    yield* Console.log("# The token is shown only once. Send it as: Authorization: Bearer $PARLEY_TOKEN")
    yield* Console.log(ADMIN_API_HINT)
  })
).pipe(Command.withDescription("Create an organization and an API key; print them as shell exports"))

const orgCreate = Command.make(
  "create",
  { name: Flag.String("name").pipe(Flag.withDescription("Organization name")) },
  Effect.fn(function* ({ name }) {
    const payload = yield* decodeAsBody(CreateOrganizationPayload)({ name })
    const organization = yield* (yield* Admin).createOrganization(payload.name)
    yield* show(organization)
  })
).pipe(Command.withDescription("Create an organization"))

const orgList = Command.make(
  "list",
  pageFlags,
  Effect.fn(function* (flags) {
    yield* showAll(yield* (yield* Admin).listOrganizations(yield* pageOf(flags)))
  })
).pipe(Command.withDescription("List organizations, oldest first"))

const orgShow = Command.make(
  "show",
  { org: orgFlag },
  Effect.fn(function* ({ org }) {
    yield* show(yield* (yield* Admin).getOrganization(org))
  })
).pipe(Command.withDescription("Print an organization"))

const keyList = Command.make(
  "list",
  { org: orgFlag },
  Effect.fn(function* ({ org }) {
    yield* showAll(yield* (yield* Admin).listApiKeys(org))
  })
).pipe(Command.withDescription("List an organization's API keys: the last 4 characters of each token, never the token"))

const keyCreate = Command.make(
  "create",
  {
    org: orgFlag,
    name: Flag.String("name").pipe(Flag.withDescription("Key name, for telling keys apart"), Flag.optional),
    expiresAt: Flag.String("expires-at").pipe(
      Flag.withDescription("Expiry (ISO 8601 with a time zone, as the admin API takes it)"),
      Flag.optional
    )
  },
  Effect.fn(function* ({ org, name, expiresAt }) {
    const payload = yield* decodeAsBody(CreateApiKeyPayload)({
      name: Option.getOrNull(name),
      expires_at: Option.getOrNull(expiresAt)
    })
    const key = yield* (yield* Admin).createApiKey(org, payload)
    yield* show(key)
  })
).pipe(Command.withDescription("Create an API key; the token is printed only now"))

const keyRevoke = Command.make(
  "revoke",
  { org: orgFlag, key: Flag.String("key").pipe(Flag.withDescription("API key id")) },
  Effect.fn(function* ({ org, key }) {
    yield* (yield* Admin).revokeApiKey(org, key)
    yield* Console.log(`revoked=${key}`)
  })
).pipe(Command.withDescription("Revoke an API key at once"))

const agentCreate = Command.make(
  "create",
  {
    org: orgFlag,
    name: Flag.String("name").pipe(Flag.withDescription("Agent name")),
    type: Flag.Literals("type", ["ai", "human"]).pipe(Flag.withDescription("ai (answers with an assistant) or human")),
    assistantId: Flag.String("assistant-id").pipe(
      Flag.withDescription("The assistant an ai agent answers with"),
      Flag.optional
    ),
    profileId: Flag.String("profile-id").pipe(
      Flag.withDescription("A human agent's id in your user system"),
      Flag.optional
    )
  },
  Effect.fn(function* ({ org, name, type, assistantId, profileId }) {
    const payload = yield* decodeAsBody(CreateAgentPayload)({
      name,
      type,
      ...Option.match(assistantId, { onNone: () => ({}), onSome: (id) => ({ assistant_id: id }) }),
      ...Option.match(profileId, { onNone: () => ({}), onSome: (id) => ({ profile_id: id }) })
    })
    const agent = yield* (yield* Admin).createAgent(org, payload)
    yield* show(agent)
  })
).pipe(Command.withDescription("Create an agent (ai needs --assistant-id, human --profile-id)"))

const agentFlag = Flag.String("agent").pipe(Flag.withDescription("Agent id"))

const agentList = Command.make(
  "list",
  { org: orgFlag },
  Effect.fn(function* ({ org }) {
    yield* showAll(yield* (yield* Admin).listAgents(org))
  })
).pipe(Command.withDescription("List an organization's agents (deleted ones left out)"))

const agentShow = Command.make(
  "show",
  { org: orgFlag, agent: agentFlag },
  Effect.fn(function* ({ org, agent }) {
    yield* show(yield* (yield* Admin).getAgent(org, agent))
  })
).pipe(Command.withDescription("Print an agent"))

const agentUpdate = Command.make(
  "update",
  {
    org: orgFlag,
    agent: agentFlag,
    name: Flag.String("name").pipe(Flag.withDescription("New name"), Flag.optional),
    assistantId: Flag.String("assistant-id").pipe(
      Flag.withDescription("The assistant an ai agent answers with"),
      Flag.optional
    ),
    profileId: Flag.String("profile-id").pipe(
      Flag.withDescription("A human agent's id in your user system"),
      Flag.optional
    )
  },
  Effect.fn(function* ({ org, agent, name, assistantId, profileId }) {
    const patch = yield* decodeAsBody(UpdateAgentPayload)({
      ...Option.match(name, { onNone: () => ({}), onSome: (text) => ({ name: text }) }),
      ...Option.match(assistantId, { onNone: () => ({}), onSome: (id) => ({ assistant_id: id }) }),
      ...Option.match(profileId, { onNone: () => ({}), onSome: (id) => ({ profile_id: id }) })
    })
    yield* show(yield* (yield* Admin).updateAgent(org, agent, patch))
  })
).pipe(Command.withDescription("Change an agent's name, or the assistant (ai) or profile (human) it has"))

const agentDelete = Command.make(
  "delete",
  { org: orgFlag, agent: agentFlag },
  Effect.fn(function* ({ org, agent }) {
    yield* (yield* Admin).deleteAgent(org, agent)
    yield* Console.log(`deleted=${agent}`)
  })
).pipe(
  Command.withDescription("Delete an agent its sessions keep in their history; refused while an open session has it")
)

const assistantFlag = Flag.String("assistant").pipe(Flag.withDescription("Assistant id"))

/** Runs `f` once the organization is known (else `Organization not found`, O6), as the admin API does. */
const inOrganization = <A, E, R>(org: string, f: (assistants: Assistants["Service"]) => Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    yield* (yield* Admin).getOrganization(org)
    return yield* f(yield* Assistants)
  })

const assistantList = Command.make(
  "list",
  { org: orgFlag, ...pageFlags },
  Effect.fn(function* ({ org, ...flags }) {
    const page = yield* pageOf(flags)
    yield* showAll(yield* inOrganization(org, (assistants) => assistants.list(org, page)))
  })
).pipe(Command.withDescription("List an organization's assistants, oldest first"))

const assistantShow = Command.make(
  "show",
  { org: orgFlag, assistant: assistantFlag },
  Effect.fn(function* ({ org, assistant }) {
    yield* show(yield* inOrganization(org, (assistants) => assistants.get(org, assistant)))
  })
).pipe(Command.withDescription("Print an assistant"))

const assistantUpdate = Command.make(
  "update",
  {
    org: orgFlag,
    assistant: assistantFlag,
    name: Flag.String("name").pipe(Flag.withDescription("New name"), Flag.optional),
    description: Flag.String("description").pipe(Flag.withDescription("New description"), Flag.optional),
    clearDescription: Flag.Boolean("clear-description").pipe(
      Flag.withDescription("Remove the description"),
      Flag.withDefault(false)
    )
  },
  Effect.fn(function* ({ org, assistant, name, description, clearDescription }) {
    const patch = yield* decodeAsBody(UpdateAssistantPayload)({
      ...Option.match(name, { onNone: () => ({}), onSome: (text) => ({ name: text }) }),
      ...(clearDescription
        ? { description: null }
        : Option.match(description, { onNone: () => ({}), onSome: (text) => ({ description: text }) }))
    })
    yield* show(yield* inOrganization(org, (assistants) => assistants.update(org, assistant, patch)))
  })
).pipe(Command.withDescription("Change an assistant's name or description"))

const assistantDelete = Command.make(
  "delete",
  { org: orgFlag, assistant: assistantFlag },
  Effect.fn(function* ({ org, assistant }) {
    yield* inOrganization(org, (assistants) => assistants.delete(org, assistant))
    yield* Console.log(`deleted=${assistant}`)
  })
).pipe(Command.withDescription("Delete an assistant with its versions; refused while an ai agent answers with it"))

/**
 * A settings value on the command line: a whole number, or `none` (null: no limit, the default burst, or kept
 * forever).
 */
const limitFlag = (name: string, description: string) =>
  Flag.String(name).pipe(Flag.withDescription(`${description}; "none" clears it`), Flag.optional)

/** A whole number typed on the command line as a number; anything else as typed, for the schema to reject. */
const wholeNumber = (text: string): number | string => (/^\d+$/.test(text) ? Number(text) : text)

const limitValue = (text: string): number | null | string => (text === "none" ? null : wholeNumber(text))

const settingsShow = Command.make(
  "show",
  { org: orgFlag },
  Effect.fn(function* ({ org }) {
    yield* show(yield* (yield* Admin).getSettings(org))
  })
).pipe(Command.withDescription("Print an organization's settings"))

const settingsSet = Command.make(
  "set",
  {
    org: orgFlag,
    rate: limitFlag("rate-limit-per-second", "Requests per second of the organization's API keys (D20)"),
    burst: limitFlag("rate-limit-burst", "Requests allowed at once (D20; default twice the rate)"),
    messageRetention: limitFlag(
      "message-retention-days",
      "Whole days a closed session is kept, 1-36500 (D21; default: forever)"
    ),
    eventRetention: limitFlag("event-retention-days", "Whole days a webhook event is kept, 1-3650 (D21; default 30)")
  },
  Effect.fn(function* ({ org, rate, burst, messageRetention, eventRetention }) {
    const patch = yield* decodeAsBody(UpdateSettingsPayload)({
      ...Option.match(rate, { onNone: () => ({}), onSome: (text) => ({ rate_limit_per_second: limitValue(text) }) }),
      ...Option.match(burst, { onNone: () => ({}), onSome: (text) => ({ rate_limit_burst: limitValue(text) }) }),
      ...Option.match(messageRetention, {
        onNone: () => ({}),
        onSome: (text) => ({ message_retention_days: limitValue(text) })
      }),
      ...Option.match(eventRetention, {
        onNone: () => ({}),
        onSome: (text) => ({ event_retention_days: limitValue(text) })
      })
    })
    yield* show(yield* (yield* Admin).updateSettings(org, patch))
  })
).pipe(Command.withDescription("Change an organization's rate limit (D20) and retention (D21); prints the settings"))

/**
 * One line of an app's health (W10): `ok`; `failing since <start>` (every
 * delivery attempted since failed); `disabled (failing since <start>, disabled
 * at <moment>)` when Parley disabled it; `disabled` when a PATCH did.
 */
export const appHealth = (app: App, failingSince: string | undefined): string =>
  app.enabled
    ? failingSince === undefined
      ? "ok"
      : `failing since ${failingSince}`
    : app.disabled_reason === "failing"
      ? `disabled (failing${failingSince === undefined ? "" : ` since ${failingSince}`}, disabled at ${app.disabled_at})`
      : "disabled"

const appList = Command.make(
  "list",
  { org: orgFlag },
  Effect.fn(function* ({ org }) {
    const webhooks = yield* Webhooks
    const apps = yield* webhooks.listApps(org)
    const failing = new Map((yield* webhooks.listFailing(org)).map((app) => [app.id, app.failing_since]))
    yield* showAll(
      apps.map(({ signing_secret: _, events, ...app }) => ({
        ...app,
        events: events.join(","),
        health: appHealth({ signing_secret: "", events, ...app }, failing.get(app.id))
      }))
    )
  })
).pipe(
  Command.withDescription(
    "List an organization's webhook apps, oldest first, with their health (W10): ok, failing since, disabled; never the signing secret"
  )
)

const appRotateSecret = Command.make(
  "rotate-secret",
  { org: orgFlag, app: Flag.String("app").pipe(Flag.withDescription("App id")) },
  Effect.fn(function* ({ org, app }) {
    yield* show({ ...(yield* (yield* Webhooks).rotateSecret(org, app)) })
  })
).pipe(
  Command.withDescription(
    "Give an app a new signing secret (W8); the previous one signs too for 24 hours. Prints the secret"
  )
)

const appRecover = Command.make(
  "recover",
  {
    org: orgFlag,
    app: Flag.String("app").pipe(Flag.withDescription("App id")),
    since: Flag.String("since").pipe(Flag.withDescription("Failed deliveries created at or after (ISO 8601)")),
    until: Flag.String("until").pipe(Flag.withDescription("... and before (ISO 8601)"), Flag.optional)
  },
  Effect.fn(function* ({ org, app, since, until }) {
    const range = yield* decodeAsBody(RecoverPayload)({
      since,
      ...Option.match(until, { onNone: () => ({}), onSome: (text) => ({ until: text }) })
    })
    yield* show({ ...(yield* (yield* Webhooks).recover(org, app, range)) })
  })
).pipe(
  Command.withDescription(
    "Send an app's failed deliveries of a time range again, after an outage (W9); prints how many"
  )
)

/** An erasure as `key=value` lines, its counts as `counts.<kind>=n` once completed (D22). */
const showErasure = ({ counts, ...erasure }: Erasure) =>
  show({
    ...erasure,
    ...Object.fromEntries(Object.entries(counts ?? {}).map(([kind, n]) => [`counts.${kind}`, n]))
  })

const contactErase = Command.make(
  "erase",
  {
    org: orgFlag,
    contact: Flag.String("contact").pipe(Flag.withDescription("Your id of the contact (its contact_id, D8)"))
  },
  Effect.fn(function* ({ org, contact }) {
    yield* showErasure(yield* (yield* Erasures).erase(org, contact))
  })
).pipe(
  Command.withDescription(
    "Erase everything of a contact (D22): at once unreadable, deleted in the background by a server's worker; prints the erasure"
  )
)

const erasureShow = Command.make(
  "show",
  { org: orgFlag, erasure: Flag.String("erasure").pipe(Flag.withDescription("Erasure id")) },
  Effect.fn(function* ({ org, erasure }) {
    yield* showErasure(yield* (yield* Erasures).get(org, erasure))
  })
).pipe(Command.withDescription("Print an erasure: its status, and its counts once completed (D22)"))

const rolloutShow = Command.make(
  "show",
  { org: orgFlag, assistant: assistantFlag },
  Effect.fn(function* ({ org, assistant }) {
    yield* show({ ...(yield* (yield* Rollouts).get(org, assistant)) })
  })
).pipe(Command.withDescription("Print an assistant's rollout (A12)"))

const rolloutStart = Command.make(
  "start",
  {
    org: orgFlag,
    assistant: assistantFlag,
    branch: Flag.String("branch").pipe(Flag.withDescription("The branch to roll out (published at least once)")),
    percent: Flag.String("percent").pipe(Flag.withDescription("The share of new sessions that take it, 0-100"))
  },
  Effect.fn(function* ({ org, assistant, branch, percent }) {
    const payload = yield* decodeAsBody(RolloutPayload)({
      branch_name: branch,
      percent: wholeNumber(percent)
    })
    yield* show({ ...(yield* (yield* Rollouts).put(org, assistant, payload)) })
  })
).pipe(
  Command.withDescription(
    "Roll a branch out to a share of new sessions, or change the share of the running rollout (A12); prints it"
  )
)

const rolloutEnd = Command.make(
  "end",
  { org: orgFlag, assistant: assistantFlag },
  Effect.fn(function* ({ org, assistant }) {
    yield* (yield* Rollouts).end(org, assistant)
    yield* show({ rollout: "ended" })
  })
).pipe(Command.withDescription("End an assistant's rollout: its sessions go back to main unless pinned (A12, A13)"))

/**
 * Flags an environment variable stands in for (issue 41 item 4): the `eval`
 * commands read `PARLEY_URL` and `PARLEY_TOKEN` when `--url` and `--token`
 * are not given, and a usage error does not call such a flag missing while
 * its variable is set.
 */
const FLAG_VARIABLES = { url: "PARLEY_URL", token: "PARLEY_TOKEN" } as const

/** Where the `eval` commands find the server when neither `--url` nor `PARLEY_URL` says: its default address (O3). */
const DEFAULT_SERVER_URL = `http://127.0.0.1:${DEFAULT_PORT}`

/**
 * The flags of a command that calls a running server over HTTP with an
 * organization's API key, not the database (issue 41 item 4: a gate in an
 * integrator's CI, where only the server is reachable).
 */
const serverFlags = {
  url: Flag.String("url").pipe(
    Flag.withDescription(`The Parley server (default: $PARLEY_URL, else ${DEFAULT_SERVER_URL})`),
    Flag.withFallbackConfig(Config.String(FLAG_VARIABLES.url)),
    Flag.withDefault(DEFAULT_SERVER_URL)
  ),
  token: Flag.Redacted("token").pipe(
    Flag.withDescription("The organization's API key (default: $PARLEY_TOKEN, as parley bootstrap prints it)"),
    Flag.withFallbackConfig(Config.Redacted(FLAG_VARIABLES.token))
  )
}

/**
 * A request to the server that failed with no `{detail}` its endpoint declares
 * (the server unreachable, a status such as 429 or 503): printed as
 * `Error: <detail>`, exit 1, like the declared ones (O9).
 */
class RequestFailed extends Data.TaggedError("RequestFailed")<{ readonly detail: string }> {}

/** The `{detail}` text of a response body, when it has one. */
const detailOf = (body: unknown): string | undefined => {
  const detail = typeof body === "object" && body !== null ? (body as { detail?: unknown }).detail : undefined
  return typeof detail === "string" ? detail : undefined
}

/**
 * `HttpClientError`s of a request to the server at `url` as {@link RequestFailed}:
 * `Cannot reach Parley at <url>: <why>`, or the response's `{detail}`, else
 * `HTTP <status>`. Errors the endpoint declares were decoded by the client
 * and pass through with their `detail`.
 */
const reportingRequestFailures =
  (url: string) =>
  <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E | RequestFailed, R> =>
    Effect.catch(self, (error): Effect.Effect<never, E | RequestFailed> => {
      if (!HttpClientError.isHttpClientError(error)) return Effect.fail(error)
      const reason = error.reason
      if (reason._tag === "TransportError") {
        const cause = (reason.cause as { cause?: { code?: unknown; message?: unknown } } | undefined)?.cause
        const why = typeof cause?.code === "string" ? cause.code : String(cause?.message ?? reason.message)
        return Effect.fail(new RequestFailed({ detail: `Cannot reach Parley at ${url}: ${why}` }))
      }
      const response = "response" in reason ? reason.response : undefined
      if (response === undefined) return Effect.fail(new RequestFailed({ detail: reason.message }))
      return response.json.pipe(
        Effect.map(detailOf),
        Effect.orElseSucceed(() => undefined),
        Effect.flatMap((detail) => Effect.fail(new RequestFailed({ detail: detail ?? `HTTP ${response.status}` })))
      )
    })

/**
 * The typed client (`src/client.ts`) of the server at `url` with the API key
 * `token`. Loaded when a command calls it, so the admin commands start
 * without the contract (as `openapi` loads it). Requires an `HttpClient`.
 */
const serverClient = (flags: { readonly url: string; readonly token: Redacted.Redacted<string> }) =>
  Effect.flatMap(
    Effect.promise(() => import("./client.ts")),
    ({ makeClient }) => makeClient({ baseUrl: flags.url, apiKey: Redacted.value(flags.token) })
  )

/** One side of an evaluation as the CLI prints it: `branch:<name>`, `draft:<branch>` or `commit:<id>` (A16). */
const sideText = (side: EvaluationSide) =>
  "commit_id" in side ? `commit:${side.commit_id}` : `${side.draft === true ? "draft" : "branch"}:${side.branch_name}`

/**
 * An evaluation as `key=value` lines (issue 41 item 4, A16, A17): its fields,
 * the sides as {@link sideText}, `judged` (true or false; the rubric is not
 * printed), and once completed the summary flattened: `interval_low`,
 * `interval_high` (the Wilson 95% interval of `changed_rate`, 0-1),
 * `baseline_duration_ms_p50` (milliseconds) and the like for each side,
 * `verdicts_better`/`_same`/`_worse` when judged, then `by_node.<node id>=n`
 * (a record's keys after a dot, as `counts.<kind>` of an erasure).
 */
const showEvaluation = ({ summary, baseline, candidate, judge, ...evaluation }: Evaluation) => {
  const stats = (name: string, side: SideStats) => ({
    [`${name}_duration_ms_p50`]: side.duration_ms.p50,
    [`${name}_duration_ms_p95`]: side.duration_ms.p95,
    [`${name}_input_tokens`]: side.input_tokens,
    [`${name}_output_tokens`]: side.output_tokens
  })
  return show({
    id: evaluation.id,
    assistant_id: evaluation.assistant_id,
    status: evaluation.status,
    baseline: sideText(baseline),
    candidate: sideText(candidate),
    baseline_commit_id: evaluation.baseline_commit_id,
    candidate_commit_id: evaluation.candidate_commit_id,
    repeats: evaluation.repeats,
    judged: judge !== null,
    turns_total: evaluation.turns_total,
    turns_done: evaluation.turns_done,
    error: evaluation.error,
    created_at: evaluation.created_at,
    completed_at: evaluation.completed_at,
    ...(summary === null
      ? {}
      : {
          turns: summary.turns,
          changed: summary.changed,
          changed_rate: summary.changed_rate,
          interval_low: summary.interval[0],
          interval_high: summary.interval[1],
          text_changed: summary.text_changed,
          path_changed: summary.path_changed,
          tools_changed: summary.tools_changed,
          unrecorded_tool_calls: summary.unrecorded_tool_calls,
          baseline_unstable: summary.baseline_unstable,
          ...stats("baseline", summary.baseline),
          ...stats("candidate", summary.candidate),
          ...(summary.verdicts === null
            ? {}
            : {
                verdicts_better: summary.verdicts.better,
                verdicts_same: summary.verdicts.same,
                verdicts_worse: summary.verdicts.worse
              }),
          ...Object.fromEntries(Object.entries(summary.by_node).map(([node, n]) => [`by_node.${node}`, n]))
        })
  })
}

/** `rate` (0-1) rounded up to 3 decimals, so "could be up to" never understates it. */
const upTo = (rate: number) => Math.ceil(rate * 1000 - 1e-9) / 1000

/**
 * Why a finished evaluation fails the CI gate (issue 41 item 4), one reason
 * each; none: it passes. It fails when it did not complete (failed or
 * cancelled), when `maxChangedRate` (0-1) is given and the upper end of the
 * Wilson 95% interval of the changed rate is above it (A16: the rate the
 * sample cannot rule out), or when a judge found a changed turn worse (A17).
 */
const gateFailures = (evaluation: Evaluation, maxChangedRate: Option.Option<number>): Array<string> => {
  if (evaluation.status === "failed") {
    return [`evaluation ${evaluation.id} failed: ${evaluation.error ?? "no reason given"}`]
  }
  if (evaluation.status !== "completed" || evaluation.summary === null) {
    return [`evaluation ${evaluation.id} is ${evaluation.status}, not completed`]
  }
  const { interval, verdicts, changed } = evaluation.summary
  return [
    ...(Option.isSome(maxChangedRate) && interval[1] > maxChangedRate.value
      ? [`changed rate could be up to ${upTo(interval[1])} (upper end of the 95% interval) > ${maxChangedRate.value}`]
      : []),
    ...(verdicts !== null && verdicts.worse > 0
      ? [`the judge found ${verdicts.worse} of ${changed} changed turns worse`]
      : [])
  ]
}

/**
 * A failure of a request worth making again: the server unreachable for a
 * moment, or answering 429 or 5xx (a deploy, a restart, a rate limit, D20).
 */
const transient = (error: unknown) => {
  if (!HttpClientError.isHttpClientError(error)) return false
  const reason = error.reason
  if (reason._tag === "TransportError") return true
  const status = "response" in reason ? reason.response?.status : undefined
  return status !== undefined && (status === 429 || status >= 500)
}

/** How `eval run` asks for the evaluation again after a {@link transient} failure: 5 times, 0.5 s doubling (15.5 s). */
const POLL_RETRY = { while: transient, times: 5, schedule: Schedule.exponential("500 millis") }

/** How often `eval run` asks for the evaluation's progress. */
const POLL_INTERVAL = Duration.millis(500)

/** Cells of the progress bar on a terminal. */
const BAR_WIDTH = 20

/**
 * Shows an evaluation's progress on stderr (issue 41 item 4): on a terminal
 * one bar redrawn in place (`[#####---------------] 12/40 turns`), else a
 * line (`12/40 turns`) each time `turns_done` changes, so a CI log gets a few
 * lines, not one per poll. `end` finishes the bar's line.
 */
const progressOnStderr = (terminal: boolean) => {
  let shown: number | undefined
  return {
    update: (evaluation: Evaluation) =>
      Effect.sync(() => {
        const { turns_done: done, turns_total: total } = evaluation
        if (done === shown) return
        shown = done
        const text = `${done}/${total} turns`
        if (!terminal) return void process.stderr.write(`${text}\n`)
        const filled = total === 0 ? BAR_WIDTH : Math.floor((done / total) * BAR_WIDTH)
        process.stderr.write(`\r[${"#".repeat(filled)}${"-".repeat(BAR_WIDTH - filled)}] ${text}`)
      }),
    end: Effect.sync(() => {
      if (terminal && shown !== undefined) process.stderr.write("\n")
    })
  }
}

/**
 * The body `eval run` sends (A16), checked as the API checks it, with
 * `sessions` always the range form `{limit?}` the command builds: a bad
 * `--sessions` is told only what is wrong with its limit, not that `ids` is
 * missing too.
 */
const EvalRunPayload = CreateEvaluationPayload.mapFields((fields) => ({
  ...fields,
  sessions: EvaluationSessions.members[1]
}))

const finished = (evaluation: Evaluation) => evaluation.status !== "queued" && evaluation.status !== "running"

/**
 * `parley eval run --assistant ID --baseline NAME --candidate NAME [--draft]
 * [--sessions N] [--max-changed-rate R] [--judge-file F]` (issue 41 item 4):
 * starts an evaluation (A16) of the candidate (a branch's HEAD, or its draft
 * with `--draft`) against the baseline (a branch's HEAD) over the `N` newest
 * sessions (default 100), judged by the rubric of file `F` when given (A17);
 * asks for it every 0.5 s showing progress on stderr (one line naming the
 * evaluation, then {@link progressOnStderr}); once it is finished prints it
 * on stdout ({@link showEvaluation}). Exit 1 with one `Gate failed: ...` line
 * on stderr when {@link gateFailures} finds a reason, else 0. Input the API
 * refuses and HTTP failures: `Error: <detail>`, exit 1; usage errors exit 2.
 * Interrupted (SIGINT, SIGTERM) while waiting, it cancels the evaluation.
 */
const evalRun = Command.make(
  "run",
  {
    assistant: assistantFlag,
    baseline: Flag.String("baseline").pipe(Flag.withDescription("The branch whose HEAD answers as the baseline")),
    candidate: Flag.String("candidate").pipe(
      Flag.withDescription("The branch whose HEAD (or draft, with --draft) answers as the candidate")
    ),
    draft: Flag.Boolean("draft").pipe(
      Flag.withDescription("The candidate is the branch's draft, not its HEAD"),
      Flag.withDefault(false)
    ),
    sessions: Flag.String("sessions").pipe(
      Flag.withDescription("How many sessions to replay, newest first, 1-1000 (default 100)"),
      Flag.optional
    ),
    maxChangedRate: Flag.Finite("max-changed-rate").pipe(
      Flag.withSchema(Schema.Finite.pipe(Schema.check(Schema.isBetween({ minimum: 0, maximum: 1 })))),
      Flag.withDescription(
        "Fail (exit 1) when the changed rate could be above this, 0-1: the upper end of its 95% interval"
      ),
      Flag.optional
    ),
    judgeFile: Flag.FileText("judge-file").pipe(
      Flag.withDescription("A file with the rubric a judge grades changed turns by; fail (exit 1) on any worse (A17)"),
      Flag.optional
    ),
    ...serverFlags
  },
  Effect.fn(
    function* ({ assistant, baseline, candidate, draft, sessions, maxChangedRate, judgeFile, ...server }) {
      const payload = yield* decodeAsBody(EvalRunPayload)({
        baseline: { branch_name: baseline },
        candidate: draft ? { branch_name: candidate, draft: true } : { branch_name: candidate },
        sessions: Option.match(sessions, { onNone: () => ({}), onSome: (text) => ({ limit: wholeNumber(text) }) }),
        ...Option.match(judgeFile, { onNone: () => ({}), onSome: (instructions) => ({ judge: { instructions } }) })
      })
      const parley = yield* serverClient(server)
      const params = { assistant_id: assistant }
      const created = yield* parley.evaluations.createEvaluation({ params, payload })
      const ids = { ...params, evaluation_id: created.id }
      yield* Effect.sync(() =>
        process.stderr.write(
          `Evaluation ${created.id}: ${sideText(created.baseline)} against ${sideText(created.candidate)}\n`
        )
      )
      const progress = progressOnStderr(process.stderr.isTTY === true)
      const evaluation = yield* parley.evaluations.getEvaluation({ params: ids }).pipe(
        Effect.retry(POLL_RETRY),
        Effect.tap(progress.update),
        Effect.repeat({ until: finished, schedule: Schedule.spaced(POLL_INTERVAL) }),
        Effect.ensuring(progress.end),
        // Stopped (Ctrl-C, a CI job cancelled): the evaluation is cancelled too, so workers stop answering it.
        Effect.onInterrupt(() => parley.evaluations.cancelEvaluation({ params: ids }).pipe(Effect.ignore))
      )
      yield* showEvaluation(evaluation)
      const failures = gateFailures(evaluation, maxChangedRate)
      if (failures.length > 0) yield* failLine(`Gate failed: ${failures.join("; ")}`)
    },
    (self, { url }) => reportingRequestFailures(url)(self)
  )
).pipe(
  Command.withDescription(
    "Evaluate a candidate against a baseline on a running server (A16, A17) and gate on the result: prints the summary, exit 1 when the gate fails"
  ),
  Command.withExamples([
    {
      command:
        "parley eval run --assistant $ASSISTANT_ID --baseline main --candidate friendlier --draft --max-changed-rate 0.2",
      description: "In CI, with PARLEY_URL and PARLEY_TOKEN set: fail when more than 20% of the replies could change"
    }
  ])
)

/**
 * `parley eval show ID --assistant ID` (issue 41 item 4): prints an
 * evaluation as it is now (A16; {@link showEvaluation}), finished or not,
 * with no waiting and no gate: exit 0, or `Error: <detail>` and exit 1.
 */
const evalShow = Command.make(
  "show",
  {
    evaluation: Argument.String("evaluation").pipe(Argument.withDescription("Evaluation id")),
    assistant: assistantFlag,
    ...serverFlags
  },
  Effect.fn(
    function* ({ evaluation, assistant, ...server }) {
      const parley = yield* serverClient(server)
      yield* showEvaluation(
        yield* parley.evaluations.getEvaluation({ params: { assistant_id: assistant, evaluation_id: evaluation } })
      )
    },
    (self, { url }) => reportingRequestFailures(url)(self)
  )
).pipe(
  Command.withDescription("Print an evaluation as it is now, from a running server (A16)"),
  Command.withExamples([
    { command: "parley eval show $EVALUATION_ID --assistant $ASSISTANT_ID", description: "Its status and summary" }
  ])
)

const migrate = Command.make(
  "migrate",
  {},
  Effect.fn(function* () {
    const applied = yield* Database.migrate
    yield* Console.log(
      applied.length === 0 ? "No pending migrations" : applied.map(([id, name]) => `applied=${id}_${name}`).join("\n")
    )
  }, Effect.provide(Database.layer))
).pipe(Command.withDescription("Apply pending migrations"))

// `openapi` and `serve` load the HTTP API and the server when run, so the other commands start without them:
// `org create` took 1.8-2.0 s and takes 1.3-1.5 s (/usr/bin/time, three runs each, 2026-11-27).
const openapi = Command.make("openapi", {}, () =>
  Effect.promise(() => Promise.all([import("effect/http-api"), import("./Api.ts")])).pipe(
    Effect.flatMap(([{ OpenApi }, { ParleyApi }]) => Console.log(JSON.stringify(OpenApi.fromApi(ParleyApi), null, 2)))
  )
).pipe(
  Command.withDescription(
    "Print the OpenAPI 3.1 document (the server's /openapi.json), for generators and linters; needs no database"
  )
)

const serve = Command.make("serve", {}, () =>
  Effect.flatMap(
    Effect.promise(() => import("./Server.ts")),
    ({ AppLive }) => Layer.launch(AppLive)
  )
).pipe(Command.withDescription("Run the server (same as npm start)"))

/** The whole command tree, exported for tests that walk it (issue 39 item 5). */
export const parley = Command.make("parley").pipe(
  Command.withDescription("Parley administration, and evaluations of assistants on a running server (eval)"),
  Command.withSubcommands([
    bootstrap.pipe(Command.provide(AdminLive)),
    Command.make("org").pipe(
      Command.withDescription("Organizations"),
      Command.withSubcommands([
        orgCreate.pipe(Command.provide(AdminLive)),
        orgList.pipe(Command.provide(AdminLive)),
        orgShow.pipe(Command.provide(AdminLive))
      ])
    ),
    Command.make("key").pipe(
      Command.withDescription("API keys"),
      Command.withSubcommands([
        keyCreate.pipe(Command.provide(AdminLive)),
        keyRevoke.pipe(Command.provide(AdminLive)),
        keyList.pipe(Command.provide(AdminLive))
      ])
    ),
    Command.make("agent").pipe(
      Command.withDescription("Agents"),
      Command.withSubcommands([
        agentCreate.pipe(Command.provide(AdminLive)),
        agentList.pipe(Command.provide(AdminLive)),
        agentShow.pipe(Command.provide(AdminLive)),
        agentUpdate.pipe(Command.provide(AdminLive)),
        agentDelete.pipe(Command.provide(AdminLive))
      ])
    ),
    Command.make("assistant").pipe(
      Command.withDescription("Assistants"),
      Command.withSubcommands([
        assistantList.pipe(Command.provide(AssistantsLive)),
        assistantShow.pipe(Command.provide(AssistantsLive)),
        assistantUpdate.pipe(Command.provide(AssistantsLive)),
        assistantDelete.pipe(Command.provide(AssistantsLive))
      ])
    ),
    Command.make("app").pipe(
      Command.withDescription("Webhook apps"),
      Command.withSubcommands([
        appList.pipe(Command.provide(WebhooksLive)),
        appRotateSecret.pipe(Command.provide(WebhooksLive)),
        appRecover.pipe(Command.provide(WebhooksLive))
      ])
    ),
    Command.make("rollout").pipe(
      Command.withDescription("Assistant rollouts (A12)"),
      Command.withSubcommands([
        rolloutShow.pipe(Command.provide(RolloutsLive)),
        rolloutStart.pipe(Command.provide(RolloutsLive)),
        rolloutEnd.pipe(Command.provide(RolloutsLive))
      ])
    ),
    Command.make("contact").pipe(
      Command.withDescription("Contacts (D22)"),
      Command.withSubcommands([contactErase.pipe(Command.provide(ErasuresLive))])
    ),
    Command.make("erasure").pipe(
      Command.withDescription("Erasures of contacts (D22)"),
      Command.withSubcommands([erasureShow.pipe(Command.provide(ErasuresLive))])
    ),
    Command.make("settings").pipe(
      Command.withDescription("Organization settings"),
      Command.withSubcommands([
        settingsShow.pipe(Command.provide(AdminLive)),
        settingsSet.pipe(Command.provide(AdminLive))
      ])
    ),
    Command.make("eval").pipe(
      Command.withDescription("Evaluations on a running server, with the organization's API key (A16, A17)"),
      Command.withSubcommands([evalRun, evalShow]),
      Command.provide(FetchHttpClient.layer)
    ),
    migrate.pipe(Command.provide(QuietLogging)),
    openapi,
    serve
  ])
)

const orList = (names: ReadonlyArray<string>) =>
  names.length <= 1 ? names.join("") : `${names.slice(0, -1).join(", ")} or ${names.at(-1)}`

const didYouMean = (suggestions: ReadonlyArray<string>) =>
  suggestions.length === 0 ? "" : ` (did you mean ${orList(suggestions)}?)`

/** A flag named as typed: `--name`, or `-n` for a one-letter alias. */
const flagSpelling = (name: string) => (name.startsWith("-") ? name : name.length === 1 ? `-${name}` : `--${name}`)

/**
 * The required flags of a command that `argv` does not give (`--org x` and
 * `--org=x` give `--org`) nor their environment variable ({@link FLAG_VARIABLES}). effect/cli stops at the first missing flag; the
 * user is told every one at once (issue 39 item 5).
 */
const missingFlags = (helpDoc: HelpDoc.HelpDoc, argv: ReadonlyArray<string>): Array<string> => {
  const options = argv.slice(0, argv.includes("--") ? argv.indexOf("--") : argv.length)
  const given = (spelling: string) => options.some((arg) => arg === spelling || arg.startsWith(`${spelling}=`))
  return helpDoc.flags
    .filter((flag) => flag.required && ![flag.name, ...flag.aliases].some((name) => given(flagSpelling(name))))
    .filter((flag) => {
      const variable = (FLAG_VARIABLES as Readonly<Record<string, string | undefined>>)[flag.name]
      return variable === undefined || process.env[variable] === undefined
    })
    .map((flag) => flagSpelling(flag.name))
}

/** One problem of an invocation, on one line. */
const problem = (error: CliError.NonShowHelpErrors): string => {
  switch (error._tag) {
    case "UnrecognizedOption":
      return `unknown flag ${error.option}${didYouMean(error.suggestions)}`
    case "UnknownSubcommand":
      return `unknown command "${error.subcommand}"${didYouMean(error.suggestions)}`
    default:
      return error.message.replace(/\s*\n\s*/g, " ")
  }
}

/**
 * The text of a usage error (issue 39 item 5, O9), for stderr: the command
 * and every problem on one line, then where its usage is.
 *
 * ```
 * Error: parley rollout start: missing --assistant, --branch, --percent
 * Run "parley rollout start --help" for usage.
 * ```
 *
 * `errors` are the parse errors effect/cli found (none when a command that
 * needs a subcommand got none); missing flags are taken from `helpDoc` and
 * `argv` (the arguments after the program), so all of them are named.
 */
const usageError = (
  commandPath: ReadonlyArray<string>,
  helpDoc: HelpDoc.HelpDoc,
  errors: ReadonlyArray<CliError.NonShowHelpErrors>,
  argv: ReadonlyArray<string>
): string => {
  const missing = missingFlags(helpDoc, argv)
  const commands = (helpDoc.subcommands ?? []).flatMap((group) => group.commands.map((command) => command.name))
  const problems = [
    ...errors.filter((error) => error._tag !== "MissingOption").map(problem),
    ...(missing.length > 0 ? [`missing ${missing.join(", ")}`] : []),
    ...(errors.length === 0 && missing.length === 0 && commands.length > 0
      ? [`missing a command: ${commands.join(", ")}`]
      : [])
  ]
  const command = commandPath.join(" ")
  return `Error: ${command}: ${problems.join("; ")}\nRun "${command} --help" for usage.`
}

/**
 * effect/cli's output, placed as O9 wants: `--help` and `--version` on stdout
 * as effect/cli prints them; an invalid invocation, or a command that needs a
 * subcommand run without one (an implicit help), as `usageError` on stderr
 * only, never the help text (issue 39 item 5: `eval "$(parley bootstrap
 * --nam Acme)"` ran the help as shell commands).
 */
const presenter: CliOutput.Presenter = {
  present: (event) => {
    if (event._tag === "InvalidInvocation" || (event._tag === "Help" && event.reason === "Implicit")) {
      const errors = event._tag === "InvalidInvocation" ? event.errors : []
      return Effect.sync(() => {
        process.stderr.write(`${usageError(event.commandPath, event.helpDoc, errors, process.argv.slice(2))}\n`)
      })
    }
    return CliOutput.defaultPresenter.present(event)
  }
}

/** Exit status of a usage error (issue 39 item 5); other failures exit 1, help and results 0. */
const USAGE_EXIT_CODE = 2

/** `parley serve`: the server, which logs and ends as `npm start` does (O5). */
const serving = process.argv[2] === "serve"

const program = Effect.gen(function* () {
  const config = yield* Effect.result(readConfig())
  if (config._tag === "Failure") {
    process.stderr.write(`${config.failure}\n`)
    process.exitCode = 1
    return
  }
  const quiet = !serving
  yield* Command.run(parley, { version: "0.1.0" }).pipe(
    Effect.provideService(CliOutput.Presenter, presenter),
    Effect.provideService(AppConfig, config.success),
    quiet ? Effect.provide(QuietLogging) : (self) => self,
    // Domain failures (`{detail}` errors) are the user's to read: one line on stderr, exit 1.
    Effect.catch((error) => {
      const detail = (error as { readonly detail?: unknown }).detail
      if (detail === undefined) return Effect.fail(error)
      const text = Array.isArray(detail)
        ? detail.map((issue: ValidationIssue) => `${issue.loc.slice(1).join(".")}: ${issue.msg}`).join("; ")
        : String(detail)
      return failLine(`Error: ${text}`)
    }),
    // Usage errors were printed by `presenter`: exit 2 (`--help` does not fail: exit 0); other CLI errors exit 1.
    Effect.catchIf(CliError.isCliError, (error) =>
      Effect.sync(() => {
        process.exitCode = error._tag === "ShowHelp" ? USAGE_EXIT_CODE : 1
      })
    ),
    // Anything else (an unreachable database, a port in use): one line on stderr, exit 1 (O9).
    Effect.catchCause((cause) =>
      reportFatal(cause, {
        databaseUrl: config.success.databaseUrl,
        listen: `${config.success.host}:${config.success.port}`
      }).pipe(Effect.provide(QuietLogging))
    )
  )
})

/**
 * Run as a program (`node src/cli.ts`, `bin/parley.js`), not when a test
 * imports the command tree.
 */
const entry = process.argv[1]
const isMain = entry !== undefined && existsSync(entry) && realpathSync(entry) === fileURLToPath(import.meta.url)

if (isMain) {
  program.pipe(Effect.provide(NodeServices.layer), (self) =>
    NodeRuntime.runMain(self, { disableErrorReporting: true, ...(serving ? { teardown: serverTeardown } : {}) })
  )
}
