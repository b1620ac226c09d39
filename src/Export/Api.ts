/**
 * The data export endpoints (conversations.md "Data export"; DECISIONS.md D14).
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { conversationsBasePath } from "../Domain/BasePaths.ts"
import { DateTimeInput, Identifier, Limit } from "../Domain/Common.ts"
import { Message } from "../Domain/Message.ts"
import { Authorization } from "../Domain/Security.ts"
import { Session } from "../Domain/Session.ts"
import { InvalidCursor } from "./Errors.ts"

/** The records of a page when the query gives no `limit` (D14). */
export const DEFAULT_EXPORT_LIMIT = 100

/** Query of GET /data/sessions: `limit` 1-3000 (default {@link DEFAULT_EXPORT_LIMIT}), `sort_by` default `created_at`. */
export const ExportQuery = {
  sort_by: Schema.optionalKey(Schema.Literals(["created_at", "updated_at"])),
  created_after: Schema.optionalKey(DateTimeInput),
  created_before: Schema.optionalKey(DateTimeInput),
  updated_after: Schema.optionalKey(DateTimeInput),
  updated_before: Schema.optionalKey(DateTimeInput),
  after_id: Schema.optionalKey(Identifier),
  limit: Schema.optionalKey(
    Limit(3000).annotate({ description: `Most records on the page, 1-3000 (default ${DEFAULT_EXPORT_LIMIT}).` })
  )
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
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Export sessions",
        description: `Sessions of the organization in pages of \`limit\` (1-3000, default ${DEFAULT_EXPORT_LIMIT}), for syncing into another store. Sorted by (\`created_at\`, \`id\`), or with \`sort_by=updated_at\` by (\`updated_at\`, or \`created_at\` when never updated, then \`id\`), so records never updated still sync. Pass the last \`id\` of a page as \`after_id\` for the next page (a keyset cursor; an unknown \`after_id\` gets 400 \`Invalid cursor\`). \`created_*\`/\`updated_*\` bound the range (D14).`
      })
    ),
    HttpApiEndpoint.get("sessionsBatch", "/data/sessions/batch", {
      query: {
        session_ids: Schema.Array(Identifier).pipe(
          Schema.check(Schema.isMinLength(1), Schema.isMaxLength(MAX_BATCH_IDS))
        )
      },
      success: Schema.Array(Session)
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Export sessions by id",
        description:
          "The sessions of `session_ids` (1-1000 ids, repeated as `session_ids=a&session_ids=b`) that exist in the organization, in the order asked; a duplicate id is returned once, at its first position (D14)."
      })
    ),
    HttpApiEndpoint.get("messages", "/data/messages", {
      query: { ...ExportQuery, session_id: Schema.optionalKey(Identifier) },
      success: Schema.Array(Message),
      error: InvalidCursor.Wire
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Export messages",
        description:
          "Messages of the organization (or of `session_id`) in pages, every content type included (the runtime's too), sorted and paged as the sessions export: `limit` 1-3000, `sort_by`, `after_id` keyset cursor (400 `Invalid cursor`), time bounds (D14)."
      })
    )
  )
  .middleware(Authorization)
  .prefix(conversationsBasePath)
  .annotateMerge(
    OpenApi.annotations({
      title: "Data export",
      description:
        "Sessions and messages in pages with keyset cursors, for syncing into a warehouse or another store (D14). Requests use an organization's API key."
    })
  ) {}
