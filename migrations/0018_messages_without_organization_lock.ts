/**
 * A message and its event no longer lock their organization's row (issue 16
 * item 4, end to end; the same kind of cost as 0017's app row):
 *
 * - `messages.organization_id` and `events.organization_id` lose their foreign
 *   keys to `organizations`. Each key's check took `FOR KEY SHARE` of the
 *   organization's row in every POST message (and every ingest call and every
 *   other event), so the concurrent writes of one organization, however many
 *   sessions they went to, all locked one row and made a new multixact on it
 *   almost every time.
 * - What the keys guarded still holds. Parley never deletes an organization
 *   (there is no such endpoint) and writes only the organization of an
 *   authenticated API key, and a message still references its session and its
 *   conversation, whose own keys to `organizations` stay, so a message cannot
 *   outlive its organization's sessions. An operator's
 *   `DELETE FROM organizations` still takes everything: what the keys'
 *   `ON DELETE CASCADE` did for messages and events, a `BEFORE DELETE` trigger
 *   does (first, so that the sessions' cascade then finds no message left
 *   referencing them). An event written by a transaction that raced such a
 *   delete may outlive the organization; nothing reads it, since every read
 *   is by the organization of an API key.
 *
 * Speed tactic measured by `npm run bench -- webhooks` (end to end, alternating
 * pairs; bench/README.md "The organization's row").
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

const statements = [
  `ALTER TABLE messages DROP CONSTRAINT messages_organization_id_fkey`,
  `ALTER TABLE events DROP CONSTRAINT events_organization_id_fkey`,
  `CREATE FUNCTION parley_organization_deleting() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM messages WHERE organization_id = OLD.id;
  DELETE FROM events WHERE organization_id = OLD.id;
  RETURN OLD;
END
$$`,
  `CREATE TRIGGER organizations_deleting BEFORE DELETE ON organizations
  FOR EACH ROW EXECUTE FUNCTION parley_organization_deleting()`
]

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  for (const statement of statements) yield* sql.unsafe(statement)
})
