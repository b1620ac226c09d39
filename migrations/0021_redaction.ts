/**
 * Redaction of one message (DECISIONS.md D23, issue 40 item 3).
 *
 * - `messages.redacted_at`: when the message was redacted, null until then;
 *   the Message member of the same name (`src/Domain/Message.ts`), so the
 *   wire JSON built by PostgreSQL carries it (`src/Database/Json.ts`).
 * - `messages.redacted_type`: the content type the message had before its
 *   redaction (its content is `{"type":"redacted"}` from then on), so the AI
 *   history keeps a redacted text message as the text `[redacted]` and leaves
 *   out what it left out before (`src/Messages/Repo.ts` `history`). Not a
 *   member of the Message: never on the wire.
 *
 * Both are null for every message stored before; adding nullable columns
 * without a default rewrites no row.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

const statements = [
  `ALTER TABLE messages ADD COLUMN redacted_at timestamptz`,
  `ALTER TABLE messages ADD COLUMN redacted_type text`
]

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  for (const statement of statements) yield* sql.unsafe(statement)
})
