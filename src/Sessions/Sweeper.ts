/**
 * The session expiry sweeper (DECISIONS.md D16, O1, O5): in every process with
 * `PARLEY_ROLE` `all` or `worker`, every `SESSION_EXPIRY_SWEEP_INTERVAL` it
 * closes the open sessions idle past their organization's timeout
 * (`Sessions.expireIdle`, {@link EXPIRY_BATCH} per statement batch, until a
 * batch comes back short). A failed sweep is logged (an outage once, O9) and
 * the next one runs on time. Its fiber stops with the layer's scope.
 */
import { Duration, Effect, Layer } from "effect"
import { AppConfig } from "../Config.ts"
import { logUnlessOutage } from "../Database/Health.ts"
import { Sessions } from "./Sessions.ts"

/** Sessions closed per expiry statement batch (D16). */
const EXPIRY_BATCH = 500

/** The sweeper as a layer: starts when built. Requires `Sessions` and `AppConfig`. */
export const SessionExpirySweeperLive = Layer.effectDiscard(
  Effect.gen(function* () {
    const sessions = yield* Sessions
    const config = yield* AppConfig
    const interval = Duration.toMillis(config.sessionExpirySweepInterval)
    const sweep = Effect.gen(function* () {
      for (;;) {
        const closed = yield* sessions.expireIdle(EXPIRY_BATCH)
        if (closed < EXPIRY_BATCH) return
      }
    }).pipe(
      Effect.withSpan("Sessions.expirySweep"),
      Effect.catchCause((cause) => logUnlessOutage("Session expiry sweep failed", cause))
    )
    yield* Effect.forkScoped(Effect.forever(Effect.andThen(Effect.sleep(interval), sweep)))
  })
)
