/**
 * The data export endpoints (conversations.md "Data export"; DECISIONS.md D14).
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { conversationsBasePath } from "../Domain/BasePaths.ts"
import { DateTimeInput, Identifier, Limit } from "../Domain/Common.ts"
import { InvalidCursor } from "../Domain/Errors.ts"
import { Message } from "../Domain/Message.ts"
import { Authorization } from "../Domain/Security.ts"
import { Session } from "../Domain/Session.ts"

/** Query of GET /data/sessions: `limit` 1-3000 (default 100), `sort_by` default `created_at`. */
export const ExportQuery = {
  sort_by: Schema.optionalKey(Schema.Literals(["created_at", "updated_at"])),
  created_after: Schema.optionalKey(DateTimeInput),
  created_before: Schema.optionalKey(DateTimeInput),
  updated_after: Schema.optionalKey(DateTimeInput),
  updated_before: Schema.optionalKey(DateTimeInput),
  after_id: Schema.optionalKey(Identifier),
  limit: Schema.optionalKey(Limit(3000))
}

/** The most ids of one batch request (D14). */
const MAX_BATCH_IDS = 1000

/** The export group, under the conversations base path, with API-key auth. */
export class ExportApi extends HttpApiGroup.make("export")
  .add(
    HttpApiEndpoint.get("sessions", "/data/sessions", {
      query: ExportQuery,
      success: Schema.Array(Session),
      error: InvalidCursor.Wire
    }),
    HttpApiEndpoint.get("sessionsBatch", "/data/sessions/batch", {
      query: {
        session_ids: Schema.Array(Identifier).pipe(
          Schema.check(Schema.isMinLength(1), Schema.isMaxLength(MAX_BATCH_IDS))
        )
      },
      success: Schema.Array(Session)
    }),
    HttpApiEndpoint.get("messages", "/data/messages", {
      query: { ...ExportQuery, session_id: Schema.optionalKey(Identifier) },
      success: Schema.Array(Message),
      error: InvalidCursor.Wire
    })
  )
  .middleware(Authorization)
  .prefix(conversationsBasePath)
  .annotateMerge(OpenApi.annotations({ title: "Data export" })) {}
