/**
 * Conformance by a tool we did not write (issue 39 item 4): Stoplight Prism's
 * validation proxy (test/support/Prism.ts) in front of the real app, loaded
 * with the app's own `/openapi.json`. Every operation of the document is
 * driven at least once with valid requests, the variants without their
 * optional body included (finish, transfer, reply, publish); then valid
 * requests the app refuses with a documented error (unknown ids, a closed
 * session, a content type clients may not send, an organization over its rate
 * limit: D12, D20), and a few invalid ones. A valid request must get a 2xx
 * (or the documented error expected) and no violation of any severity, of
 * the request or of the response (body, status, headers: `X-Request-Id` is
 * required on every response, O8). Prism is given the document with its
 * objects closed (test/support/Prism.ts, closeObjects), so a field a body
 * carries that the document does not name is a violation too. An invalid request must be reported by
 * Prism as a request violation, and the app must refuse it (4xx) with an
 * answer that conforms to the document. The operations are read from the document,
 * so an operation added without a request here fails the run by its
 * operationId, and so does a query or header parameter never sent to its
 * operation (`Idempotency-Key` included): the document and the server are
 * kept in step from now on.
 *
 * The requests use the fixtures of the fuzz run (test/support/ApiFixtures.ts).
 * The file starts no background workers, so nothing it creates is processed
 * after it ends.
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import {
  type Current,
  defaultSettings,
  EVENTS,
  makeFixtures,
  type Operation,
  operationsOf,
  PUBLIC_URL,
  resolveRefs,
  text
} from "../support/ApiFixtures.ts"
import { A, llm, tool } from "../support/Assistants.ts"
import { prismProxy, type Violation, violationsOf } from "../support/Prism.ts"
import { ADMIN_TOKEN, C, TestApi, withApp } from "../support/TestApp.ts"

/** A request through Prism as the test wrote it. */
interface Exchange {
  readonly method: string
  readonly url: string
  /**
   * `valid`: valid by the document and meant to succeed; `refused`: valid by the document, answered with one of
   * the statuses `expected` (a documented error); `invalid`: not valid by the document.
   */
  readonly kind: "valid" | "refused" | "invalid"
  readonly expected: ReadonlyArray<number>
  readonly operation: Operation | undefined
  /** The query parameters and the headers sent (names in lower case). */
  readonly sent: ReadonlySet<string>
  readonly status: number
  readonly text: string
  readonly violations: ReadonlyArray<Violation>
}

/** The operation of the document a concrete path answers to; a literal segment beats a parameter (`/versions/diff`). */
const operationFor = (operations: ReadonlyArray<Operation>, method: string, url: string): Operation | undefined => {
  const pathname = url.split("?")[0]!
  const matching = operations.filter(
    (operation) =>
      operation.method === method && new RegExp(`^${operation.path.replace(/\{[^}]+\}/g, "[^/]+")}$`).test(pathname)
  )
  const literal = (operation: Operation) => operation.path.replace(/\{[^}]+\}/g, "").length
  return matching.sort((a, b) => literal(b) - literal(a))[0]
}

const describe = (exchange: Exchange) =>
  `${exchange.operation?.operationId ?? "(no operation)"}: ${exchange.method} ${exchange.url} -> ${exchange.status}`

const violationText = (violation: Violation) =>
  `${violation.severity} ${violation.location.join(".")}: ${violation.message}`

