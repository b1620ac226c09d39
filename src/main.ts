/**
 * `npm start`: decode the configuration (O3), connect to or start the database
 * (O2), apply migrations, serve HTTP (O4) and run the workers of the role
 * (O1), until SIGTERM/SIGINT (O5). A failure to start prints one line on
 * stderr and exits 1 (O9, `Fatal.ts`).
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Effect, Layer } from "effect"
import { AppConfig, readConfig } from "./Config.ts"
import { reportFatal, serverTeardown } from "./Fatal.ts"
import { AppLive } from "./Server.ts"
import { LoggingLive } from "./Telemetry/Telemetry.ts"

const program = Effect.gen(function* () {
  const config = yield* Effect.result(readConfig())
  if (config._tag === "Failure") {
    process.stderr.write(`${config.failure}\n`)
    process.exitCode = 1
    return
  }
  const configLayer = Layer.succeed(AppConfig, config.success)
  yield* Layer.launch(AppLive.pipe(Layer.provide(configLayer))).pipe(
    Effect.catchCause((cause) =>
      reportFatal(cause, {
        databaseUrl: config.success.databaseUrl,
        listen: `${config.success.host}:${config.success.port}`
      }).pipe(Effect.provide(LoggingLive.pipe(Layer.provide(configLayer))))
    )
  )
})

/** O5: a shutdown by SIGTERM/SIGINT (an interruption) exits 0; a failure exits 1 (O9: reported as one line). */
NodeRuntime.runMain(program, { disableErrorReporting: true, teardown: serverTeardown })
