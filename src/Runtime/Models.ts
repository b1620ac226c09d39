/**
 * The language models of the AI runtime (DECISIONS.md R2, R3): which model
 * answers a node, and the name a run records for it (`runs.model`). The
 * runtime asks this service and never builds a model itself, so a test's
 * scripted model ({@link Models.layerTest}) answers every node, also the nodes
 * that name a model of their own.
 */
import { Cache, Context, Effect, Layer } from "effect"
import { LanguageModel } from "effect/ai"
import { AppConfig } from "../Config.ts"
import { LanguageModelLive, languageModelFor, modelName } from "./Providers.ts"

/** A language model and the name a run records for it (`echo`, `openai/<model>`, `anthropic/<model>`; R3). */
export interface NamedModel {
  readonly model: LanguageModel.LanguageModel
  readonly name: string
}

/** Most node model names kept built at once; an evicted name is built again at its next use. */
const MODEL_CACHE_CAPACITY = 256

/** The models of the AI runtime (see module docs). */
export class Models extends Context.Service<
  Models,
  {
    /** The name of the process's model (`AI_MODEL`, R3), recorded on a run that called no model. */
    readonly defaultName: string
    /**
     * The model answering a node whose `config.model` is `name` (R2): the
     * process's model (`AI_PROVIDER`, `AI_MODEL`) when `name` is undefined, is
     * `AI_MODEL`, or the provider is `echo`; else the provider of
     * `AI_PROVIDER` with model `name`, built at its first use and kept
     * (concurrent first uses share one build). Never fails: a model that
     * cannot answer fails its calls with an `AiError`.
     */
    forNode(name: string | undefined): Effect.Effect<NamedModel>
  }
>()("parley/Runtime/Models") {
  /**
   * The models of `AI_PROVIDER` (R3, O3): the process's model is
   * `LanguageModelLive`; the models nodes name are kept in an Effect `Cache`
   * of {@link MODEL_CACHE_CAPACITY} names, built in this layer's scope.
   * Requires `AppConfig`.
   */
  static readonly layer: Layer.Layer<Models, never, AppConfig> = Layer.effect(
    Models,
    Effect.gen(function* () {
      const config = yield* AppConfig
      const model = yield* LanguageModel.LanguageModel
      const scope = yield* Effect.scope
      const processModel: NamedModel = { model, name: modelName(config) }
      const named = yield* Cache.make({
        capacity: MODEL_CACHE_CAPACITY,
        lookup: (name: string) => {
          const nodeConfig = { ...config, aiModel: name }
          return Layer.buildWithScope(languageModelFor(nodeConfig), scope).pipe(
            Effect.map(
              (context): NamedModel => ({
                model: Context.get(context, LanguageModel.LanguageModel),
                name: modelName(nodeConfig)
              })
            )
          )
        }
      })
      return Models.of({
        defaultName: processModel.name,
        forNode: (name) =>
          name === undefined || config.aiProvider === "echo" || name === config.aiModel
            ? Effect.succeed(processModel)
            : Cache.get(named, name)
      })
    })
  ).pipe(Layer.provide(LanguageModelLive))

  /**
   * Models for tests (R3: "tests script the language model through a test
   * layer"): `languageModel` answers every node, whatever model it names, and
   * runs record `name` (default `test`).
   */
  static readonly layerTest = <E, R>(
    languageModel: Layer.Layer<LanguageModel.LanguageModel, E, R>,
    name = "test"
  ): Layer.Layer<Models, E, R> =>
    Layer.effect(
      Models,
      Effect.gen(function* () {
        const named: NamedModel = { model: yield* LanguageModel.LanguageModel, name }
        return Models.of({ defaultName: name, forNode: () => Effect.succeed(named) })
      })
    ).pipe(Layer.provide(languageModel))
}
