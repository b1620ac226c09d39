/**
 * What tests that drive every operation of `/openapi.json` share (the fuzz run,
 * test/Http/Fuzz.test.ts, and the Prism conformance run, test/Http/Prism.test.ts):
 * the operations as read from the document, and an organization with a fixture
 * for every path parameter (sessions, messages, a schedule, an erasure, a
 * versioned and a legacy assistant, agents, webhook apps with deliveries, an
 * API key).
 */
import { Effect } from "effect"
import { A, llm, tool } from "./Assistants.ts"
import { ADMIN_TOKEN, C, TestApi, type TestResponse } from "./TestApp.ts"

/** A public address literal: accepted by the W6 guard without DNS (the test machine may be offline). */
export const PUBLIC_URL = "https://93.184.215.14/hooks/parley"

/** A schema of the document, as JSON. */
export type Schema = { readonly [k: string]: any }

/** A parameter of an operation. */
export interface Parameter {
  readonly name: string
  readonly in: "path" | "query" | "header" | "cookie"
  readonly required?: boolean
  readonly schema?: Schema
}

/** An operation of the document. */
export interface Operation {
  readonly operationId: string
  readonly method: string
  /** The template: `/conversations/v2/api/v1/sessions/{session_id}`. */
  readonly path: string
  readonly parameters: ReadonlyArray<Parameter>
  readonly body: Schema | undefined
  readonly auth: "org" | "admin" | "none"
}

/** The HTTP methods operations are read for. */
const METHODS = ["get", "put", "post", "delete", "patch"] as const

/**
 * Every operation of an OpenAPI document (`paths`), with its parameters (those
 * given as a `$ref` to `components.parameters`, such as `Idempotency-Key`,
 * resolved), JSON body schema and kind of credential.
 */
export const operationsOf = (doc: any): ReadonlyArray<Operation> =>
  Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([path, item]) =>
    METHODS.filter((method) => item[method] !== undefined).map((method): Operation => {
      const op = item[method]
      const schemes = (op.security ?? doc.security ?? []).flatMap((s: object) => Object.keys(s)) as Array<string>
      const resolve = (parameter: any): Parameter =>
        typeof parameter.$ref === "string"
          ? doc.components.parameters[parameter.$ref.replace("#/components/parameters/", "")]
          : parameter
      return {
        operationId: op.operationId,
        method: method.toUpperCase(),
        path,
        parameters: [...(item.parameters ?? []), ...(op.parameters ?? [])].map(resolve),
        body: op.requestBody?.content?.["application/json"]?.schema,
        auth: schemes.includes("adminToken")
          ? "admin"
          : schemes.length > 0 || path.startsWith(C) || path.startsWith(A)
            ? "org"
            : "none"
      }
    })
  )

// ---------------------------------------------------------------------------
// Fixtures. Ids of fixtures that requests use up (sessions get finished, the
// spare app and key deleted, the legacy assistant migrated) are written into
// requests as references (`@@session.0@@`) and resolved when sent, against
// fixtures renewed before every chunk of requests.

/** A reference to the `index`th current value of a used-up fixture, resolved by {@link resolveRefs}. */
const ref = (name: string, index = 0) => `@@${name}.${index}@@`

/** The current values of the references, by name. */
export type Current = Readonly<Record<string, ReadonlyArray<string>>>

/** `text` with the references of {@link ref} (also percent-encoded) replaced by the current values. */
export const resolveRefs = (text: string, current: Current): string =>
  text
    .replace(/@@(\w+)\.(\d+)@@/g, (whole, name: string, i: string) => {
      const values = current[name] ?? []
      return values.length > 0 ? values[Number(i) % values.length]! : whole
    })
    .replace(/%40%40(\w+)\.(\d+)%40%40/g, (whole, name: string, i: string) => {
      const values = current[name] ?? []
      return values.length > 0 ? encodeURIComponent(values[Number(i) % values.length]!) : whole
    })

