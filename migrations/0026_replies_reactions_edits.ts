/**
 * Replies, reactions and edits (DECISIONS.md D24, issue 42 item 1).
 *
 * - `messages.reply_to_message_id`: the message of the same conversation
 *   this one replies to (the Message member of the same name). No foreign
 *   key: the quoted message may be deleted later (retention, D21) and the
 *   reply keeps the id.
 * - `messages.edited_at` and `messages.edits` (json, `[{content,
 *   edited_at}]`, oldest first): the Message members of an edit.
 * - `messages.reacted` (jsonb, `{role: emoji}`): each role's latest
 *   reaction to the message, the one stored form; the Message member
 *   `reactions` (`[{emoji, count}]`) is rendered from it
 *   (`src/Database/Json.ts` `messageMembers`).
 *
 * A channel's id is resolved to a message of the conversation through its
 * sessions (`sessions_conversation_idx` of 0019, then `messages_provider_idx`
 * per session): no new index on messages, so the message insert of ingest's
 * hot path keeps the indexes it had.
 *
 * Constant defaults: PostgreSQL adds these columns without rewriting a row.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

const statements = [
  `ALTER TABLE messages ADD COLUMN reply_to_message_id uuid`,
  `ALTER TABLE messages ADD COLUMN edited_at timestamptz`,
  `ALTER TABLE messages ADD COLUMN edits json NOT NULL DEFAULT '[]'`,
  `ALTER TABLE messages ADD COLUMN reacted jsonb NOT NULL DEFAULT '{}'`
]

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  for (const statement of statements) yield* sql.unsafe(statement)
})
