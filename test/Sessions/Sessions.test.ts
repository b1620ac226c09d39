/**
 * Sessions (conversations.md "Sessions", "Session status"; DECISIONS.md D1,
 * D2, D4-D8, D17, W1-W3).
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { assertSession, ISO_UTC } from "../support/Shapes.ts"
import { TestApi, withApp } from "../support/TestApp.ts"

const types = (events: ReadonlyArray<any>) => events.map((event) => event.type)

withApp()("sessions", (it) => {
  it.effect("POST /sessions creates an open session with the spec's shape, its conversation and events", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const agentId = yield* org.agent("ai", "Helper")
      const response = yield* org.call("POST", "/sessions", {
        contact_id: "+4915100000",
        contact_name: "Ada",
        agent_id: agentId,
        metadata: { whatsapp_instance_id: "inst-1", whatsapp_user_id: "u1" }
      })
      assert.strictEqual(response.status, 201)
      const session = assertSession(response.body)
      assert.strictEqual(session.status, "open")
      assert.strictEqual(session.contact_id, "+4915100000")
      assert.strictEqual(session.organization_id, org.id)
      assert.strictEqual(session.updated_at, null)
      assert.match(session.created_at, ISO_UTC)
      assert.deepStrictEqual(session.metadata, { whatsapp_instance_id: "inst-1", whatsapp_user_id: "u1" })
      assert.strictEqual(session.agent?.id, agentId)
      assert.strictEqual(session.agent?.type, "ai")
      // D7: an AI agent at creation gives the session a thread.
      assert.isString(session.thread_id)
      // W1: conversation.created for the new conversation, session.created carrying the agent.
      const events = yield* api.events(org.id)
      assert.deepStrictEqual(types(events), ["conversation.created", "session.created"])
      const created = events[1]
      // W3: exactly the envelope keys, timestamp in Unix seconds.
      assert.deepStrictEqual(Object.keys(created), ["id", "timestamp", "type", "organization_id", "data"])
      assert.deepStrictEqual(Object.keys(created.data), ["object"])
      assert.isTrue(Number.isInteger(created.timestamp) && Math.abs(created.timestamp - Date.now() / 1000) < 60)
      assert.strictEqual(created.organization_id, org.id)
      assert.deepStrictEqual(created.data.object, response.body)
      assert.strictEqual(events[0].data.object.id, session.conversation_id)
    })
  )

  it.effect("a second session of the same contact reuses the conversation (D8)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const first = yield* org.session({ contact_id: "c-1" })
      const second = yield* org.session({ contact_id: "c-1" })
      const other = yield* org.session({ contact_id: "c-2" })
      assert.strictEqual(first.conversation_id, second.conversation_id)
      assert.notStrictEqual(first.conversation_id, other.conversation_id)
      assert.deepStrictEqual(types(yield* api.events(org.id)), [
        "conversation.created",
        "session.created",
        "session.created",
        "conversation.created",
        "session.created"
      ])
    })
  )

  it.effect("creation with status closed is accepted; a human agent gives no thread (D7)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const human = yield* org.agent("human")
      const closed = yield* org.session({ status: "closed", agent_id: human })
      assert.strictEqual(closed.status, "closed")
      assert.strictEqual(closed.thread_id, null)
      assert.strictEqual(closed.agent.type, "human")
      assert.strictEqual(closed.agent.profile_id, "profile_test")
      const none = yield* org.session()
      assert.strictEqual(none.agent, null)
      assert.strictEqual(none.thread_id, null)
      assert.deepStrictEqual(none.metadata, {})
    })
  )

  it.effect("an agent_id that is not an agent of the organization gives 400 Agent not found (D6)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const other = yield* api.organization()
      const foreignAgent = yield* other.agent("ai")
      for (const agent_id of [foreignAgent, "not-an-id", "01a20254-e46f-73c4-a817-d7a14c37efe6"]) {
        const response = yield* org.call("POST", "/sessions", { contact_id: "x", contact_name: "X", agent_id })
        assert.strictEqual(response.status, 400)
        assert.deepStrictEqual(response.body, { detail: "Agent not found" })
      }
      // Nothing was written (W2).
      assert.deepStrictEqual(yield* api.events(org.id), [])
    })
  )

  it.effect("validation failures give 422 with every problem (Errors, D17)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const missing = yield* org.call("POST", "/sessions", { status: "pending", metadata: [] })
      assert.strictEqual(missing.status, 422)
      const locs = missing.body.detail.map((issue: any) => issue.loc.join("."))
      assert.includeMembers(locs, ["body.contact_id", "body.contact_name", "body.status", "body.metadata"])
      const contactIssue = missing.body.detail.find((issue: any) => issue.loc.join(".") === "body.contact_id")
      assert.deepStrictEqual(contactIssue, { loc: ["body", "contact_id"], msg: "Field required", type: "missing" })
      const tooLong = yield* org.call("POST", "/sessions", { contact_id: "x".repeat(256), contact_name: "A" })
      assert.strictEqual(tooLong.status, 422)
      assert.deepStrictEqual(tooLong.body.detail[0].loc, ["body", "contact_id"])
      const bigMetadata = yield* org.call("POST", "/sessions", {
        contact_id: "x",
        contact_name: "A",
        metadata: { blob: "y".repeat(16 * 1024) }
      })
      assert.strictEqual(bigMetadata.status, 422)
      assert.deepStrictEqual(bigMetadata.body.detail[0].loc, ["body", "metadata"])
      const justUnder = yield* org.call("POST", "/sessions", {
        contact_id: "x",
        contact_name: "A",
        metadata: { blob: "y".repeat(16 * 1024 - 20) }
      })
      assert.strictEqual(justUnder.status, 201)
    })
  )

  it.effect("GET returns the session; unknown, malformed and foreign ids give 404 (D1)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const other = yield* api.organization()
      const session = yield* org.session()
      const found = yield* org.call("GET", `/sessions/${session.id}`)
      assert.strictEqual(found.status, 200)
      assert.deepStrictEqual(found.body, session)
      for (const id of ["01a20254-e46f-73c4-a817-d7a14c37efe6", "nope", session.id]) {
        const caller = id === session.id ? other : org
        const response = yield* caller.call("GET", `/sessions/${id}`)
        assert.strictEqual(response.status, 404)
        assert.deepStrictEqual(response.body, { detail: "Session not found" })
      }
    })
  )

  it.effect("search: newest first, filters, containment, limits and isolation (D2)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const other = yield* api.organization()
      const created = []
      for (let i = 0; i < 12; i++) {
        created.push(
          yield* org.session({
            contact_id: i % 2 === 0 ? "even" : "odd",
            metadata: { channel_instance_id: i < 6 ? "a" : "b", n: i, nested: { k: i % 3 } }
          })
        )
      }
      yield* other.session({ contact_id: "even", metadata: { channel_instance_id: "a" } })
      const all = yield* org.call("POST", "/sessions/search", {})
      assert.strictEqual(all.status, 200)
      // Default limit 10, newest first.
      assert.deepStrictEqual(
        all.body.map((session: any) => session.id),
        created
          .slice(2)
          .reverse()
          .map((session) => session.id)
      )
      const byContact = yield* org.call("POST", "/sessions/search", { contact_id: "even", limit: 100 })
      assert.strictEqual(byContact.body.length, 6)
      assert.isTrue(byContact.body.every((session: any) => session.contact_id === "even"))
      const byMetadata = yield* org.call("POST", "/sessions/search", {
        metadata: { channel_instance_id: "a", nested: { k: 0 } }
      })
      assert.deepStrictEqual(
        byMetadata.body.map((session: any) => session.metadata.n),
        [3, 0]
      )
      const paged = yield* org.call("POST", "/sessions/search", { offset: 10, limit: 5 })
      assert.deepStrictEqual(
        paged.body.map((session: any) => session.id),
        [created[1].id, created[0].id]
      )
      yield* org.call("POST", `/sessions/${created[0].id}/finish`, {})
      const open = yield* org.call("POST", "/sessions/search", { status: "open", limit: 1000 })
      assert.strictEqual(open.body.length, 11)
      const closed = yield* org.call("POST", "/sessions/search", { status: "closed" })
      assert.deepStrictEqual(
        closed.body.map((session: any) => session.id),
        [created[0].id]
      )
      const tooMany = yield* org.call("POST", "/sessions/search", { limit: 1001 })
      assert.strictEqual(tooMany.status, 422)
      assert.deepStrictEqual(tooMany.body.detail[0].loc, ["body", "limit"])
      assert.strictEqual(tooMany.body.detail[0].type, "less_than_equal")
      const negative = yield* org.call("POST", "/sessions/search", { offset: -1, limit: 0 })
      assert.strictEqual(negative.status, 422)
      assert.strictEqual(negative.body.detail.length, 2)
    })
  )

  it.effect("PATCH replaces metadata, changes the agent as transfer does, closes as finish does (D4)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const ai = yield* org.agent("ai")
      const session = yield* org.session({ metadata: { keep: 1, drop: 2 } })
      const patched = yield* org.call("PATCH", `/sessions/${session.id}`, { fields: { metadata: { keep: 1 } } })
      assert.strictEqual(patched.status, 200)
      assert.deepStrictEqual(patched.body.metadata, { keep: 1 })
      assert.match(patched.body.updated_at, ISO_UTC)
      const withAgent = yield* org.call("PATCH", `/sessions/${session.id}`, { fields: { agent_id: ai } })
      assert.strictEqual(withAgent.body.agent.id, ai)
      assert.isString(withAgent.body.thread_id)
      const removed = yield* org.call("PATCH", `/sessions/${session.id}`, { fields: { agent_id: null } })
      assert.strictEqual(removed.body.agent, null)
      // D7: the thread is kept after the agent goes.
      assert.strictEqual(removed.body.thread_id, withAgent.body.thread_id)
      const closed = yield* org.call("PATCH", `/sessions/${session.id}`, { fields: { status: "closed" } })
      assert.strictEqual(closed.body.status, "closed")
      const events = yield* api.events(org.id)
      assert.deepStrictEqual(types(events).slice(2), [
        "session.transferred",
        "session.transferred",
        "session.finished",
        "session.closed"
      ])
      // W1: finished/closed carry action null; transferred has no action.
      assert.strictEqual(events[4].data.object.action, null)
      assert.strictEqual(events[5].data.object.action, null)
      assert.isFalse("action" in events[2].data.object)
      assert.deepStrictEqual(events[5].data.object, { ...closed.body, action: null })
      // D4: reopening is refused with its own text; other PATCHes on a closed session with D5's.
      const reopen = yield* org.call("PATCH", `/sessions/${session.id}`, { fields: { status: "open" } })
      assert.strictEqual(reopen.status, 400)
      assert.deepStrictEqual(reopen.body, { detail: "Session is closed and cannot be reopened" })
      const onClosed = yield* org.call("PATCH", `/sessions/${session.id}`, { fields: { metadata: {} } })
      assert.strictEqual(onClosed.status, 400)
      assert.deepStrictEqual(onClosed.body, { detail: "Session is not open" })
    })
  )

  it.effect("PATCH with an unknown agent changes nothing (D6, W2)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const session = yield* org.session({ metadata: { a: 1 } })
      const response = yield* org.call("PATCH", `/sessions/${session.id}`, {
        fields: { metadata: { b: 2 }, agent_id: "01a20254-e46f-73c4-a817-d7a14c37efe6" }
      })
      assert.strictEqual(response.status, 400)
      assert.deepStrictEqual(response.body, { detail: "Agent not found" })
      const after = yield* org.call("GET", `/sessions/${session.id}`)
      assert.deepStrictEqual(after.body, session)
      assert.deepStrictEqual(types(yield* api.events(org.id)), ["conversation.created", "session.created"])
    })
  )

  it.effect("transfer replaces or removes the agent, stays open, emits session.transferred", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const human = yield* org.agent("human")
      const ai = yield* org.agent("ai")
      const session = yield* org.session({ agent_id: human })
      assert.strictEqual(session.thread_id, null)
      const toAi = yield* org.call("POST", `/sessions/${session.id}/transfer`, { agent_id: ai })
      assert.strictEqual(toAi.status, 200)
      assert.strictEqual(toAi.body.status, "open")
      assert.strictEqual(toAi.body.agent.id, ai)
      // D7: the first AI agent sets the thread.
      assert.isString(toAi.body.thread_id)
      const toNone = yield* org.call("POST", `/sessions/${session.id}/transfer`, { agent_id: null })
      assert.strictEqual(toNone.body.agent, null)
      const omitted = yield* org.call("POST", `/sessions/${session.id}/transfer`, {})
      assert.strictEqual(omitted.status, 200)
      const back = yield* org.call("POST", `/sessions/${session.id}/transfer`, { agent_id: ai })
      assert.strictEqual(back.body.thread_id, toAi.body.thread_id)
      const events = yield* api.events(org.id)
      assert.deepStrictEqual(types(events).slice(2), [
        "session.transferred",
        "session.transferred",
        "session.transferred",
        "session.transferred"
      ])
      assert.deepStrictEqual(events[5].data.object, back.body)
      const bad = yield* org.call("POST", `/sessions/${session.id}/transfer`, { agent_id: "nope" })
      assert.strictEqual(bad.status, 400)
      assert.deepStrictEqual(bad.body, { detail: "Agent not found" })
    })
  )

  it.effect("finish closes with the survey id; a closed session refuses transfer and finish (D5)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const ai = yield* org.agent("ai")
      const session = yield* org.session({ agent_id: ai })
      const finished = yield* org.call("POST", `/sessions/${session.id}/finish`, { ending_survey_id: "survey-9" })
      assert.strictEqual(finished.status, 200)
      assert.strictEqual(finished.body.status, "closed")
      assert.strictEqual(finished.body.ending_survey_submission_id, "survey-9")
      const events = yield* api.events(org.id)
      assert.deepStrictEqual(types(events).slice(2), ["session.finished", "session.closed"])
      assert.deepStrictEqual(events[2].data.object, { ...finished.body, action: null })
      for (const [path, body] of [
        ["finish", {}],
        ["transfer", { agent_id: null }]
      ] as const) {
        const response = yield* org.call("POST", `/sessions/${session.id}/${path}`, body)
        assert.strictEqual(response.status, 400)
        assert.deepStrictEqual(response.body, { detail: "Session is not open" })
      }
      // GET still works on a closed session (D5).
      assert.strictEqual((yield* org.call("GET", `/sessions/${session.id}`)).status, 200)
    })
  )

  it.effect("every session operation on another organization's session gives 404 and changes nothing (D1)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const owner = yield* api.organization()
      const intruder = yield* api.organization()
      const session = yield* owner.session()
      const attempts: ReadonlyArray<readonly [string, string, unknown]> = [
        ["GET", "", undefined],
        ["PATCH", "", { fields: { metadata: { x: 1 } } }],
        ["POST", "/transfer", { agent_id: null }],
        ["POST", "/finish", {}],
        ["POST", "/messages", { role: "user", content: { type: "text", text: "hi" } }],
        ["POST", "/messages/search", { session_id: session.id }]
      ]
      for (const [method, suffix, body] of attempts) {
        const response = yield* intruder.call(method, `/sessions/${session.id}${suffix}`, body)
        assert.strictEqual(response.status, 404, `${method} ${suffix}`)
        assert.deepStrictEqual(response.body, { detail: "Session not found" })
      }
      const search = yield* intruder.call("POST", "/sessions/search", { contact_id: session.contact_id })
      assert.deepStrictEqual(search.body, [])
      assert.deepStrictEqual((yield* owner.call("GET", `/sessions/${session.id}`)).body, session)
      assert.deepStrictEqual(yield* api.events(intruder.id), [])
    })
  )

  it.effect("20 concurrent transfers and PATCHes on one session serialize: every change has its event", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const agents = yield* Effect.forEach([0, 1, 2, 3], (i) => org.agent(i % 2 === 0 ? "ai" : "human"))
      const session = yield* org.session()
      const responses = yield* Effect.forEach(
        Array.from({ length: 20 }, (_, i) => i),
        (i) =>
          i % 2 === 0
            ? org.call("POST", `/sessions/${session.id}/transfer`, { agent_id: agents[i % 4] })
            : org.call("PATCH", `/sessions/${session.id}`, { fields: { metadata: { i } } }),
        { concurrency: "unbounded" }
      )
      assert.deepStrictEqual(
        responses.map((response) => response.status),
        Array(20).fill(200)
      )
      const events = yield* api.events(org.id)
      assert.strictEqual(types(events).filter((type) => type === "session.transferred").length, 10)
      const final = yield* org.call("GET", `/sessions/${session.id}`)
      // The last transferred event describes the session as it ended up.
      const lastTransfer = events.filter((event) => event.type === "session.transferred").at(-1)
      assert.strictEqual(lastTransfer.data.object.agent.id, final.body.agent.id)
    })
  )
})

withApp()("sessions without a body", (it) => {
  it.effect("finish and transfer accept no body at all (the body may be empty)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const ai = yield* org.agent("ai")
      const session = yield* org.session({ agent_id: ai })
      const transfer = yield* api.request("POST", `/conversations/v2/api/v1/sessions/${session.id}/transfer`, {
        token: org.token
      })
      assert.strictEqual(transfer.status, 200)
      assert.strictEqual(transfer.body.agent, null)
      const finish = yield* api.request("POST", `/conversations/v2/api/v1/sessions/${session.id}/finish`, {
        token: org.token
      })
      assert.strictEqual(finish.status, 200)
      assert.strictEqual(finish.body.status, "closed")
      const bad = yield* org.call("POST", `/sessions/${session.id}/finish`, { ending_survey_id: 5 })
      assert.strictEqual(bad.status, 422)
    })
  )

  it.effect(
    "issue 37 item 3 (conversations.md 'Sessions', DECISIONS 'Errors'): a JSON null body on transfer, finish and reply is 422 like any other non-object; nothing changes",
    () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const org = yield* api.organization()
        const ai = yield* org.agent("ai")
        const session = yield* org.session({ agent_id: ai })
        const eventsBefore = yield* api.events(org.id)
        for (const operation of ["transfer", "finish", "reply"]) {
          for (const body of ["null", "[]", "5"]) {
            const refused = yield* org.call("POST", `/sessions/${session.id}/${operation}`, body)
            assert.strictEqual(refused.status, 422, `${operation} ${body}: ${refused.text}`)
            assert.deepStrictEqual(refused.body.detail, [
              { loc: ["body"], msg: "Input should be a valid dictionary", type: "dict_type" }
            ])
          }
        }
        // An object is checked member by member, NoBody adding no problem of its own.
        const wrongMember = yield* org.call("POST", `/sessions/${session.id}/transfer`, { agent_id: 5 })
        assert.deepStrictEqual(wrongMember.body.detail, [
          { loc: ["body", "agent_id"], msg: "Input should be a valid string", type: "string_type" }
        ])
        const after = yield* org.call("GET", `/sessions/${session.id}`)
        assert.deepStrictEqual([after.body.status, after.body.agent?.id, after.body.updated_at], ["open", ai, null])
        assert.strictEqual((yield* api.events(org.id)).length, eventsBefore.length)
      })
  )

  it.effect(
    "D8: 20 concurrent POST /sessions for a new contact share one conversation and one conversation.created",
    () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const org = yield* api.organization()
        const created = yield* Effect.forEach(
          Array.from({ length: 20 }, (_, i) => i),
          (i) => org.call("POST", "/sessions", { contact_id: "+15559990", contact_name: `Ada ${i}` }),
          { concurrency: "unbounded" }
        )
        assert.deepStrictEqual(
          created.map((response) => response.status),
          Array.from({ length: 20 }, () => 201)
        )
        assert.strictEqual(new Set(created.map((response) => response.body.conversation_id)).size, 1)
        const events = yield* api.events(org.id)
        assert.strictEqual(events.filter((event) => event.type === "conversation.created").length, 1)
        assert.strictEqual(events.filter((event) => event.type === "session.created").length, 20)
      })
  )
})