/** The fixtures of {@link makeFixtures}. */
export interface Fixtures {
  readonly orgId: string
  readonly orgToken: string
  /** Real values (or references) by parameter or member name. */
  readonly pools: Readonly<Record<string, ReadonlyArray<string>>>
  /** Real values for DELETE operations, so that the fixtures most requests use survive a chunk. */
  readonly deletable: Readonly<Record<string, ReadonlyArray<string>>>
  /**
   * Real values for the operations (`"PATCH /admin/v1/..."`) that delete or
   * change a fixture others depend on, over `deletable` (issue 39 item 6: an
   * agent's DELETE and PATCH, an assistant's DELETE).
   */
  readonly spareAt: Readonly<Record<string, Readonly<Record<string, ReadonlyArray<string>>>>>
  /** Real values for operations that finish a session, likewise. */
  readonly finishable: Readonly<Record<string, ReadonlyArray<string>>>
  /** Puts back what requests may have changed and makes new used-up fixtures; returns the references' values. */
  readonly renew: Effect.Effect<Current>
  /**
   * Leaves the organization quiet for the other test files sharing the
   * database: default settings (no idle timeout for their expiry sweepers to
   * act on) and the apps disabled.
   */
  readonly settle: Effect.Effect<void>
}

/** The body of a 2xx response; throws naming `what` otherwise. */
const ok = (what: string, response: TestResponse) => {
  if (response.status < 200 || response.status > 299) {
    throw new Error(`fixture ${what} failed: ${response.status} ${response.text}`)
  }
  return response.body
}

/** A user's text message body. */
export const text = (value: string) => ({ role: "user", content: { type: "text", text: value } })

/** The nodes of the fixture assistant's `main` branch. */
const NODES = [llm("start", { next_node: "next", tools: ["lookup"] }), llm("next"), llm("extra")]
/** The variable of the fixture assistant. */
const VARIABLE = { name: "plan", permission: "read_write", type: "string", default_value: "free" }
/** An organization's default settings. */
export const defaultSettings = {
  reply_debounce_seconds: 3,
  session_idle_timeout_seconds: null,
  default_agent_id: null,
  rate_limit_per_second: null,
  rate_limit_burst: null,
  message_retention_days: null,
  event_retention_days: 30
}
/** The events the fixture apps subscribe to. */
export const EVENTS = [
  "message.created",
  "message.updated",
  "session.created",
  "session.finished",
  "conversation.created"
]

/**
 * An organization with an API key; a versioned assistant with two commits on
 * `main`, branches `feature` and `spare`, nodes, a tool and a variable; a legacy
 * assistant; an AI and a human agent; a webhook app with deliveries; sessions
 * (open, AI-served, finished) with a message and a schedule.
 */
