/**
 * The application composed once (STYLE "Compose the application once"):
 * configuration -> logging and tracing -> database and migrations -> domain
 * services -> HTTP server and the background workers of `PARLEY_ROLE` (O1).
 */
import { Effect, Layer } from "effect"
import { Admin } from "./Admin/Admin.ts"
import { Assistants } from "./Assistants/Assistants.ts"
import { AppConfig, ConfigWarningsLive } from "./Config.ts"
import * as Database from "./Database/Database.ts"
import { DatabaseHealth } from "./Database/Health.ts"
import { Erasures } from "./Erasures/Erasures.ts"
import { ErasureWorkerLive } from "./Erasures/Worker.ts"
import { Evaluations } from "./Evaluations/Evaluations.ts"
import { EvaluationWorkerLive } from "./Evaluations/Worker.ts"
import { Export } from "./Export/Export.ts"
import { ServerLive } from "./Http.ts"
import { Idempotency, IdempotencySweeperLive } from "./Idempotency/Idempotency.ts"
import { Ingest } from "./Ingest/Ingest.ts"
import { Messages } from "./Messages/Messages.ts"
import { RateLimiter } from "./RateLimits/RateLimiter.ts"
import { Replies } from "./Replies/Replies.ts"
import { RepliesWorkerLive } from "./Replies/Worker.ts"
import { Retention, RetentionSweeperLive } from "./Retention/Retention.ts"
import { LiveRuns } from "./Runtime/LiveRuns.ts"
import { Models } from "./Runtime/Models.ts"
import { Runtime } from "./Runtime/Runtime.ts"
import { Sessions } from "./Sessions/Sessions.ts"
import { SessionExpirySweeperLive } from "./Sessions/Sweeper.ts"
import { Ids } from "./Shared/Ids.ts"
import { MemoryReleaseLive } from "./Shared/MemoryRelease.ts"
import { GaugeSamplerLive } from "./Telemetry/Metrics.ts"
import * as Telemetry from "./Telemetry/Telemetry.ts"
import { DeliveryWakeup } from "./Webhooks/Wakeup.ts"
import { Webhooks } from "./Webhooks/Webhooks.ts"
import { WebhookWorkerLive } from "./Webhooks/Worker.ts"

/**
 * The domain services over a migrated database, with `models` as the AI
 * runtime's language models (R3): `Models.layer` in production, tests pass
 * `Models.layerTest(scriptedModel(script))`. Requires `SqlClient`/`PgClient`,
 * `AppConfig` and what `models` requires.
 */
export const servicesWith = <E, R>(models: Layer.Layer<Models, E, R>) => {
  const core = Layer.mergeAll(
    DatabaseHealth.layer,
    Sessions.layer,
    Messages.layer,
    Admin.layer,
    Assistants.layer
    // One generator for the whole application (O2): its ids share one order. One wakeup of this process's
    // delivery worker, which POST message wakes (Webhooks/Wakeup.ts).
  ).pipe(
    Layer.provideMerge(Ids.layer),
    Layer.provideMerge(DeliveryWakeup.layer),
    // One count of this process's live runs: the replies worker counts them, evaluations give way to them.
    Layer.provideMerge(LiveRuns.layer)
  )
  const domain = Layer.mergeAll(
    Idempotency.layer,
    RateLimiter.layer,
    Export.layer,
    Webhooks.layer,
    Replies.layer,
    Retention.layer,
    Erasures.layer,
    Runtime.layer.pipe(Layer.provide(models)),
    // The same `models` layer value: one build, shared with the runtime.
    Evaluations.layer.pipe(Layer.provide(models))
  ).pipe(Layer.provideMerge(core))
  // Ingest uses Replies (D11), so it sits on top of the other services.
  return Ingest.layer.pipe(Layer.provideMerge(domain))
}

/** The domain services with the models of `AI_PROVIDER` (R3). */
export const ServicesLive = servicesWith(Models.layer)

/**
 * The background workers of the process's role (O1): with `PARLEY_ROLE` `all`
 * or `worker`, the webhook delivery worker (W2-W6), the replies worker (reply
 * jobs, schedules: R1, D15), the session expiry sweeper (`Sessions/Sweeper.ts`,
 * D16), the retention sweeper (`Retention/Retention.ts`, D21), the sweep of
 * expired Idempotency-Key responses (D19) and the sampler of
 * the database-wide gauges (`Telemetry/Metrics.ts`) and the erasure worker
 * (`Erasures/Worker.ts`, D22) and the evaluation worker (`Evaluations/Worker.ts`, A16); none with `api`. They
 * stop gracefully with the application (O5). Requires the domain services,
 * `PgClient`, `DatabaseLocation` (where the webhook worker opens its own
 * pool) and `AppConfig`.
 */
export const WorkersLive = Layer.unwrap(
  Effect.map(AppConfig, (config: typeof AppConfig.Service) =>
    config.role === "api"
      ? Layer.empty
      : Layer.mergeAll(
          WebhookWorkerLive,
          RepliesWorkerLive,
          SessionExpirySweeperLive,
          RetentionSweeperLive,
          IdempotencySweeperLive,
          GaugeSamplerLive,
          ErasureWorkerLive,
          EvaluationWorkerLive
        )
  )
)

/**
 * The whole application, with the configuration's warnings (issue 38 item 3) and the release of memory
 * after load (issue 38 item 6); requires `AppConfig`.
 */
export const AppLive = Layer.mergeAll(ConfigWarningsLive, ServerLive, WorkersLive, MemoryReleaseLive).pipe(
  Layer.provide(ServicesLive),
  Layer.provide(Database.migratedLayer),
  Layer.provide(Telemetry.layer)
)
