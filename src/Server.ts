/**
 * The application composed once (STYLE "Compose the application once"):
 * configuration -> logging and tracing -> database and migrations -> domain
 * services -> HTTP server (and, in later issues, workers by `PARLEY_ROLE`).
 */
import { Layer } from "effect"
import { Admin } from "./Admin/Admin.ts"
import { AdminRepo } from "./Admin/Repo.ts"
import { Assistants } from "./Assistants/Assistants.ts"
import * as Database from "./Database/Database.ts"
import { Export } from "./Export/Export.ts"
import { ServerLive } from "./Http.ts"
import { Messages } from "./Messages/Messages.ts"
import { MessagesRepo } from "./Messages/Repo.ts"
import { SessionsRepo } from "./Sessions/Repo.ts"
import { Sessions } from "./Sessions/Sessions.ts"
import * as Telemetry from "./Telemetry/Telemetry.ts"

/** The domain services over a migrated database; requires `SqlClient`/`PgClient`. */
export const ServicesLive = Layer.mergeAll(
  Sessions.layer.pipe(Layer.provide(SessionsRepo.layer)),
  Messages.layer.pipe(Layer.provide(MessagesRepo.layer)),
  Admin.layer.pipe(Layer.provide(AdminRepo.layer)),
  Assistants.layer,
  Export.layer
)

/** Database connection with migrations applied; requires `AppConfig`. */
export const DatabaseLive = Database.migrateLayer.pipe(Layer.provideMerge(Database.layer))

/** The whole application; requires `AppConfig`. */
export const AppLive = ServerLive.pipe(
  Layer.provide(ServicesLive),
  Layer.provide(DatabaseLive),
  Layer.provide(Telemetry.layer)
)