export const makeFixtures = Effect.gen(function* () {
  const api = yield* TestApi
  const org = yield* api.organization()
  const admin = (method: string, path: string, body?: unknown) =>
    api.request(method, `/admin/v1/organizations/${org.id}${path}`, {
      token: ADMIN_TOKEN,
      ...(body !== undefined ? { body } : {})
    })
  const assistant = ok("assistant", yield* admin("POST", "/assistants", { name: "Fuzz bot" }))
  const assistantCall = (method: string, path: string, body?: unknown) =>
    api.request(method, `${A}/assistants/${assistant.id}${path}`, {
      token: org.token,
      ...(body !== undefined ? { body } : {})
    })
  ok(
    "draft",
    yield* assistantCall("PATCH", "/branches/main/draft", {
      context: { assistant_name: "Fuzz", assistant_description: "Answers fuzz" },
      config: { initial_node_id: "start" },
      nodes: { upsert: NODES.slice(0, 2) },
      tools: { upsert: [tool("lookup")] },
      variables: { upsert: [VARIABLE] }
    })
  )
  const first = ok("publish", yield* assistantCall("POST", "/branches/main/publish", { message: "first" })).commit
  ok("node", yield* assistantCall("PUT", "/branches/main/draft/nodes/extra", NODES[2]))
  const second = ok("publish", yield* assistantCall("POST", "/branches/main/publish", { message: "second" })).commit
  const aiAgent = ok(
    "ai agent",
    yield* admin("POST", "/agents", { name: "Bot", type: "ai", assistant_id: assistant.id })
  )
  const humanAgent = ok(
    "human agent",
    yield* admin("POST", "/agents", { name: "Ada", type: "human", profile_id: "profile_1" })
  )
  const app = ok("app", yield* admin("POST", "/apps", { name: "CRM", webhook_url: PUBLIC_URL, events: EVENTS }))

  let spareApp: string | undefined
  const renew = Effect.gen(function* () {
    yield* admin("PATCH", "/settings", defaultSettings)
    yield* admin("PATCH", `/apps/${app.id}`, { webhook_url: PUBLIC_URL, events: EVENTS, enabled: true })
    for (const branch of ["main", "feature", "spare"]) yield* assistantCall("POST", "/branches", { name: branch })
    for (const node of NODES) yield* assistantCall("PUT", `/branches/main/draft/nodes/${node.id}`, node)
    yield* assistantCall("PUT", "/branches/main/draft/tools/lookup", tool("lookup"))
    yield* assistantCall("PUT", "/branches/main/draft/variables/plan", VARIABLE)
    yield* assistantCall("PUT", "/branches/main/draft/config", { initial_node_id: "start" })
    yield* assistantCall("PUT", "/branches/main/draft/context", { assistant_name: "Fuzz" })
    const legacy = ok(
      "legacy assistant",
      yield* admin("POST", "/assistants", {
        name: "Legacy bot",
        versioned: false,
        snapshot: { context: { assistant_name: "Old" }, graph: { initial_node_id: "n", nodes: [llm("n")] } }
      })
    )
    if (spareApp === undefined || (yield* admin("GET", `/apps/${spareApp}`)).status !== 200) {
      spareApp = ok(
        "spare app",
        yield* admin("POST", "/apps", { name: "Spare", webhook_url: PUBLIC_URL, events: EVENTS })
      ).id as string
    }
    const key = ok("spare key", yield* admin("POST", "/api-keys", { name: "spare" }))
    // Issue 39 item 6: an agent to change and delete (the others serve the fixture sessions), the AI agent put back.
    const spareAgent = ok(
      "spare agent",
      yield* admin("POST", "/agents", { name: "Spare", type: "human", profile_id: "profile_2" })
    )
    yield* admin("PATCH", `/agents/${aiAgent.id}`, { name: "Bot", assistant_id: assistant.id })
    const session = yield* org.session({ metadata: { plan: "gold" } })
    const aiSession = yield* org.session({ contact_id: "+15550002", agent_id: aiAgent.id })
    const finished = yield* org.session({ contact_id: "+15550003" })
    const spares = [
      yield* org.session({ contact_id: "+15550004" }),
      yield* org.session({ contact_id: "+15550005", agent_id: humanAgent.id })
    ]
    const message = ok(
      "message",
      yield* org.call("POST", `/sessions/${session.id}/messages`, {
        role: "user",
        content: { type: "text", text: "Hello" },
        provider_message_id: "wamid.fuzz.1"
      })
    )
    ok("message", yield* org.call("POST", `/sessions/${aiSession.id}/messages`, text("Hi bot")))
    const schedule = ok(
      "schedule",
      yield* org.call("POST", `/sessions/${aiSession.id}/schedule`, {
        scheduled_for: new Date(Date.now() + 86_400_000).toISOString(),
        config: { type: "node", node_id: "start" }
      })
    )
    ok("finish", yield* org.call("POST", `/sessions/${finished.id}/finish`, {}))
    // D22: a contact for DELETE /contacts/{contact_id} (made again after each erasure), and an erasure to GET.
    yield* org.session({ contact_id: "+15550006" })
    yield* org.session({ contact_id: "+15550007" })
    const erasure = ok("erasure", yield* org.call("DELETE", "/contacts/%2B15550007"))
    // A16: an evaluation to read and one to cancel (queued until a worker takes them; of no session, so no model is asked).
    const evaluation = () =>
      assistantCall("POST", "/evaluations", {
        baseline: { branch_name: "main" },
        candidate: { branch_name: "main", draft: true },
        sessions: { ids: [session.id] }
      }).pipe(Effect.map((response) => ok("evaluation", response)))
    const evaluations = [yield* evaluation(), yield* evaluation()]
    const deliveries: ReadonlyArray<{ id: string }> = ok(
      "deliveries",
      yield* admin("GET", `/apps/${app.id}/deliveries?limit=5`)
    )
    if (deliveries.length === 0) throw new Error("fixture deliveries: none")
    return {
      session: [session.id, aiSession.id, finished.id],
      spareSession: spares.map((s) => s.id),
      message: [message.id],
      schedule: [schedule.id],
      erasure: [erasure.id],
      evaluation: [evaluations[0]!.id],
      spareEvaluation: [evaluations[1]!.id],
      legacy: [legacy.id],
      spareApp: [spareApp],
      key: [key.id],
      spareAgent: [spareAgent.id],
      delivery: deliveries.map((d) => d.id)
    } satisfies Current
  })

  const sessions = [ref("session", 0), ref("session", 1), ref("session", 2)]
  const nodes = NODES.map((node) => node.id)
  const commits = [first.id, second.id]
  const branches = ["main", "feature", "spare"]
  const pools: Record<string, ReadonlyArray<string>> = {
    org_id: [org.id],
    key_id: [ref("key")],
    session_id: sessions,
    session_ids: sessions,
    message_id: [ref("message")],
    schedule_id: [ref("schedule")],
    erasure_id: [ref("erasure")],
    evaluation_id: [ref("evaluation")],
    ids: sessions,
    assistant_id: [assistant.id, assistant.id, ref("legacy")],
    branch_name: branches,
    source_branch_name: branches,
    node_id: nodes,
    initial_node_id: nodes,
    starting_node_id: nodes,
    next_node: nodes,
    tool_id: ["lookup"],
    variable_id: ["plan"],
    commit_id: commits,
    commit_a: commits,
    commit_b: commits,
    app_id: [app.id],
    delivery_id: [ref("delivery", 0), ref("delivery", 1)],
    agent_id: [aiAgent.id, humanAgent.id],
    default_agent_id: [aiAgent.id, humanAgent.id],
    after_id: [ref("session"), ref("message")],
    prefix: ["nodes/", "tools/", "variables/", "config", "context", ""],
    path: ["nodes/start", "nodes/next", "tools/lookup", "variables/plan", "config", "context"],
    profile_id: ["profile_1"],
    contact_id: ["+15550001", "+15550002"],
    provider_message_id: ["wamid.fuzz.1"],
    replied_provider_message_id: ["wamid.fuzz.1"],
    to: ["+15550100"],
    // Not the contacts of the sessions above: an ingest with `session: "close"` closes the contact's session.
    from: ["+15550009"],
    channel_type: ["whatsapp", "sms"],
    url: [PUBLIC_URL],
    webhook_url: [PUBLIC_URL, "http://93.184.215.15:8443/other"],
    type: ["text", "image", "audio", "video", "file", "function_call", "thought", "string", "number", "boolean"],
    mime_type: ["application/pdf"],
    role: ["user", "assistant"]
  }
  const deletable: Record<string, ReadonlyArray<string>> = {
    app_id: [ref("spareApp")],
    contact_id: ["+15550006"],
    evaluation_id: [ref("spareEvaluation")],
    branch_name: ["spare", "feature", "main"]
  }
  const finishable = { session_id: [ref("spareSession", 0), ref("spareSession", 1)] }
  const spareAgent = { agent_id: [ref("spareAgent")] }
  const spareAssistant = { assistant_id: [ref("legacy")] }
  const spareAt = {
    "PATCH /admin/v1/organizations/{org_id}/agents/{agent_id}": spareAgent,
    "DELETE /admin/v1/organizations/{org_id}/agents/{agent_id}": spareAgent,
    "DELETE /admin/v1/organizations/{org_id}/assistants/{assistant_id}": spareAssistant,
    [`DELETE ${A}/assistants/{assistant_id}`]: spareAssistant
  }
  const settle = Effect.gen(function* () {
    yield* admin("PATCH", "/settings", defaultSettings)
    const apps: ReadonlyArray<{ id: string }> = ok("apps", yield* admin("GET", "/apps"))
    for (const each of apps) yield* admin("PATCH", `/apps/${each.id}`, { enabled: false })
  })
  return { orgId: org.id, orgToken: org.token, pools, deletable, spareAt, finishable, renew, settle } satisfies Fixtures
})
