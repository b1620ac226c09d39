/**
 * An llm node's `config.model` (R2, R3): with an HTTP provider, a node that
 * names a model is answered by that model, other nodes by `AI_MODEL`; the run
 * records which. Against a local fake of the OpenAI Chat Completions API
 * (`OPENAI_BASE_URL`).
 */
import { createServer } from "node:http"
import { assert } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { llm } from "../support/Assistants.ts"
import { withWorkers } from "../support/TestApp.ts"
import { aiFixture, messagesOf, runsOf, snapshotOf, waitFor } from "./support.ts"

/** The fake: answers `Answer from <model>` and records the requested models. */
const requestedModels: Array<string> = []
const fake = createServer((request, response) => {
  let body = ""
  request.on("data", (chunk) => (body += chunk))
  request.on("end", () => {
    const model = JSON.parse(body).model as string
    requestedModels.push(model)
    response.writeHead(200, { "content-type": "application/json" }).end(
      JSON.stringify({
        id: `chatcmpl-${requestedModels.length}`,
        object: "chat.completion",
        created: 1_700_000_000,
        model,
        choices: [{ index: 0, message: { role: "assistant", content: `Answer from ${model}` }, finish_reason: "stop" }],
        usage: { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 }
      })
    )
  })
})
await new Promise<void>((resolve) => fake.listen(0, "127.0.0.1", resolve))
const fakeUrl = `http://127.0.0.1:${(fake.address() as { port: number }).port}/v1`

withWorkers({
  aiProvider: "openai",
  openaiBaseUrl: fakeUrl,
  openaiApiKey: Redacted.make("test-key"),
  aiModel: "default-model"
})("node models", (it) => {
  it.effect("a node's config.model answers that node; other nodes use AI_MODEL; the run records the model", () =>
    Effect.gen(function* () {
      const fx = yield* aiFixture(
        snapshotOf([llm("start", { model: "node-model", next_node: "second" }), llm("second")])
      )
      const session = yield* fx.session()
      yield* fx.org.call("POST", `/sessions/${session.id}/messages`, {
        role: "user",
        content: { type: "text", text: "Hi" }
      })
      yield* fx.org.call("POST", `/sessions/${session.id}/reply`, { debounce_time: 0 })
      const first = yield* waitFor(runsOf(session.id), (rows) => rows.length === 1)
      assert.strictEqual(first[0]!.status, "succeeded", first[0]!.error ?? "")
      assert.strictEqual(first[0]!.model, "openai/node-model")
      assert.deepStrictEqual([first[0]!.input_tokens, first[0]!.output_tokens], [7, 3])
      yield* fx.org.call("POST", `/sessions/${session.id}/reply`, { debounce_time: 0 })
      const second = yield* waitFor(runsOf(session.id), (rows) => rows.length === 2)
      assert.strictEqual(second[1]!.model, "openai/default-model")
      assert.deepStrictEqual(requestedModels, ["node-model", "default-model"])
      const replies = (yield* messagesOf(fx.org, session.id)).filter((m) => m.role === "assistant")
      assert.deepStrictEqual(
        replies.map((m) => m.content.text),
        ["Answer from node-model", "Answer from default-model"]
      )
    }).pipe(Effect.ensuring(Effect.sync(() => fake.close())))
  )
})
