/**
 * The whole HTTP contract of Parley in one place (O4): the conversations API
 * (sessions, messages), and the admin API. Imports only `effect` and the
 * contract files, so it can be handed to integrations as a typed client
 * (`HttpApiClient.make(ParleyApi)`).
 */
import { HttpApi, OpenApi } from "effect/http-api"
import { AdminApi } from "./Admin/Api.ts"
import { AssistantsAdminApi, AssistantsApi } from "./Assistants/Api.ts"
import { ValidationErrors } from "./Domain/Security.ts"
import { ErasuresApi } from "./Erasures/Api.ts"
import { EvaluationsApi } from "./Evaluations/Api.ts"
import { ExportApi } from "./Export/Api.ts"
import { IngestApi } from "./Ingest/Api.ts"
import { MessagesApi } from "./Messages/Api.ts"
import { finishDocument, webhookSchemas } from "./OpenApi.ts"
import { RepliesApi } from "./Replies/Api.ts"
import { SessionsApi } from "./Sessions/Api.ts"
import { AppsApi } from "./Webhooks/Api.ts"

/** The Parley API's groups, middleware, parse options and additional schemas: what the document's finishing pass reads. */
const Contract = HttpApi.make("parley")
  .add(SessionsApi)
  .add(MessagesApi)
  .add(RepliesApi)
  .add(IngestApi)
  .add(AdminApi)
  .add(AssistantsApi)
  .add(AssistantsAdminApi)
  .add(ExportApi)
  .add(AppsApi)
  .add(ErasuresApi)
  .add(EvaluationsApi)
  .middleware(ValidationErrors)
  .annotate(HttpApi.ParseOptions, { errors: "all" })
  .annotate(HttpApi.AdditionalSchemas, webhookSchemas)

/** The Parley API. Every request failing its schemas gets 422 with all problems. */
export class ParleyApi extends Contract.annotateMerge(
  OpenApi.annotations({
    title: "Parley",
    version: "0.1.0",
    description:
      "Conversations between contacts and agents, AI replies, signed webhooks, bulk export and assistant version control.",
    // Relative: the server that serves the document (reference pages send their requests there).
    servers: [{ url: "/", description: "This server" }],
    license: { name: "MIT", identifier: "MIT" },
    transform: (spec) => finishDocument(spec, Contract)
  })
) {}
