/**
 * A service layer whose session GET dies with a defect, for tests of how
 * failures get their responses (500 without the cause, "Errors") and are logged (O8).
 */
import { Effect, Layer } from "effect"
import { ServicesLive } from "../../src/Server.ts"
import { Sessions } from "../../src/Sessions/Sessions.ts"

/** `ServicesLive` with `Sessions.get` dying with `Error(message)`. */
export const brokenSessions = (message: string) =>
  Layer.merge(
    ServicesLive,
    Layer.effect(
      Sessions,
      Effect.gen(function* () {
        const real = yield* Sessions
        return Sessions.of({ ...real, get: () => Effect.die(new Error(message)) })
      })
    ).pipe(Layer.provide(ServicesLive))
  )
