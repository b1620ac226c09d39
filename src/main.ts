/**
 * `npm start`: decode the configuration (O3), connect to or start the database
 * (O2), apply migrations, serve HTTP (O4) and run the workers of the role
 * (O1), until SIGTERM/SIGINT (O5).
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Cause, ConfigProvider, Effect, Exit, Layer } from "effect"
import { AppConfig, AppConfigSpec, formatConfigError } from "./Config.ts"
import { AppLive } from "./Server.ts"

const program = Effect.gen(function* () {
  const config = yield* Effect.result(AppConfigSpec.parse(ConfigProvider.fromEnv()))
  if (config._tag === "Failure") {
    process.stderr.write(`${formatConfigError(config.failure.message)}\n`)
    process.exitCode = 1
    return
  }
  yield* Layer.launch(AppLive.pipe(Layer.provide(Layer.succeed(AppConfig, config.success))))
})

/** O5: a shutdown by SIGTERM/SIGINT (an interruption) exits 0; a failure exits 1. */
NodeRuntime.runMain(program, {
  teardown: (exit, onExit) => onExit(Exit.isFailure(exit) && !Cause.hasInterruptsOnly(exit.cause) ? 1 : 0)
})
