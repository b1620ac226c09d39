/**
 * The SQL the baseline executes: the very statements Parley prepares for POST
 * message, imported from the repositories (the API-key lookup of
 * src/Admin/Repo.ts and the insert of src/Messages/Repo.ts: message +
 * message.created event in one statement), with their named parameters put in
 * order by the same `values` Parley uses. The messages benchmark still checks
 * the texts against the statements Parley actually prepared before it measures.
 */
export { organizationOfTokenSql as apiKeyLookupSql } from "../../src/Admin/Repo.ts"

import { ingestLockStatement, ingestOpenStatement, ingestStepStatement } from "../../src/Ingest/Repo.ts"
import { insertMessageStatement } from "../../src/Messages/Repo.ts"

/** The delivery workers' channel, notified by a statement of its own when an event fans out (src/Outbox/Outbox.ts). */
export { deliveriesChannel } from "../../src/Outbox/Outbox.ts"
export { ingestLockStatement, ingestOpenStatement, ingestStepStatement, insertMessageStatement }

/** The texts Parley prepares, to check against `pg_prepared_statements`. */
export const insertMessageSql = insertMessageStatement.text
/**
 * Ingest (bench/suites/ingest.ts): the pair's advisory lock, the step (contact,
 * conversation, open session, receipt claim and the message to an open session
 * in one statement) and the new session with its first message, from
 * src/Ingest/Repo.ts.
 */
export const ingestLockSql = ingestLockStatement.text
export const ingestStepSql = ingestStepStatement.text
export const ingestOpenSql = ingestOpenStatement.text