withApp()("Prism's validation proxy (issue 39 item 4)", (it) => {
  it.effect(
    "every operation of /openapi.json, driven through Prism with valid requests, conforms; invalid requests are reported",
    () =>
      Effect.gen(function* () {
        const started = performance.now()
        const api = yield* TestApi
        const document = (yield* api.request("GET", "/openapi.json")).body
        const operations = operationsOf(document)
        const prism = yield* prismProxy(document, api.baseUrl)
        const fixtures = yield* makeFixtures
        const current = yield* fixtures.renew
        /** The `index`th fixture of `name`: one requests use up (renewed), else one of the pool of that name. */
        const fixture = (name: string, index = 0) =>
          (current as Current)[name]?.[index] ?? resolveRefs(fixtures.pools[name]![index]!, current)

        const exchanges: Array<Exchange> = []
        /** Operations whose first valid request got an `Idempotency-Key` of its own (see `call`). */
        const keyed = new Set<string>()
        const send = (
          kind: Exchange["kind"],
          method: string,
          url: string,
          options: {
            readonly body?: unknown
            readonly token?: string | null
            readonly headers?: Record<string, string>
            readonly expected?: ReadonlyArray<number>
          } = {}
        ) =>
          Effect.promise(async () => {
            const operation = operationFor(operations, method, url)
            const token =
              options.token === null
                ? undefined
                : (options.token ?? (operation?.auth === "admin" ? ADMIN_TOKEN : fixtures.orgToken))
            const headers: Record<string, string> = { ...options.headers }
            if (
              kind === "valid" &&
              operation !== undefined &&
              !keyed.has(operation.operationId) &&
              operation.parameters.some((parameter) => parameter.name === "Idempotency-Key")
            ) {
              keyed.add(operation.operationId)
              headers["idempotency-key"] ??= `prism-${operation.operationId}`
            }
            if (token !== undefined) headers.authorization = `Bearer ${token}`
            if (options.body !== undefined) headers["content-type"] ??= "application/json"
            const response = await fetch(`${prism.url}${url}`, {
              method,
              headers,
              ...(options.body !== undefined
                ? { body: typeof options.body === "string" ? options.body : JSON.stringify(options.body) }
                : {})
            })
            const responseText = await response.text()
            const exchange: Exchange = {
              method,
              url,
              kind,
              expected: options.expected ?? [],
              operation,
              sent: new Set([
                ...new URL(url, prism.url).searchParams.keys(),
                ...Object.keys(headers).map((name) => name.toLowerCase())
              ]),
              status: response.status,
              text: responseText,
              violations: violationsOf(response.headers)
            }
            exchanges.push(exchange)
            let body: any
            try {
              body = responseText === "" ? undefined : JSON.parse(responseText)
            } catch {}
            return body
          })
        /**
         * A valid request: it must get a 2xx without violations. Returns the parsed body. The first valid
         * request of an operation that takes an `Idempotency-Key` carries one, so the header is sent to
         * each (its replay is checked on messages.create); the later ones go without, as the test wrote them.
         */
        const call = (method: string, url: string, body?: unknown, headers?: Record<string, string>) =>
          send("valid", method, url, { ...(body !== undefined ? { body } : {}), ...(headers ? { headers } : {}) })
        /** A valid request the app refuses: it must get the documented `expected` status without violations. */
        const refused = (expected: number, method: string, url: string, body?: unknown, token?: string) =>
          send("refused", method, url, {
            expected: [expected],
            ...(body !== undefined ? { body } : {}),
            ...(token !== undefined ? { token } : {})
          })
        /** An invalid request: Prism must report a request violation, and the app refuse it (4xx) with a documented answer. */
        const invalid = (method: string, url: string, options: Parameters<typeof send>[3] = {}) =>
          send("invalid", method, url, options)

        const org = `/admin/v1/organizations/${fixtures.orgId}`
        const session = fixture("session", 0)
        const aiSession = fixture("session", 1)
        const message = fixture("message")
        const app = fixture("app_id")
        const [aiAgent, humanAgent] = [fixture("agent_id", 0), fixture("agent_id", 1)]
        const [firstCommit, secondCommit] = [fixture("commit_id", 0), fixture("commit_id", 1)]
        const assistant = `${A}/assistants/${fixture("assistant_id", 0)}`
        const prismBranch = `${assistant}/branches/prism`

        // Sessions, messages, replies (conversations.md), ingest (D9), export (O6), erasures (D22).
        const created = yield* call("POST", `${C}/sessions`, { contact_id: "+15550100", contact_name: "Grace" })
        const withBody = yield* call("POST", `${C}/sessions`, {
          contact_id: "+15550101",
          contact_name: "Alan",
          agent_id: humanAgent,
          metadata: { source: "prism" }
        })
        yield* call("POST", `${C}/sessions/search`, { contact_id: "+15550001" })
        yield* call("POST", `${C}/sessions/search`, { status: "open", metadata: { plan: "gold" }, limit: 5 })
        yield* call("GET", `${C}/sessions/${session}`)
        yield* call("GET", `${C}/sessions/${aiSession}`)
        yield* call("PATCH", `${C}/sessions/${session}`, { fields: { metadata: { plan: "silver" } } })
        yield* call("POST", `${C}/sessions/${created?.id}/transfer`, { agent_id: aiAgent })
        yield* call("POST", `${C}/sessions/${withBody?.id}/transfer`)
        yield* call("POST", `${C}/sessions/${created?.id}/finish`, { ending_survey_id: null })
        yield* call("POST", `${C}/sessions/${withBody?.id}/finish`)
        yield* call("POST", `${C}/sessions/${session}/messages`, text("Hello through Prism"), {
          "idempotency-key": "prism-message-1"
        })
        yield* call("POST", `${C}/sessions/${session}/messages`, {
          role: "assistant",
          content: { type: "image", url: PUBLIC_URL },
          provider_message_id: "wamid.prism.1",
          replied_provider_message_id: "wamid.fuzz.1"
        })
        yield* call("POST", `${C}/sessions/${session}/messages`, text("Hello through Prism"), {
          "idempotency-key": "prism-message-1"
        })
        for (const content of [
          { type: "audio", url: PUBLIC_URL, transcript: "Hello" },
          { type: "video", url: PUBLIC_URL },
          { type: "file", url: PUBLIC_URL, mime_type: "application/pdf", name: "a.pdf" }
        ]) {
          yield* call("POST", `${C}/sessions/${session}/messages`, { role: "user", content })
        }
        yield* call("POST", `${C}/sessions/${session}/messages/search`, { session_id: session, role: "user" })
        yield* call("GET", `${C}/sessions/${session}/messages/${message}`)
        yield* call("PATCH", `${C}/sessions/${session}/messages/${message}`, {
          delivery_status: "delivered",
          delivered_at: new Date().toISOString()
        })
        const redacted = yield* call("POST", `${C}/sessions/${session}/messages`, text("Redact me"))
        yield* call("POST", `${C}/sessions/${session}/messages/${redacted?.id}/redact`)
        yield* call("POST", `${C}/sessions/${session}/messages/${redacted?.id}/redact`)
        yield* call("POST", `${C}/sessions/${aiSession}/reply`, { debounce_time: 0, metadata: { via: "prism" } })
        yield* call("POST", `${C}/sessions/${aiSession}/reply`)
        const scheduled = yield* call("POST", `${C}/sessions/${aiSession}/schedule`, {
          scheduled_for: new Date(Date.now() + 86_400_000).toISOString(),
          config: { type: "message", message: { type: "text", text: "Still there?" } }
        })
        yield* call("GET", `${C}/sessions/${aiSession}/schedules`)
        yield* call("DELETE", `${C}/sessions/${aiSession}/schedules/${scheduled?.id}`)
        yield* call("POST", `${C}/ingest`, {
          to: "+15550100",
          from: "+15550009",
          channel_type: "whatsapp",
          contact: { name: "Linus", phone: "+15550009" },
          content: { type: "text", text: "Hi" },
          provider_message_id: "wamid.prism.ingest"
        })
        yield* call("GET", `${C}/data/sessions?limit=10&sort_by=updated_at`)
        // Every query parameter of the document is sent at least once: the pages after the first, the time bounds.
        const bounds =
          "created_before=2100-01-01T00:00:00Z&updated_after=2000-01-01T00:00:00Z&updated_before=2100-01-01T00:00:00Z"
        const sessionsPage = yield* call("GET", `${C}/data/sessions?limit=2&created_after=2000-01-01T00:00:00Z`)
        yield* call("GET", `${C}/data/sessions?limit=2&after_id=${sessionsPage?.at(-1)?.id}&${bounds}`)
        const messagesPage = yield* call("GET", `${C}/data/messages?limit=2&sort_by=created_at`)
        yield* call("GET", `${C}/data/messages?sort_by=updated_at&after_id=${messagesPage?.at(-1)?.id}&${bounds}`)
        yield* call("GET", `${C}/data/sessions/batch?session_ids=${session}&session_ids=${aiSession}`)
        yield* call("GET", `${C}/data/messages?session_id=${session}&created_after=2000-01-01T00:00:00Z`)
        yield* call("DELETE", `${C}/contacts/${encodeURIComponent("+15550006")}`)
        yield* call("GET", `${C}/erasures/${fixture("erasure")}`)

        // The admin API.
        const organization = yield* call("POST", "/admin/v1/organizations", { name: "Prism organization" })
        yield* call("GET", `/admin/v1/organizations/${organization?.id}`)
        yield* call("POST", `${org}/api-keys`, { name: "prism", expires_at: "2100-01-01T00:00:00Z" })
        yield* call("DELETE", `${org}/api-keys/${fixture("key")}`)
        yield* call("GET", `${org}/agents`)
        const grace = yield* call("POST", `${org}/agents`, {
          name: "Grace",
          type: "human",
          profile_id: "profile_prism"
        })
        const organizations = yield* call("GET", "/admin/v1/organizations?limit=5")
        yield* call("GET", `/admin/v1/organizations?limit=2&after_id=${organizations?.at(-1)?.id}`)
        // Any id is a valid `after_id` by the document; one that is not a UUID gives an empty page (PageQuery).
        yield* call("GET", "/admin/v1/organizations?after_id=not-a-uuid")
        yield* call("GET", `${org}/api-keys`)
        yield* call("GET", `${org}/agents/${grace?.id}`)
        yield* call("PATCH", `${org}/agents/${grace?.id}`, { name: "Grace H." })
        yield* call("DELETE", `${org}/agents/${grace?.id}`)
        // Issue 39 item 6: assistants read back, changed and deleted, through both APIs.
        for (const base of [`${org}/assistants`, `${A}/assistants`]) {
          const made = yield* call("POST", `${org}/assistants`, { name: "Short-lived", description: "Deleted" })
          yield* call("GET", `${base}?limit=5`)
          yield* call("GET", `${base}?limit=1&after_id=${made?.id}`)
          yield* call("GET", `${base}/${made?.id}`)
          yield* call("PATCH", `${base}/${made?.id}`, { name: "Renamed", description: null })
          yield* call("DELETE", `${base}/${made?.id}`)
        }
        yield* call("GET", `${org}/settings`)
        yield* call("PATCH", `${org}/settings`, { ...defaultSettings, reply_debounce_seconds: 4 })
        yield* call("POST", `${org}/assistants`, { name: "Prism bot", description: "Conformance" })
        yield* call("GET", `${org}/apps`)
        yield* call("POST", `${org}/apps`, { name: "Prism CRM", webhook_url: PUBLIC_URL, events: EVENTS })
        yield* call("GET", `${org}/apps/${app}`)
        yield* call("PATCH", `${org}/apps/${app}`, { name: "CRM", ordering: "conversation" })
        const deliveries = yield* call("GET", `${org}/apps/${app}/deliveries?limit=5&status=pending`)
        yield* call("GET", `${org}/apps/${app}/deliveries?after_id=${deliveries?.at(-1)?.id ?? fixture("delivery")}`)
        yield* call("POST", `${org}/apps/${app}/rotate-secret`)
        yield* call("POST", `${org}/apps/${app}/recover`, { since: new Date(Date.now() - 3_600_000).toISOString() })
        yield* call("POST", `${org}/apps/${app}/deliveries/${fixture("delivery")}/retry`)
        yield* call("DELETE", `${org}/apps/${fixture("spareApp")}`)

        // The assistants API (assistants.md): a branch of its own, its draft's items, publishing and history.
        yield* call("GET", `${assistant}/branches`)
        yield* call("GET", `${assistant}/branches/main`)
        yield* call("POST", `${assistant}/branches`, { name: "prism" })
        yield* call("POST", `${assistant}/branches/main/fork`, { name: "prism-fork" })
        yield* call("GET", `${prismBranch}/draft`)
        yield* call("GET", `${prismBranch}/draft?prefix=nodes/`)
        yield* call("GET", `${prismBranch}/draft/index`)
        yield* call("GET", `${prismBranch}/draft/index?prefix=tools/`)
        yield* call("PATCH", `${prismBranch}/draft`, {
          context: { assistant_description: "Checked by Prism" },
          nodes: { upsert: [llm("prism_extra")] },
          tools: { upsert: [tool("prism_lookup")] },
          variables: { upsert: [{ name: "tier", permission: "read_only", type: "string", default_value: "basic" }] }
        })
        yield* call("GET", `${prismBranch}/draft/nodes`)
        yield* call("GET", `${prismBranch}/draft/nodes/start`)
        yield* call("PUT", `${prismBranch}/draft/nodes/prism`, llm("prism"))
        yield* call("PATCH", `${prismBranch}/draft/nodes/prism`, { description: "A node for Prism" })
        yield* call("DELETE", `${prismBranch}/draft/nodes/prism`)
        yield* call("GET", `${prismBranch}/draft/tools`)
        yield* call("GET", `${prismBranch}/draft/tools/lookup`)
        yield* call("PUT", `${prismBranch}/draft/tools/prism_tool`, tool("prism_tool"))
        yield* call("PATCH", `${prismBranch}/draft/tools/prism_tool`, { description: "Patched" })
        yield* call("DELETE", `${prismBranch}/draft/tools/prism_tool`)
        yield* call("GET", `${prismBranch}/draft/variables`)
        yield* call("GET", `${prismBranch}/draft/variables/plan`)
        yield* call("PUT", `${prismBranch}/draft/variables/mode`, {
          permission: "read_write",
          type: "string",
          default_value: "calm"
        })
        yield* call("PATCH", `${prismBranch}/draft/variables/mode`, { default_value: "busy" })
        yield* call("DELETE", `${prismBranch}/draft/variables/mode`)
        yield* call("GET", `${prismBranch}/draft/config`)
        yield* call("PUT", `${prismBranch}/draft/config`, { initial_node_id: "start" })
        yield* call("PATCH", `${prismBranch}/draft/config`, { initial_node_id: "next" })
        yield* call("GET", `${prismBranch}/draft/context`)
        yield* call("PUT", `${prismBranch}/draft/context`, { assistant_name: "Prism", assistant_description: null })
        yield* call("PATCH", `${prismBranch}/draft/context`, { assistant_description: "Patched" })
        yield* call("GET", `${prismBranch}/changes`)
        yield* call("GET", `${prismBranch}/diff`)
        const published = yield* call("POST", `${prismBranch}/publish`, { message: "Prism", author_type: "human" })
        yield* call("PATCH", `${prismBranch}/draft/context`, { assistant_name: "Prism again" })
        yield* call("POST", `${prismBranch}/publish`)
        yield* call("PATCH", `${prismBranch}/draft/config`, { initial_node_id: "start" })
        yield* call("POST", `${prismBranch}/draft/discard`, { path: "config" })
        yield* call("POST", `${prismBranch}/draft/reset`, { commit_id: secondCommit })
        yield* call("POST", `${prismBranch}/rollback`, { commit_id: published?.commit?.id })
        yield* call("POST", `${assistant}/branches/feature/merge`, { source_branch_name: "prism" })
        yield* call("GET", `${assistant}/versions`)
        yield* call("GET", `${assistant}/versions?branch_name=main&limit=5&offset=0`)
        yield* call("GET", `${assistant}/versions/diff?commit_a=${firstCommit}&commit_b=${secondCommit}`)
        yield* call("GET", `${assistant}/versions/${secondCommit}`)
        yield* call("GET", `${assistant}/runtime`)
        yield* call("PUT", `${assistant}/rollout`, { branch_name: "prism", percent: 10 })
        yield* call("GET", `${assistant}/rollout`)
        yield* call("DELETE", `${assistant}/rollout`)
        yield* call("GET", `${assistant}/runtime-settings`)
        yield* call("PUT", `${assistant}/runtime-settings`, { session_pinning: "session" })
        yield* call("GET", `${assistant}/runs/stats?since=2000-01-01T00:00:00Z`)
        yield* call("GET", `${assistant}/runs/stats?since=2000-01-01T00:00:00Z&until=2100-01-01T00:00:00Z`)
        // Evaluations (A16, A17): no worker runs here, so they stay queued and can be cancelled.
        const evaluation = yield* call("POST", `${assistant}/evaluations`, {
          baseline: { branch_name: "main" },
          candidate: { commit_id: secondCommit },
          sessions: { ids: [aiSession] },
          repeats: 2
        })
        yield* call("POST", `${assistant}/evaluations`, {
          baseline: { branch_name: "prism", draft: true },
          candidate: { branch_name: "main" },
          sessions: { since: "2000-01-01T00:00:00Z", until: "2100-01-01T00:00:00Z", limit: 5 },
          judge: { instructions: "Prefer short replies." }
        })
        yield* call("GET", `${assistant}/evaluations?limit=5`)
        yield* call("GET", `${assistant}/evaluations?limit=1&after_id=${evaluation?.id}`)
        yield* call("GET", `${assistant}/evaluations/${evaluation?.id}`)
        yield* call("GET", `${assistant}/evaluations/${evaluation?.id}/turns?changed=true&limit=5`)
        yield* call("GET", `${assistant}/evaluations/${evaluation?.id}/turns?after_id=${evaluation?.id}`)
        yield* call("GET", `${assistant}/evaluations/${evaluation?.id}/report`)
        yield* call("DELETE", `${assistant}/evaluations/${evaluation?.id}`)
        yield* call("DELETE", `${assistant}/branches/prism-fork`)
        yield* call("POST", `${A}/assistants/${fixture("legacy")}/migrate`)

        // Valid requests the app refuses with a documented error: the errors' shapes are checked too.
        const unknown = "0190a000-0000-7000-8000-000000000000"
        yield* refused(404, "GET", `${C}/sessions/${unknown}`)
        yield* refused(400, "POST", `${C}/sessions/${created?.id}/finish`)
        yield* refused(404, "GET", `${C}/sessions/${aiSession}/messages/${unknown}`)
        yield* refused(404, "POST", `${C}/sessions/${aiSession}/messages/${unknown}/redact`)
        yield* refused(404, "GET", `${C}/erasures/${unknown}`)
        yield* refused(400, "GET", `${C}/data/sessions?after_id=${unknown}`)
        yield* refused(400, "GET", `${C}/data/messages?after_id=not-a-uuid`)
        yield* refused(404, "GET", `/admin/v1/organizations/${unknown}`)
        yield* refused(404, "GET", `${org}/apps/${unknown}`)
        yield* refused(404, "GET", `${org}/agents/${unknown}`)
        yield* refused(409, "DELETE", `${org}/agents/${aiAgent}`)
        yield* refused(409, "DELETE", `${A}/assistants/${fixture("assistant_id", 0)}`)
        yield* refused(409, "POST", `${assistant}/branches`, { name: "main" })
        yield* refused(404, "GET", `${assistant}/branches/nowhere/draft`)
        yield* refused(404, "GET", `${assistant}/rollout`)
        yield* refused(404, "GET", `${A}/assistants/${unknown}/versions`)
        yield* refused(404, "GET", `${assistant}/evaluations/${unknown}`)
        yield* refused(409, "DELETE", `${assistant}/evaluations/${evaluation?.id}`)
        yield* refused(422, "POST", `${assistant}/evaluations`, {
          baseline: { branch_name: "main" },
          candidate: { branch_name: "main" },
          sessions: { ids: [unknown] }
        })
        yield* refused(400, "POST", `${C}/sessions/${session}/messages`, {
          role: "user",
          content: { type: "function_call", name: "lookup" }
        })
        yield* refused(422, "POST", `${C}/sessions/${session}/messages`, { role: "user", content: { type: "image" } })

        // An organization over its rate limit (D20): RateLimit-* on every response, then 429 with Retry-After.
        const limited = yield* api.organization()
        yield* api.request("PATCH", `/admin/v1/organizations/${limited.id}/settings`, {
          token: ADMIN_TOKEN,
          body: { rate_limit_per_second: 1, rate_limit_burst: 1 }
        })
        for (let i = 0; i < 4; i++) {
          yield* send("refused", "POST", `${C}/sessions/search`, {
            body: { limit: 1 },
            token: limited.token,
            expected: [200, 429]
          })
        }

        // Invalid requests: each breaks the document, and Prism must say so.
        yield* invalid("POST", `${C}/sessions`, { body: { contact_id: "+15550102" } })
        yield* invalid("POST", `${C}/sessions`, { body: { contact_id: 15550102, contact_name: "Ada" } })
        yield* invalid("GET", `${C}/sessions/${session}`, { token: null })
        yield* invalid("GET", `${C}/data/sessions?limit=0`)
        yield* invalid("PATCH", `${org}/settings`, { body: { reply_debounce_seconds: "soon" } })
        yield* invalid("POST", `${org}/apps`, { body: { name: "Bad", webhook_url: PUBLIC_URL, events: ["nope"] } })
        yield* invalid("PUT", `${assistant}/rollout`, { body: { branch_name: "prism" } })
        yield* invalid("POST", `${C}/sessions/${session}/messages`, {
          body: text("keyed"),
          headers: { "idempotency-key": "a b" }
        })
        yield* invalid("POST", `${C}/sessions`, {
          body: "contact_id=+15550103",
          headers: { "content-type": "application/x-www-form-urlencoded" }
        })
        yield* fixtures.settle

        const seconds = (performance.now() - started) / 1000
        const valid = exchanges.filter((exchange) => exchange.kind === "valid")
        const refusals = exchanges.filter((exchange) => exchange.kind === "refused")
        const invalidOnes = exchanges.filter((exchange) => exchange.kind === "invalid")
        const covered = new Set(
          valid.flatMap((exchange) => (exchange.operation ? [exchange.operation.operationId] : []))
        )
        const missing = operations.map((operation) => operation.operationId).filter((id) => !covered.has(id))
        // Every query and header parameter of an operation is sent at least once to it, in a valid request.
        const parameters = operations.flatMap((operation) =>
          operation.parameters
            .filter((parameter) => parameter.in === "query" || parameter.in === "header")
            .map((parameter) => ({ operation, parameter }))
        )
        const unsent = parameters.filter(
          ({ operation, parameter }) =>
            !exchanges.some(
              (exchange) =>
                exchange.kind !== "invalid" &&
                exchange.operation === operation &&
                exchange.sent.has(parameter.name.toLowerCase())
            )
        )
        const reported = invalidOnes.filter((exchange) =>
          exchange.violations.some((violation) => violation.location[0] === "request")
        )
        const count = (list: ReadonlyArray<Exchange>) => list.reduce((n, e) => n + e.violations.length, 0)
        process.stderr.write(
          `[prism] Prism ${prism.version}: ${exchanges.length} requests (${valid.length} valid, ${refusals.length} valid and refused, ${invalidOnes.length} invalid) in ${seconds.toFixed(1)} s; operations covered ${covered.size}/${operations.length}, query and header parameters ${parameters.length - unsent.length}/${parameters.length}; violations: ${count(valid) + count(refusals)} on valid requests, ${count(invalidOnes)} on invalid requests (${reported.length}/${invalidOnes.length} reported)\n`
        )

        const problems: Array<string> = []
        for (const exchange of exchanges.filter((e) => e.operation === undefined)) {
          problems.push(`${describe(exchange)}: no operation of the document has this path`)
        }
        for (const exchange of valid) {
          if (exchange.status < 200 || exchange.status > 299) {
            problems.push(`${describe(exchange)}: a valid request did not succeed: ${exchange.text.slice(0, 300)}`)
          }
        }
        for (const exchange of refusals) {
          if (!exchange.expected.includes(exchange.status)) {
            problems.push(
              `${describe(exchange)}: expected ${exchange.expected.join(" or ")}: ${exchange.text.slice(0, 300)}`
            )
          }
        }
        for (const exchange of [...valid, ...refusals]) {
          for (const violation of exchange.violations) {
            problems.push(`${describe(exchange)}: ${violationText(violation)}`)
          }
        }
        for (const exchange of invalidOnes) {
          if (!reported.includes(exchange)) problems.push(`${describe(exchange)}: Prism reported no request violation`)
          if (exchange.status < 400 || exchange.status > 499) {
            problems.push(
              `${describe(exchange)}: the app did not refuse an invalid request: ${exchange.text.slice(0, 300)}`
            )
          }
          for (const violation of exchange.violations.filter((v) => v.location[0] !== "request")) {
            problems.push(`${describe(exchange)}: the answer to an invalid request: ${violationText(violation)}`)
          }
        }
        const limits = refusals.filter((exchange) => exchange.operation?.operationId === "sessions.search")
        if (!limits.some((exchange) => exchange.status === 429))
          problems.push("the rate-limited organization got no 429")
        if (missing.length > 0) problems.push(`operations not driven with a valid request: ${missing.join(", ")}`)
        for (const { operation, parameter } of unsent) {
          problems.push(`${operation.operationId}: its ${parameter.in} parameter ${parameter.name} was never sent`)
        }
        if (problems.length > 0) {
          assert.fail(
            `${problems.length} problems through Prism:\n${problems.join("\n")}\n\nPrism's log:\n${prism.output().slice(-5000)}`
          )
        }
      }).pipe(Effect.scoped),
    180_000
  )

  it.effect(
    "the check can fail: Prism reports a response the document does not describe (a changed enum, a field or a status left out)",
    () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const document = structuredClone((yield* api.request("GET", "/openapi.json")).body)
        document.components.schemas.Session.properties.status.enum = ["tampered"]
        // A field the server sends and the document no longer names (the objects are closed: closeObjects).
        const sessionSchema = document.components.schemas.Session
        delete sessionSchema.properties.ending_survey_submission_id
        sessionSchema.required = sessionSchema.required.filter((name: string) => name !== "ending_survey_submission_id")
        delete document.paths[`${C}/sessions/search`].post.responses["200"]
        document.components.headers["X-Request-Id"] = {
          required: true,
          schema: { type: "string", pattern: "^tampered$" }
        }
        const prism = yield* prismProxy(document, api.baseUrl)
        const org = yield* api.organization()
        const session = yield* org.session()
        const through = (method: string, path: string, body: unknown) =>
          Effect.promise(async () => {
            const response = await fetch(`${prism.url}${C}${path}`, {
              method,
              headers: { authorization: `Bearer ${org.token}`, "content-type": "application/json" },
              ...(method === "GET" ? {} : { body: JSON.stringify(body) })
            })
            await response.text()
            return { status: response.status, violations: violationsOf(response.headers).map(violationText) }
          })
        const got = yield* through("GET", `/sessions/${session.id}`, undefined)
        const searched = yield* through("POST", "/sessions/search", { contact_id: session.contact_id })
        assert.strictEqual(got.status, 200)
        assert.isTrue(
          got.violations.some((v) => v.includes("response.body.status")),
          `GET session: ${got.violations.join("; ")}`
        )
        assert.isTrue(
          got.violations.some((v) => v.includes("additional properties; found 'ending_survey_submission_id'")),
          `GET session: ${got.violations.join("; ")}`
        )
        assert.isTrue(
          got.violations.some((v) => v.includes("x-request-id")),
          `GET session: ${got.violations.join("; ")}`
        )
        assert.strictEqual(searched.status, 200)
        assert.isTrue(
          searched.violations.some((v) => v.startsWith("Error response")),
          `POST search: ${searched.violations.join("; ")}`
        )
      }).pipe(Effect.scoped),
    60_000
  )
})
