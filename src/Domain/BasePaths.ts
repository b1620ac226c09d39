/**
 * The base paths of the three APIs (DECISIONS.md O4), the one place they are
 * written: every group's `prefix`, the server's routing and the tests use these.
 */

/** The conversations API: sessions, messages, replies, schedules, ingest, export. */
export const conversationsBasePath = "/conversations/v2/api/v1"

/** The assistants API: drafts, branches, versions, runtime, migrate. */
export const assistantsBasePath = "/assistants/api/v2"

/** The admin API (O6), authenticated with `ADMIN_TOKEN`. */
export const adminBasePath = "/admin/v1"

/**
 * Whether `path` (a request URL or a document path) is of the conversations or
 * assistants API, the APIs of an organization's API key (D19, D20).
 */
export const isOrganizationApiPath = (path: string): boolean =>
  path.startsWith(`${conversationsBasePath}/`) || path.startsWith(`${assistantsBasePath}/`)
