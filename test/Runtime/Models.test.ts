/**
 * The runtime's models (DECISIONS.md R2, R3; issue 13 items 6, 7): which model
 * answers a node and the name a run records, without calling any model.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { AppConfig, type AppConfigShape } from "../../src/Config.ts"
import { Models } from "../../src/Runtime/Models.ts"
import { DEFAULT_OPENAI_MODEL, EchoLanguageModel } from "../../src/Runtime/Providers.ts"

const modelsWith = (config: Partial<AppConfigShape>) => Models.layer.pipe(Layer.provide(AppConfig.layerWith(config)))

describe("Models (R2, R3)", () => {
  it.effect("echo answers every node with the process's model, recorded as echo", () =>
    Effect.gen(function* () {
      const models = yield* Models
      const plain = yield* models.forNode(undefined)
      const named = yield* models.forNode("gpt-x")
      assert.strictEqual(models.defaultName, "echo")
      assert.strictEqual(plain.model, named.model)
      assert.deepStrictEqual([plain.name, named.name], ["echo", "echo"])
    }).pipe(Effect.provide(modelsWith({ aiProvider: "echo" })))
  )

  it.effect(
    "an HTTP provider: AI_MODEL for nodes naming none or naming it; a named model is built once, also when asked concurrently",
    () =>
      Effect.gen(function* () {
        const models = yield* Models
        const plain = yield* models.forNode(undefined)
        const same = yield* models.forNode("default-model")
        const named = yield* Effect.all(
          Array.from({ length: 8 }, () => models.forNode("node-model")),
          { concurrency: "unbounded" }
        )
        assert.strictEqual(models.defaultName, "openai/default-model")
        assert.strictEqual(plain.model, same.model)
        assert.strictEqual(plain.name, "openai/default-model")
        assert.notStrictEqual(named[0]!.model, plain.model)
        assert.isTrue(named.every((entry) => entry.model === named[0]!.model))
        assert.strictEqual(named[0]!.name, "openai/node-model")
      }).pipe(
        Effect.provide(modelsWith({ aiProvider: "openai", aiModel: "default-model", openaiApiKey: Redacted.make("k") }))
      )
  )

  it.effect("without AI_MODEL the provider's default model is recorded", () =>
    Effect.gen(function* () {
      const models = yield* Models
      assert.strictEqual(models.defaultName, `openai/${DEFAULT_OPENAI_MODEL}`)
      assert.strictEqual((yield* models.forNode("other")).name, "openai/other")
    }).pipe(Effect.provide(modelsWith({ aiProvider: "openai" })))
  )

  it.effect("layerTest: the given model answers every node, named or not (R3)", () =>
    Effect.gen(function* () {
      const models = yield* Models
      const plain = yield* models.forNode(undefined)
      const named = yield* models.forNode("node-model")
      assert.strictEqual(plain.model, named.model)
      assert.deepStrictEqual([models.defaultName, plain.name, named.name], ["scripted", "scripted", "scripted"])
    }).pipe(Effect.provide(Models.layerTest(EchoLanguageModel, "scripted")))
  )
})
