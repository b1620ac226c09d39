/**
 * Error bodies of every API (DECISIONS.md "Errors", O4): 401 with
 * WWW-Authenticate, 413 before reading, 415, malformed JSON, every validation
 * problem with its `loc`, unknown routes, defects as 500 without the cause.
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { brokenSessions } from "../support/Broken.ts"
import { C, TestApi, withApp } from "../support/TestApp.ts"

withApp({ maxBodyBytes: 4096 })("errors", (it) => {
  it.effect("401 Invalid or expired token for missing, malformed and unknown tokens, with WWW-Authenticate", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const session = yield* org.session()
      const variants: ReadonlyArray<Record<string, string>> = [
        {},
        { authorization: "Bearer" },
        { authorization: "Basic dXNlcjpwYXNz" },
        { authorization: "Bearer prl_unknown" },
        { authorization: `Bearer ${org.token}x` },
        { authorization: org.token }
      ]
      for (const headers of variants) {
        for (const [method, path, body] of [
          ["GET", `${C}/sessions/${session.id}`, undefined],
          ["POST", `${C}/sessions`, { contact_id: "x", contact_name: "y" }],
          ["POST", `${C}/sessions`, "{not json"]
        ] as const) {
          const response = yield* api.request(method, path, { headers, ...(body !== undefined ? { body } : {}) })
          assert.strictEqual(response.status, 401, JSON.stringify(headers))
          assert.deepStrictEqual(response.body, { detail: "Invalid or expired token" })
          assert.strictEqual(response.headers.get("www-authenticate"), "Bearer")
        }
      }
    })
  )

  it.effect("422 names every problem at once: a missing role and a text content without text (Errors, D12)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const session = yield* org.session()
      const response = yield* org.call("POST", `/sessions/${session.id}/messages`, { content: { type: "text" } })
      assert.strictEqual(response.status, 422)
      assert.sameDeepMembers(response.body.detail, [
        { loc: ["body", "role"], msg: "Field required", type: "missing" },
        { loc: ["body", "content", "text"], msg: "Field required", type: "missing" }
      ])
      // An unknown type stays 400 once the rest of the request is valid (D12).
      const unknown = yield* org.call("POST", `/sessions/${session.id}/messages`, {
        role: "user",
        content: { type: "sticker" }
      })
      assert.strictEqual(unknown.status, 400)
      assert.deepStrictEqual(unknown.body, { detail: "Invalid content type" })
    })
  )

  it.effect("431 for a request head over 128 KiB, with a {detail} body and a request id (Errors, O8)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const response = yield* api.request("GET", `${C}/sessions`, { headers: { "x-padding": "x".repeat(140 * 1024) } })
      assert.strictEqual(response.status, 431)
      assert.deepStrictEqual(response.body, { detail: "Request header fields too large" })
      assert.isString(response.headers.get("x-request-id"))
    })
  )

  it.effect("413 Request body too large over MAX_BODY_BYTES, declared or streamed", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const big = JSON.stringify({ contact_id: "x", contact_name: "y".repeat(5000) })
      const response = yield* api.request("POST", `${C}/sessions`, { token: org.token, body: big })
      assert.strictEqual(response.status, 413)
      assert.deepStrictEqual(response.body, { detail: "Request body too large" })
      const chunked = yield* Effect.promise(async () => {
        const stream = new ReadableStream({
          start(controller) {
            controller.enqueue(new TextEncoder().encode(big))
            controller.close()
          }
        })
        const res = await fetch(`${api.baseUrl}${C}/sessions`, {
          method: "POST",
          headers: { authorization: `Bearer ${org.token}`, "content-type": "application/json" },
          body: stream,
          duplex: "half"
        } as RequestInit)
        return { status: res.status, body: await res.json() }
      })
      assert.strictEqual(chunked.status, 413)
      assert.deepStrictEqual(chunked.body, { detail: "Request body too large" })
      assert.deepStrictEqual(yield* api.events(org.id), [])
    })
  )

  it.effect("415 for a body that is not JSON; 422 json_invalid for malformed JSON; 422 missing for no body", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const plain = yield* api.request("POST", `${C}/sessions`, {
        token: org.token,
        body: "contact_id=x",
        headers: { "content-type": "text/plain" }
      })
      assert.strictEqual(plain.status, 415)
      assert.deepStrictEqual(plain.body, { detail: "Content-Type must be application/json" })
      const malformed = yield* api.request("POST", `${C}/sessions`, { token: org.token, body: '{"contact_id": ' })
      assert.strictEqual(malformed.status, 422)
      assert.deepStrictEqual(malformed.body, {
        detail: [{ loc: ["body"], msg: "Invalid JSON", type: "json_invalid" }]
      })
      const empty = yield* api.request("POST", `${C}/sessions`, {
        token: org.token,
        headers: { "content-type": "application/json" }
      })
      assert.strictEqual(empty.status, 422)
      assert.deepStrictEqual(empty.body, { detail: [{ loc: ["body"], msg: "Field required", type: "missing" }] })
      const notObject = yield* api.request("POST", `${C}/sessions`, { token: org.token, body: "[1,2]" })
      assert.strictEqual(notObject.status, 422)
      assert.deepStrictEqual(notObject.body.detail[0].loc, ["body"])
    })
  )

  it.effect("422 lists every problem with loc under body, path or query and pydantic-style types", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const response = yield* org.call("POST", "/sessions", {
        contact_id: 5,
        contact_name: null,
        status: "paused",
        metadata: "x",
        agent_id: ""
      })
      assert.strictEqual(response.status, 422)
      assert.deepStrictEqual(response.body.detail, [
        { loc: ["body", "contact_id"], msg: "Input should be a valid string", type: "string_type" },
        { loc: ["body", "contact_name"], msg: "Input should be a valid string", type: "string_type" },
        { loc: ["body", "agent_id"], msg: "String should have between 1 and 255 characters", type: "string_length" },
        { loc: ["body", "status"], msg: "Input should be 'open' or 'closed'", type: "literal_error" },
        { loc: ["body", "metadata"], msg: "Input should be a valid dictionary", type: "dict_type" }
      ])
      const pathProblem = yield* org.call("GET", `/sessions/${"x".repeat(300)}`)
      assert.strictEqual(pathProblem.status, 422)
      assert.deepStrictEqual(pathProblem.body.detail[0].loc, ["path", "session_id"])
      const nested = yield* org.call("PATCH", "/sessions/some-id", { fields: { status: 1, agent_id: 2 } })
      assert.deepStrictEqual(
        nested.body.detail.map((issue: any) => issue.loc),
        [
          ["body", "fields", "status"],
          ["body", "fields", "agent_id"]
        ]
      )
    })
  )

  it.effect("unknown routes and methods give 404 {detail}", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      for (const [method, path] of [
        ["GET", "/nowhere"],
        ["GET", `${C}/sessions/x/unknown`],
        ["DELETE", `${C}/sessions/x`]
      ] as const) {
        const response = yield* api.request(method, path, { token: org.token })
        assert.strictEqual(response.status, 404)
        assert.deepStrictEqual(response.body, { detail: "Not Found" })
      }
    })
  )

  it.effect("health, readiness, OpenAPI 3.1 of all APIs and the docs page (O4)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      assert.strictEqual((yield* api.request("GET", "/healthz")).status, 200)
      const ready = yield* api.request("GET", "/readyz")
      assert.strictEqual(ready.status, 200)
      const openapi = yield* api.request("GET", "/openapi.json")
      assert.strictEqual(openapi.status, 200)
      assert.match(openapi.body.openapi, /^3\.1/)
      const paths = Object.keys(openapi.body.paths)
      for (const path of [
        `${C}/sessions`,
        `${C}/sessions/search`,
        `${C}/sessions/{session_id}/messages/{message_id}`,
        "/admin/v1/organizations/{org_id}/settings"
      ]) {
        assert.include(paths, path)
      }
      const docs = yield* api.request("GET", "/docs")
      assert.strictEqual(docs.status, 200)
      assert.include(docs.headers.get("content-type") ?? "", "text/html")
    })
  )
})

withApp({}, brokenSessions("secret internal failure"))("defects", (it) => {
  it.effect("a defect gets 500 Internal server error and never leaks the cause", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const session = yield* org.session()
      const response = yield* org.call("GET", `/sessions/${session.id}`)
      assert.strictEqual(response.status, 500)
      assert.deepStrictEqual(response.body, { detail: "Internal server error" })
      assert.notInclude(response.text, "secret")
    })
  )
})
