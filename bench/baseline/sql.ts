/**
 * The SQL the baseline executes: the very statements Parley prepares for POST
 * message, imported from the repositories (the API-key lookup of
 * src/Admin/Repo.ts and the insert of src/Messages/Repo.ts: message +
 * message.created event in one statement). The messages benchmark still checks
 * the texts against the statements Parley actually prepared before it measures.
 */
export { organizationOfTokenSql as apiKeyLookupSql } from "../../src/Admin/Repo.ts"
export { insertMessageSql } from "../../src/Messages/Repo.ts"
