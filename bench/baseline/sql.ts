/**
 * The SQL the baseline executes: the very statements Parley prepares for POST
 * message, imported from the repositories (the API-key lookup of
 * src/Admin/Repo.ts and the insert of src/Messages/Repo.ts: message +
 * message.created event in one statement). The messages benchmark still checks
 * the texts against the statements Parley actually prepared before it measures.
 */
export { organizationOfTokenSql as apiKeyLookupSql } from "../../src/Admin/Repo.ts"
export { insertMessageSql } from "../../src/Messages/Repo.ts"
/**
 * Ingest (bench/suites/ingest.ts): the pair's advisory lock, the step (contact,
 * conversation, open session, receipt claim and the message to an open session
 * in one statement) and the new session with its first message, from
 * src/Ingest/Repo.ts.
 */
export { ingestLockSql, ingestOpenSql, ingestStepSql } from "../../src/Ingest/Repo.ts"
