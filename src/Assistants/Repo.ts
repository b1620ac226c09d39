/**
 * SQL of assistant version control: set-based statements over arrays (one
 * round trip for thousands of files), never one statement per file.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer } from "effect"
import { isoTimestamp } from "../Database/Json.ts"
import type { Assistant, Branch, Commit, CommitFile } from "../Domain/Assistant.ts"
import { isUuid } from "../Domain/Common.ts"
import type { FileVersion } from "./Files.ts"

/** An assistant's row as the service needs it. */
export interface AssistantRow {
  readonly id: string
  readonly versioned: boolean
  readonly legacy_snapshot: unknown
}

/** A branch row (wire fields). */
export type BranchRow = Branch

const branchColumns = `b.id::text, b.assistant_id::text, b.name, b.head_commit_id,
  ${isoTimestamp("b.created_at")} AS created_at, ${isoTimestamp("b.updated_at")} AS updated_at`

const commitColumns = `c.id, c.assistant_id::text, c.parent_commit_id, c.merge_parent_commit_id, c.message,
  c.author_type, c.author_id, ${isoTimestamp("c.created_at")} AS created_at`

const makeRepo = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient
  const branchFields = sql.literal(branchColumns)
  const commitFields = sql.literal(commitColumns)

  const insertAssistant = (row: {
    readonly id: string
    readonly organizationId: string
    readonly name: string
    readonly description: string | null
    readonly versioned: boolean
    readonly legacySnapshot: unknown
  }) =>
    sql<Assistant>`INSERT INTO assistants (id, organization_id, name, description, versioned, legacy_snapshot, created_at)
      VALUES (${row.id}, ${row.organizationId}, ${row.name}, ${row.description}, ${row.versioned},
        ${row.legacySnapshot === undefined ? null : sql.json(row.legacySnapshot)}, statement_timestamp())
      RETURNING id::text, organization_id::text, name, versioned, ${sql.literal(isoTimestamp("created_at"))} AS created_at`.pipe(
      Effect.map((rows) => rows[0]!)
    )

  /** The assistant of the organization (A1), locked for update when asked. */
  const findAssistant = (organizationId: string, assistantId: string, forUpdate = false) =>
    isUuid(assistantId)
      ? sql<AssistantRow>`SELECT id::text, versioned, legacy_snapshot FROM assistants
          WHERE id = ${assistantId} AND organization_id = ${organizationId}
          ${forUpdate ? sql`FOR UPDATE` : sql``}`.pipe(Effect.map((rows) => rows[0]))
      : Effect.succeed(undefined)

  const markVersioned = (assistantId: string) =>
    sql`UPDATE assistants SET versioned = true, updated_at = statement_timestamp() WHERE id = ${assistantId}`.pipe(
      Effect.asVoid
    )

  /** Stores file contents once per assistant by content hash. */
  const insertFiles = (assistantId: string, files: ReadonlyArray<FileVersion>) =>
    files.length === 0
      ? Effect.void
      : sql`INSERT INTO assistant_files (assistant_id, content_hash, content)
          SELECT ${assistantId}, f.hash, f.content::jsonb
          FROM unnest(${files.map((file) => file.hash)}::text[], ${files.map((file) => JSON.stringify(file.content))}::text[])
            AS f(hash, content)
          ON CONFLICT DO NOTHING`.pipe(Effect.asVoid)

  const insertBranch = (row: {
    readonly id: string
    readonly assistantId: string
    readonly name: string
    readonly head: string | null
  }) =>
    sql<BranchRow>`INSERT INTO assistant_branches (id, assistant_id, name, head_commit_id, created_at, updated_at)
      VALUES (${row.id}, ${row.assistantId}, ${row.name}, ${row.head}, statement_timestamp(), statement_timestamp())
      ON CONFLICT (assistant_id, name) DO NOTHING
      RETURNING id::text, assistant_id::text, name, head_commit_id,
        ${sql.literal(isoTimestamp("created_at"))} AS created_at, ${sql.literal(isoTimestamp("updated_at"))} AS updated_at`.pipe(
      Effect.map((rows) => rows[0])
    )

  /** A branch by name; `forUpdate` takes the row lock that serializes edits and publishes (A4). */
  const findBranch = (assistantId: string, name: string, forUpdate = false) =>
    sql<BranchRow>`SELECT ${branchFields} FROM assistant_branches b
      WHERE b.assistant_id = ${assistantId} AND b.name = ${name} ${forUpdate ? sql`FOR UPDATE` : sql``}`.pipe(
      Effect.map((rows) => rows[0])
    )

  const listBranches = (assistantId: string) =>
    sql<BranchRow>`SELECT ${branchFields} FROM assistant_branches b WHERE b.assistant_id = ${assistantId}
      ORDER BY b.created_at, b.name`

  const deleteBranch = (branchId: string) =>
    sql`DELETE FROM assistant_branches WHERE id = ${branchId}`.pipe(Effect.asVoid)

  const setHead = (branchId: string, head: string | null) =>
    sql`UPDATE assistant_branches SET head_commit_id = ${head}, updated_at = statement_timestamp()
      WHERE id = ${branchId}`.pipe(Effect.asVoid)

  const touchBranch = (branchId: string) =>
    sql`UPDATE assistant_branches SET updated_at = statement_timestamp() WHERE id = ${branchId}`.pipe(Effect.asVoid)

  /** The draft's paths and hashes. */
  const draftHashes = (branchId: string) =>
    sql<{ path: string; content_hash: string }>`SELECT path, content_hash FROM assistant_draft_files
      WHERE branch_id = ${branchId}`.pipe(
      Effect.map((rows) => new Map(rows.map((row) => [row.path, row.content_hash])))
    )

  /** The draft's files with content, optionally under a path prefix. */
  const draftFiles = (assistantId: string, branchId: string, prefix = "") =>
    sql<{ path: string; content_hash: string; content: unknown }>`
      SELECT d.path, d.content_hash, f.content FROM assistant_draft_files d
      JOIN assistant_files f ON f.assistant_id = ${assistantId} AND f.content_hash = d.content_hash
      WHERE d.branch_id = ${branchId} AND starts_with(d.path, ${prefix})`.pipe(
      Effect.map(
        (rows) => new Map(rows.map((row) => [row.path, { hash: row.content_hash, content: row.content }] as const))
      )
    )

  /** Sets and removes draft paths, in two set-based statements. */
  const writeDraft = (branchId: string, set: ReadonlyMap<string, string>, remove: ReadonlyArray<string>) =>
    Effect.gen(function* () {
      if (remove.length > 0) {
        yield* sql`DELETE FROM assistant_draft_files WHERE branch_id = ${branchId} AND path = ANY(${[...remove]}::text[])`
      }
      if (set.size > 0) {
        yield* sql`INSERT INTO assistant_draft_files (branch_id, path, content_hash)
          SELECT ${branchId}, f.path, f.hash FROM unnest(${[...set.keys()]}::text[], ${[...set.values()]}::text[]) AS f(path, hash)
          ON CONFLICT (branch_id, path) DO UPDATE SET content_hash = EXCLUDED.content_hash`
      }
    })

  /** Makes the draft equal to a commit's files (or empty for null). */
  const resetDraft = (assistantId: string, branchId: string, commitId: string | null) =>
    Effect.gen(function* () {
      yield* sql`DELETE FROM assistant_draft_files WHERE branch_id = ${branchId}`
      if (commitId !== null) {
        yield* sql`INSERT INTO assistant_draft_files (branch_id, path, content_hash)
          SELECT ${branchId}, path, content_hash FROM assistant_commit_files
          WHERE assistant_id = ${assistantId} AND commit_id = ${commitId}`
      }
    })

  /** Copies a draft onto another (empty) branch. */
  const copyDraft = (fromBranchId: string, toBranchId: string) =>
    sql`INSERT INTO assistant_draft_files (branch_id, path, content_hash)
      SELECT ${toBranchId}, path, content_hash FROM assistant_draft_files WHERE branch_id = ${fromBranchId}`.pipe(
      Effect.asVoid
    )

  /** A commit's paths and hashes (empty for null). */
  const commitHashes = (assistantId: string, commitId: string | null) =>
    commitId === null
      ? Effect.succeed(new Map<string, string>())
      : sql<{ path: string; content_hash: string }>`SELECT path, content_hash FROM assistant_commit_files
          WHERE assistant_id = ${assistantId} AND commit_id = ${commitId}`.pipe(
          Effect.map((rows) => new Map(rows.map((row) => [row.path, row.content_hash])))
        )

  /** A commit's files with content (empty for null). */
  const commitFiles = (assistantId: string, commitId: string | null, prefix = "") =>
    commitId === null
      ? Effect.succeed(new Map<string, FileVersion>())
      : sql<{ path: string; content_hash: string; content: unknown }>`
          SELECT c.path, c.content_hash, f.content FROM assistant_commit_files c
          JOIN assistant_files f ON f.assistant_id = c.assistant_id AND f.content_hash = c.content_hash
          WHERE c.assistant_id = ${assistantId} AND c.commit_id = ${commitId} AND starts_with(c.path, ${prefix})`.pipe(
          Effect.map(
            (rows) => new Map(rows.map((row) => [row.path, { hash: row.content_hash, content: row.content }] as const))
          )
        )

  /** Contents by hash. */
  const contents = (assistantId: string, hashes: ReadonlyArray<string>) =>
    hashes.length === 0
      ? Effect.succeed(new Map<string, unknown>())
      : sql<{ content_hash: string; content: unknown }>`SELECT content_hash, content FROM assistant_files
          WHERE assistant_id = ${assistantId} AND content_hash = ANY(${[...hashes]}::text[])`.pipe(
          Effect.map((rows) => new Map(rows.map((row) => [row.content_hash, row.content])))
        )

  /** Inserts a commit whose files are the branch's draft (one set-based copy). */
  const insertCommit = (row: {
    readonly id: string
    readonly assistantId: string
    readonly branchId: string
    readonly parent: string | null
    readonly mergeParent: string | null
    readonly message: string | null
    readonly authorType: string
    readonly authorId: string | null
    readonly createdAt: Date
  }) =>
    Effect.gen(function* () {
      const inserted = yield* sql<Commit>`INSERT INTO assistant_commits AS c (assistant_id, id, parent_commit_id,
          merge_parent_commit_id, message, author_type, author_id, created_at)
        VALUES (${row.assistantId}, ${row.id}, ${row.parent}, ${row.mergeParent}, ${row.message}, ${row.authorType},
          ${row.authorId}, ${row.createdAt})
        RETURNING ${commitFields}`
      yield* sql`INSERT INTO assistant_commit_files (assistant_id, commit_id, path, content_hash)
        SELECT ${row.assistantId}, ${row.id}, path, content_hash FROM assistant_draft_files WHERE branch_id = ${row.branchId}`
      return inserted[0]!
    })

  const findCommit = (assistantId: string, commitId: string) =>
    sql<Commit>`SELECT ${commitFields} FROM assistant_commits c
      WHERE c.assistant_id = ${assistantId} AND c.id = ${commitId}`.pipe(Effect.map((rows) => rows[0]))

  const listCommitFiles = (assistantId: string, commitId: string) =>
    sql<CommitFile>`SELECT commit_id || ':' || path AS id, commit_id, path, content_hash FROM assistant_commit_files
      WHERE assistant_id = ${assistantId} AND commit_id = ${commitId} ORDER BY path`

  /**
   * Commits newest first; with `head`, only those reachable from it over both
   * parent links (A8).
   */
  /**
   * A recursive CTE `name(id)` of `start` and every commit reachable from it over
   * both parent links (parent and merge parent).
   */
  const ancestry = (name: string, assistantId: string, start: string) => {
    const cte = sql.literal(name)
    return sql`${cte}(id) AS (
      SELECT ${start}::text
      UNION
      SELECT p.parent FROM ${cte} r JOIN assistant_commits c ON c.assistant_id = ${assistantId} AND c.id = r.id
      CROSS JOIN LATERAL (VALUES (c.parent_commit_id), (c.merge_parent_commit_id)) AS p(parent)
      WHERE p.parent IS NOT NULL
    )`
  }

  const listCommits = (assistantId: string, options: { head?: string | null; limit: number; offset: number }) =>
    options.head === undefined
      ? sql<Commit>`SELECT ${commitFields} FROM assistant_commits c WHERE c.assistant_id = ${assistantId}
          ORDER BY c.seq DESC LIMIT ${options.limit} OFFSET ${options.offset}`
      : options.head === null
        ? Effect.succeed([] as ReadonlyArray<Commit>)
        : sql<Commit>`WITH RECURSIVE ${ancestry("reachable", assistantId, options.head)}
          SELECT ${commitFields} FROM assistant_commits c JOIN reachable r ON r.id = c.id
          WHERE c.assistant_id = ${assistantId}
          ORDER BY c.seq DESC LIMIT ${options.limit} OFFSET ${options.offset}`

  /** Whether `ancestor` is `descendant` or reachable from it over both parent links (A7). */
  const isAncestor = (assistantId: string, ancestor: string, descendant: string) =>
    sql<{ found: boolean }>`WITH RECURSIVE ${ancestry("reachable", assistantId, descendant)}
      SELECT EXISTS (SELECT 1 FROM reachable WHERE id = ${ancestor}) AS found`.pipe(
      Effect.map((rows) => rows[0]!.found)
    )

  /**
   * The nearest common ancestor of two commits over both parent links (A6):
   * of the commits reachable from both, the most recent one.
   */
  const mergeBase = (assistantId: string, a: string, b: string) =>
    sql<{ id: string }>`WITH RECURSIVE ${ancestry("from_a", assistantId, a)}, ${ancestry("from_b", assistantId, b)}
      SELECT c.id FROM assistant_commits c JOIN from_a ON from_a.id = c.id JOIN from_b ON from_b.id = c.id
      WHERE c.assistant_id = ${assistantId} ORDER BY c.seq DESC LIMIT 1`.pipe(Effect.map((rows) => rows[0]?.id ?? null))

  return {
    insertAssistant,
    findAssistant,
    markVersioned,
    insertFiles,
    insertBranch,
    findBranch,
    listBranches,
    deleteBranch,
    setHead,
    touchBranch,
    draftHashes,
    draftFiles,
    writeDraft,
    resetDraft,
    copyDraft,
    commitHashes,
    commitFiles,
    contents,
    insertCommit,
    findCommit,
    listCommitFiles,
    listCommits,
    isAncestor,
    mergeBase
  }
})

/** The assistants repository (SQL only). Requires `PgClient`. */
export class AssistantsRepo extends Context.Service<AssistantsRepo, Effect.Success<typeof makeRepo>>()(
  "parley/Assistants/AssistantsRepo"
) {
  static readonly layer = Layer.effect(AssistantsRepo, makeRepo)
}
