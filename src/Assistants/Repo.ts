/**
 * SQL of assistant version control: set-based statements over arrays (one
 * round trip for thousands of files), never one statement per file. Rows are
 * decoded with `SqlSchema` at the edge; `SqlError` is left to the services,
 * which turn it into a defect.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { type SqlError, SqlSchema } from "effect/sql"
import type { WithTransaction } from "../Database/Database.ts"
import { immutableIsoTimestamp } from "../Database/Json.ts"
import { Assistant, Branch, Commit, CommitFile, SessionPinning } from "../Domain/Assistant.ts"
import { isUuid } from "../Domain/Common.ts"
import type { FileHashes, FileVersion } from "./Files.ts"

/** An assistant's row as the services need it: `legacy_snapshot` as stored, read as it is (D18: never re-checked). */
export const AssistantRow = Schema.Struct({
  id: Schema.String,
  versioned: Schema.Boolean,
  legacy_snapshot: Schema.Unknown,
  session_pinning: SessionPinning
})
export type AssistantRow = typeof AssistantRow.Type

/** A new assistant; `legacySnapshot` only for a legacy one (A11). */
export interface NewAssistant {
  readonly id: string
  readonly organizationId: string
  readonly name: string
  readonly description: string | null
  readonly versioned: boolean
  readonly legacySnapshot: unknown
}

/** The members of an assistant to change (issue 39 item 6): absent ones are kept; `description` null clears it. */
export interface AssistantChanges {
  readonly name?: string | undefined
  readonly description?: string | null | undefined
}

/** A new branch whose HEAD is `head`. */
export interface NewBranch {
  readonly id: string
  readonly organizationId: string
  readonly assistantId: string
  readonly name: string
  readonly head: string | null
}

/** A new commit; its files are the draft of `branchId` at the time of the insert. */
export interface NewCommit {
  readonly id: string
  readonly organizationId: string
  readonly assistantId: string
  readonly branchId: string
  readonly parent: string | null
  readonly mergeParent: string | null
  readonly message: string | null
  readonly authorType: Commit["author_type"]
  readonly authorId: string | null
  readonly createdAt: Date
}

/** An assistant's rollout as stored (A12), with its branch's name and HEAD now. */
export const RolloutRow = Schema.Struct({
  /** This rollout: a PUT of another branch starts a new one. */
  id: Schema.String,
  branch_id: Schema.String,
  branch_name: Schema.String,
  head_commit_id: Schema.NullOr(Schema.String),
  percent: Schema.Int,
  created_at: Schema.String,
  updated_at: Schema.String
})
export type RolloutRow = typeof RolloutRow.Type

/** A rollout to set (A12); `id` is used when it replaces another branch's or none. */
export interface NewRollout {
  readonly id: string
  readonly organizationId: string
  readonly assistantId: string
  readonly branchId: string
  readonly percent: number
}

/**
 * A session's assignment (A12, A13): the branch its first run read, the
 * rollout that chose it (null: `main` with no rollout choosing), and that
 * run's commit, which a pinned session keeps.
 */
export const Assignment = Schema.Struct({
  rollout_id: Schema.NullOr(Schema.String),
  branch_name: Schema.String,
  commit_id: Schema.String
})
export type Assignment = typeof Assignment.Type

/** Which commits `listCommits` returns: all, or those reachable from `head` (A8; none for a null HEAD). */
export interface CommitsPage {
  readonly head?: string | null | undefined
  readonly limit: number
  readonly offset: number
}

/** The assistants repository: SQL only, no rules. Every method may fail with `SqlError`. */
export class AssistantsRepo extends Context.Service<
  AssistantsRepo,
  {
    /** Runs `self` in one transaction (nested: a savepoint). */
    readonly withTransaction: WithTransaction
    /** Inserts an assistant; returns it as the admin API does (O6). */
    readonly insertAssistant: (row: NewAssistant) => Effect.Effect<Assistant, SqlError.SqlError>
    /**
     * The organization's assistants in id order (creation order: UUIDv7), `limit`
     * of them after `afterId`; none after an `afterId` that is no UUID (issue 39 item 6).
     */
    readonly listAssistants: (
      organizationId: string,
      page: { readonly limit: number; readonly afterId?: string | undefined }
    ) => Effect.Effect<ReadonlyArray<Assistant>, SqlError.SqlError>
    /** The organization's assistant as the APIs show it, or undefined (A1). */
    readonly getAssistant: (
      organizationId: string,
      assistantId: string
    ) => Effect.Effect<Assistant | undefined, SqlError.SqlError>
    /** Changes the members given; returns the assistant, or undefined when the organization has none of that id. */
    readonly updateAssistant: (
      organizationId: string,
      assistantId: string,
      changes: AssistantChanges
    ) => Effect.Effect<Assistant | undefined, SqlError.SqlError>
    /**
     * Whether an AI agent of the organization, not deleted, answers from the
     * assistant (`agents`, read only: Admin writes it).
     */
    readonly assistantHasAgent: (
      organizationId: string,
      assistantId: string
    ) => Effect.Effect<boolean, SqlError.SqlError>
    /**
     * Deletes the assistant with everything of its version control (files,
     * commits, branches, drafts, rollout, session assignments: `ON DELETE
     * CASCADE`); run records stay (they are sessions' history).
     */
    readonly deleteAssistant: (organizationId: string, assistantId: string) => Effect.Effect<void, SqlError.SqlError>
    /** The organization's assistant (A1); `forUpdate` locks its row. An id that is no UUID finds nothing. */
    readonly findAssistant: (
      organizationId: string,
      assistantId: string,
      forUpdate?: boolean
    ) => Effect.Effect<AssistantRow | undefined, SqlError.SqlError>
    /** Marks a legacy assistant versioned (A11). */
    readonly markVersioned: (organizationId: string, assistantId: string) => Effect.Effect<void, SqlError.SqlError>
    /** Stores file contents, once per assistant and content hash (A5). */
    readonly insertFiles: (
      organizationId: string,
      assistantId: string,
      files: ReadonlyArray<FileVersion>
    ) => Effect.Effect<void, SqlError.SqlError>
    /** Inserts a branch; `undefined` when the name is taken (A3). */
    readonly insertBranch: (row: NewBranch) => Effect.Effect<Branch | undefined, SqlError.SqlError>
    /** A branch by name; `forUpdate` takes the row lock that serializes edits and publishes of the branch (A4). */
    readonly findBranch: (
      organizationId: string,
      assistantId: string,
      name: string,
      forUpdate?: boolean
    ) => Effect.Effect<Branch | undefined, SqlError.SqlError>
    /** The assistant's branches, oldest first. */
    readonly listBranches: (
      organizationId: string,
      assistantId: string
    ) => Effect.Effect<ReadonlyArray<Branch>, SqlError.SqlError>
    /** Deletes a branch and its draft. */
    readonly deleteBranch: (organizationId: string, branchId: string) => Effect.Effect<void, SqlError.SqlError>
    /** Moves a branch's HEAD. */
    readonly setHead: (
      organizationId: string,
      branchId: string,
      head: string | null
    ) => Effect.Effect<void, SqlError.SqlError>
    /** Sets a branch's `updated_at` to now. */
    readonly touchBranch: (organizationId: string, branchId: string) => Effect.Effect<void, SqlError.SqlError>
    /** The draft's paths and hashes. */
    readonly draftHashes: (
      organizationId: string,
      branchId: string
    ) => Effect.Effect<Map<string, string>, SqlError.SqlError>
    /** The draft's files with content, those under `prefix` when given. */
    readonly draftFiles: (
      organizationId: string,
      assistantId: string,
      branchId: string,
      prefix?: string
    ) => Effect.Effect<Map<string, FileVersion>, SqlError.SqlError>
    /** Sets (path -> hash) and removes draft paths. */
    readonly writeDraft: (
      organizationId: string,
      branchId: string,
      set: FileHashes,
      remove: ReadonlyArray<string>
    ) => Effect.Effect<void, SqlError.SqlError>
    /** Makes the draft equal to a commit's files (empty for null). */
    readonly resetDraft: (
      organizationId: string,
      assistantId: string,
      branchId: string,
      commitId: string | null
    ) => Effect.Effect<void, SqlError.SqlError>
    /** Copies a draft onto another branch whose draft is empty. */
    readonly copyDraft: (
      organizationId: string,
      fromBranchId: string,
      toBranchId: string
    ) => Effect.Effect<void, SqlError.SqlError>
    /** A commit's paths and hashes (empty for null). */
    readonly commitHashes: (
      organizationId: string,
      assistantId: string,
      commitId: string | null
    ) => Effect.Effect<Map<string, string>, SqlError.SqlError>
    /** A commit's files with content (empty for null). */
    readonly commitFiles: (
      organizationId: string,
      assistantId: string,
      commitId: string | null
    ) => Effect.Effect<Map<string, FileVersion>, SqlError.SqlError>
    /** Contents by hash. */
    readonly contents: (
      organizationId: string,
      assistantId: string,
      hashes: ReadonlyArray<string>
    ) => Effect.Effect<Map<string, unknown>, SqlError.SqlError>
    /**
     * Inserts a commit whose files are the branch's draft (one set-based copy).
     * A commit with the same id already there is the same commit (A5: the id
     * hashes its parent, files, message, author and time; two branches at one
     * HEAD publishing the same change in the same millisecond): it is returned
     * as is, as Git shares one object.
     */
    readonly insertCommit: (row: NewCommit) => Effect.Effect<Commit, SqlError.SqlError>
    /** A commit by id. */
    readonly findCommit: (
      organizationId: string,
      assistantId: string,
      commitId: string
    ) => Effect.Effect<Commit | undefined, SqlError.SqlError>
    /** A commit's files (spec "Files"), ordered by path. */
    readonly listCommitFiles: (
      organizationId: string,
      assistantId: string,
      commitId: string
    ) => Effect.Effect<ReadonlyArray<CommitFile>, SqlError.SqlError>
    /** Commits newest first; with `head`, only those reachable from it over both parent links (A8). */
    readonly listCommits: (
      organizationId: string,
      assistantId: string,
      page: CommitsPage
    ) => Effect.Effect<ReadonlyArray<Commit>, SqlError.SqlError>
    /** Whether `ancestor` is `descendant` or reachable from it over both parent links (A7). */
    readonly isAncestor: (
      organizationId: string,
      assistantId: string,
      ancestor: string,
      descendant: string
    ) => Effect.Effect<boolean, SqlError.SqlError>
    /** The nearest common ancestor of two commits over both parent links: of those reachable from both, the newest (A6). */
    readonly mergeBase: (
      organizationId: string,
      assistantId: string,
      a: string,
      b: string
    ) => Effect.Effect<string | null, SqlError.SqlError>
    /** Sets the assistant's session pinning (A13). */
    readonly setPinning: (
      organizationId: string,
      assistantId: string,
      pinning: SessionPinning
    ) => Effect.Effect<void, SqlError.SqlError>
    /** The assistant's rollout, or undefined (A12). */
    readonly findRollout: (
      organizationId: string,
      assistantId: string
    ) => Effect.Effect<RolloutRow | undefined, SqlError.SqlError>
    /**
     * Sets the assistant's rollout (A12): of the same branch, its percent
     * changes and it keeps its id and start; else `rollout.id` replaces it.
     * Returns it as {@link findRollout} does.
     */
    readonly putRollout: (rollout: NewRollout) => Effect.Effect<RolloutRow, SqlError.SqlError>
    /** Ends the assistant's rollout; returns whether there was one (A12). */
    readonly deleteRollout: (organizationId: string, assistantId: string) => Effect.Effect<boolean, SqlError.SqlError>
    /** A session's assignment for the assistant, or undefined before its first run (A12, A13). */
    readonly findAssignment: (
      organizationId: string,
      sessionId: string,
      assistantId: string
    ) => Effect.Effect<Assignment | undefined, SqlError.SqlError>
    /**
     * Records a session's assignment unless it has one; returns the one
     * recorded (the first writer's when two runs of the session race).
     */
    readonly insertAssignment: (
      organizationId: string,
      sessionId: string,
      assistantId: string,
      assignment: Assignment
    ) => Effect.Effect<Assignment, SqlError.SqlError>
    /**
     * Moves a session to `branchName` with no rollout (`main` when its rollout
     * ended, A12); its first run's commit stays.
     */
    readonly reassign: (
      organizationId: string,
      sessionId: string,
      assistantId: string,
      branchName: string
    ) => Effect.Effect<void, SqlError.SqlError>
  }
>()("parley/Assistants/AssistantsRepo") {
  /** The repository on PostgreSQL; requires `PgClient`. */
  static readonly layer = Layer.effect(
    AssistantsRepo,
    Effect.gen(function* () {
      const sql = yield* PgClient.PgClient
      return AssistantsRepo.of(makeSqlRepo(sql))
    })
  )
}

/** The columns of {@link Assistant}. */
const assistantColumns = `id::text, organization_id::text, name, description, versioned,
  ${immutableIsoTimestamp("created_at")} AS created_at, ${immutableIsoTimestamp("updated_at")} AS updated_at`

const branchColumns = `b.id::text, b.assistant_id::text, b.name, b.head_commit_id,
  ${immutableIsoTimestamp("b.created_at")} AS created_at, ${immutableIsoTimestamp("b.updated_at")} AS updated_at`

const commitColumns = `c.id, c.assistant_id::text, c.parent_commit_id, c.merge_parent_commit_id, c.message,
  c.author_type, c.author_id, ${immutableIsoTimestamp("c.created_at")} AS created_at`

/** An assistant of an organization. */
const AssistantKey = Schema.Struct({ organizationId: Schema.String, assistantId: Schema.String })

/** A commit of an assistant of an organization. */
const CommitKey = Schema.Struct({ organizationId: Schema.String, assistantId: Schema.String, commitId: Schema.String })

/** A draft's or commit's path and hash. */
const HashRow = Schema.Struct({ path: Schema.String, content_hash: Schema.String })

/** A draft's or commit's path, hash and content. */
const FileRow = Schema.Struct({ path: Schema.String, content_hash: Schema.String, content: Schema.Unknown })

/** A stored content by hash. */
const ContentRow = Schema.Struct({ content_hash: Schema.String, content: Schema.Unknown })

/** A row that does not match its schema is a bug, not a failure of the request. */
const orDieOnSchema = <A, E, R>(self: Effect.Effect<A, E | Schema.SchemaError, R>) =>
  Effect.catchIf(self, Schema.isSchemaError, Effect.die) as Effect.Effect<A, Exclude<E, Schema.SchemaError>, R>

const hashesOf = (rows: ReadonlyArray<typeof HashRow.Type>) => new Map(rows.map((row) => [row.path, row.content_hash]))

const filesOf = (rows: ReadonlyArray<typeof FileRow.Type>) =>
  new Map(rows.map((row) => [row.path, { hash: row.content_hash, content: row.content }] as const))

const makeSqlRepo = (sql: PgClient.PgClient): AssistantsRepo["Service"] => {
  const branchFields = sql.literal(branchColumns)
  const commitFields = sql.literal(commitColumns)
  const lock = (forUpdate: boolean) => (forUpdate ? sql`FOR UPDATE` : sql``)

  const insertAssistantRow = SqlSchema.findOne({
    Request: Schema.Struct({
      id: Schema.String,
      organizationId: Schema.String,
      name: Schema.String,
      description: Schema.NullOr(Schema.String),
      versioned: Schema.Boolean,
      legacySnapshot: Schema.Unknown
    }),
    Result: Assistant,
    execute: (row) =>
      sql`INSERT INTO assistants (id, organization_id, name, description, versioned, legacy_snapshot, created_at)
        VALUES (${row.id}, ${row.organizationId}, ${row.name}, ${row.description}, ${row.versioned},
          ${row.legacySnapshot === undefined ? null : sql.json(row.legacySnapshot)}, statement_timestamp())
        RETURNING ${sql.literal(assistantColumns)}`
  })

  const listAssistantRows = SqlSchema.findAll({
    Request: Schema.Struct({
      organizationId: Schema.String,
      limit: Schema.Int,
      afterId: Schema.optionalKey(Schema.String)
    }),
    Result: Assistant,
    execute: ({ organizationId, limit, afterId }) =>
      sql`SELECT ${sql.literal(assistantColumns)} FROM assistants WHERE organization_id = ${organizationId}
        ${afterId === undefined ? sql`` : sql`AND id > ${afterId}`} ORDER BY id LIMIT ${limit}`
  })

  const getAssistantRow = SqlSchema.findOneOption({
    Request: AssistantKey,
    Result: Assistant,
    execute: ({ organizationId, assistantId }) =>
      sql`SELECT ${sql.literal(assistantColumns)} FROM assistants
        WHERE id = ${assistantId} AND organization_id = ${organizationId}`
  })

  const updateAssistantRow = SqlSchema.findOneOption({
    Request: Schema.Struct({
      organizationId: Schema.String,
      assistantId: Schema.String,
      name: Schema.NullOr(Schema.String),
      setDescription: Schema.Boolean,
      description: Schema.NullOr(Schema.String)
    }),
    Result: Assistant,
    execute: (row) =>
      sql`UPDATE assistants SET name = coalesce(${row.name}, name),
          description = CASE WHEN ${row.setDescription} THEN ${row.description} ELSE description END,
          updated_at = statement_timestamp()
        WHERE id = ${row.assistantId} AND organization_id = ${row.organizationId}
        RETURNING ${sql.literal(assistantColumns)}`
  })

  const findAssistantRow = SqlSchema.findOneOption({
    Request: Schema.Struct({ organizationId: Schema.String, assistantId: Schema.String, forUpdate: Schema.Boolean }),
    Result: AssistantRow,
    execute: ({ organizationId, assistantId, forUpdate }) =>
      sql`SELECT id::text, versioned, legacy_snapshot, session_pinning FROM assistants
        WHERE id = ${assistantId} AND organization_id = ${organizationId} ${lock(forUpdate)}`
  })

  const rolloutFields = sql.literal(`r.id::text, r.branch_id::text, b.name AS branch_name, b.head_commit_id, r.percent,
    ${immutableIsoTimestamp("r.created_at")} AS created_at, ${immutableIsoTimestamp("r.updated_at")} AS updated_at`)

  const findRolloutRow = SqlSchema.findOneOption({
    Request: AssistantKey,
    Result: RolloutRow,
    execute: ({ organizationId, assistantId }) =>
      sql`SELECT ${rolloutFields} FROM assistant_rollouts r
        JOIN assistant_branches b ON b.organization_id = r.organization_id AND b.id = r.branch_id
        WHERE r.organization_id = ${organizationId} AND r.assistant_id = ${assistantId}`
  })

  const putRolloutRow = SqlSchema.findOne({
    Request: Schema.Struct({
      id: Schema.String,
      organizationId: Schema.String,
      assistantId: Schema.String,
      branchId: Schema.String,
      percent: Schema.Int
    }),
    Result: RolloutRow,
    execute: (rollout) =>
      sql`WITH r AS (
          INSERT INTO assistant_rollouts AS o (organization_id, assistant_id, id, branch_id, percent, created_at,
            updated_at)
          VALUES (${rollout.organizationId}, ${rollout.assistantId}, ${rollout.id}, ${rollout.branchId}, ${rollout.percent},
            statement_timestamp(), statement_timestamp())
          ON CONFLICT (organization_id, assistant_id) DO UPDATE SET
            id = CASE WHEN o.branch_id = EXCLUDED.branch_id THEN o.id ELSE EXCLUDED.id END,
            created_at = CASE WHEN o.branch_id = EXCLUDED.branch_id THEN o.created_at ELSE EXCLUDED.created_at END,
            branch_id = EXCLUDED.branch_id, percent = EXCLUDED.percent, updated_at = EXCLUDED.updated_at
          RETURNING *
        )
        SELECT ${rolloutFields} FROM r
        JOIN assistant_branches b ON b.organization_id = r.organization_id AND b.id = r.branch_id`
  })

  const findAssignmentRow = SqlSchema.findOneOption({
    Request: Schema.Struct({ organizationId: Schema.String, sessionId: Schema.String, assistantId: Schema.String }),
    Result: Assignment,
    execute: ({ organizationId, sessionId, assistantId }) =>
      sql`SELECT rollout_id::text, branch_name, commit_id FROM session_assignments
        WHERE organization_id = ${organizationId} AND session_id = ${sessionId} AND assistant_id = ${assistantId}`
  })

  const insertAssignmentRow = SqlSchema.findOneOption({
    Request: Schema.Struct({
      organizationId: Schema.String,
      sessionId: Schema.String,
      assistantId: Schema.String,
      rolloutId: Schema.NullOr(Schema.String),
      branchName: Schema.String,
      commitId: Schema.String
    }),
    Result: Assignment,
    execute: (row) =>
      sql`INSERT INTO session_assignments (organization_id, session_id, assistant_id, rollout_id, branch_name,
          commit_id, created_at, updated_at)
        VALUES (${row.organizationId}, ${row.sessionId}, ${row.assistantId}, ${row.rolloutId}, ${row.branchName}, ${row.commitId},
          statement_timestamp(), statement_timestamp())
        ON CONFLICT (organization_id, session_id, assistant_id) DO NOTHING
        RETURNING rollout_id::text, branch_name, commit_id`
  })

  const insertBranchRow = SqlSchema.findOneOption({
    Request: Schema.Struct({
      id: Schema.String,
      organizationId: Schema.String,
      assistantId: Schema.String,
      name: Schema.String,
      head: Schema.NullOr(Schema.String)
    }),
    Result: Branch,
    execute: (row) =>
      sql`INSERT INTO assistant_branches AS b (organization_id, id, assistant_id, name, head_commit_id, created_at,
          updated_at)
        VALUES (${row.organizationId}, ${row.id}, ${row.assistantId}, ${row.name}, ${row.head}, statement_timestamp(), statement_timestamp())
        ON CONFLICT (organization_id, assistant_id, name) DO NOTHING
        RETURNING ${branchFields}`
  })

  const findBranchRow = SqlSchema.findOneOption({
    Request: Schema.Struct({
      organizationId: Schema.String,
      assistantId: Schema.String,
      name: Schema.String,
      forUpdate: Schema.Boolean
    }),
    Result: Branch,
    execute: ({ organizationId, assistantId, name, forUpdate }) =>
      sql`SELECT ${branchFields} FROM assistant_branches b
        WHERE b.organization_id = ${organizationId} AND b.assistant_id = ${assistantId} AND b.name = ${name} ${lock(forUpdate)}`
  })

  const listBranchRows = SqlSchema.findAll({
    Request: AssistantKey,
    Result: Branch,
    execute: ({ organizationId, assistantId }) =>
      sql`SELECT ${branchFields} FROM assistant_branches b
        WHERE b.organization_id = ${organizationId} AND b.assistant_id = ${assistantId}
        ORDER BY b.created_at, b.name`
  })

  const draftHashRows = SqlSchema.findAll({
    Request: Schema.Struct({ organizationId: Schema.String, branchId: Schema.String }),
    Result: HashRow,
    execute: ({ organizationId, branchId }) =>
      sql`SELECT path, content_hash FROM assistant_draft_files
        WHERE organization_id = ${organizationId} AND branch_id = ${branchId}`
  })

  const draftFileRows = SqlSchema.findAll({
    Request: Schema.Struct({
      organizationId: Schema.String,
      assistantId: Schema.String,
      branchId: Schema.String,
      prefix: Schema.String
    }),
    Result: FileRow,
    execute: ({ organizationId, assistantId, branchId, prefix }) =>
      sql`SELECT d.path, d.content_hash, f.content FROM assistant_draft_files d
        JOIN assistant_files f ON f.organization_id = d.organization_id AND f.assistant_id = ${assistantId}
          AND f.content_hash = d.content_hash
        WHERE d.organization_id = ${organizationId} AND d.branch_id = ${branchId} AND starts_with(d.path, ${prefix})`
  })

  const commitHashRows = SqlSchema.findAll({
    Request: CommitKey,
    Result: HashRow,
    execute: ({ organizationId, assistantId, commitId }) =>
      sql`SELECT path, content_hash FROM assistant_commit_files
        WHERE organization_id = ${organizationId} AND assistant_id = ${assistantId} AND commit_id = ${commitId}`
  })

  const commitFileRows = SqlSchema.findAll({
    Request: CommitKey,
    Result: FileRow,
    execute: ({ organizationId, assistantId, commitId }) =>
      sql`SELECT c.path, c.content_hash, f.content FROM assistant_commit_files c
        JOIN assistant_files f ON f.organization_id = c.organization_id AND f.assistant_id = c.assistant_id
          AND f.content_hash = c.content_hash
        WHERE c.organization_id = ${organizationId} AND c.assistant_id = ${assistantId} AND c.commit_id = ${commitId}`
  })

  const contentRows = SqlSchema.findAll({
    Request: Schema.Struct({
      organizationId: Schema.String,
      assistantId: Schema.String,
      hashes: Schema.Array(Schema.String)
    }),
    Result: ContentRow,
    execute: ({ organizationId, assistantId, hashes }) =>
      sql`SELECT content_hash, content FROM assistant_files
        WHERE organization_id = ${organizationId} AND assistant_id = ${assistantId} AND content_hash = ANY(${hashes}::text[])`
  })

  const insertCommitRow = SqlSchema.findOneOption({
    Request: Schema.Struct({
      id: Schema.String,
      organizationId: Schema.String,
      assistantId: Schema.String,
      parent: Schema.NullOr(Schema.String),
      mergeParent: Schema.NullOr(Schema.String),
      message: Schema.NullOr(Schema.String),
      authorType: Schema.String,
      authorId: Schema.NullOr(Schema.String),
      createdAt: Schema.Date
    }),
    Result: Commit,
    execute: (row) =>
      sql`INSERT INTO assistant_commits AS c (organization_id, assistant_id, id, parent_commit_id,
          merge_parent_commit_id, message, author_type, author_id, created_at)
        VALUES (${row.organizationId}, ${row.assistantId}, ${row.id}, ${row.parent}, ${row.mergeParent}, ${row.message}, ${row.authorType},
          ${row.authorId}, ${row.createdAt})
        ON CONFLICT (organization_id, assistant_id, id) DO NOTHING
        RETURNING ${commitFields}`
  })

  const findCommitRow = SqlSchema.findOneOption({
    Request: CommitKey,
    Result: Commit,
    execute: ({ organizationId, assistantId, commitId }) =>
      sql`SELECT ${commitFields} FROM assistant_commits c
        WHERE c.organization_id = ${organizationId} AND c.assistant_id = ${assistantId} AND c.id = ${commitId}`
  })

  const commitFileListRows = SqlSchema.findAll({
    Request: CommitKey,
    Result: CommitFile,
    execute: ({ organizationId, assistantId, commitId }) =>
      sql`SELECT commit_id || ':' || path AS id, commit_id, path, content_hash FROM assistant_commit_files
        WHERE organization_id = ${organizationId} AND assistant_id = ${assistantId} AND commit_id = ${commitId} ORDER BY path`
  })

  /**
   * A recursive CTE `name(id)` of `start` and every commit reachable from it over
   * both parent links (parent and merge parent).
   */
  const ancestry = (name: string, organizationId: string, assistantId: string, start: string) => {
    const cte = sql.literal(name)
    return sql`${cte}(id) AS (
      SELECT ${start}::text
      UNION
      SELECT p.parent FROM ${cte} r JOIN assistant_commits c
        ON c.organization_id = ${organizationId} AND c.assistant_id = ${assistantId} AND c.id = r.id
      CROSS JOIN LATERAL (VALUES (c.parent_commit_id), (c.merge_parent_commit_id)) AS p(parent)
      WHERE p.parent IS NOT NULL
    )`
  }

  const commitRows = SqlSchema.findAll({
    Request: Schema.Struct({
      organizationId: Schema.String,
      assistantId: Schema.String,
      head: Schema.optional(Schema.String),
      limit: Schema.Number,
      offset: Schema.Number
    }),
    Result: Commit,
    execute: ({ organizationId, assistantId, head, limit, offset }) =>
      head === undefined
        ? sql`SELECT ${commitFields} FROM assistant_commits c
            WHERE c.organization_id = ${organizationId} AND c.assistant_id = ${assistantId}
            ORDER BY c.seq DESC LIMIT ${limit} OFFSET ${offset}`
        : sql`WITH RECURSIVE ${ancestry("reachable", organizationId, assistantId, head)}
            SELECT ${commitFields} FROM assistant_commits c JOIN reachable r ON r.id = c.id
            WHERE c.organization_id = ${organizationId} AND c.assistant_id = ${assistantId}
            ORDER BY c.seq DESC LIMIT ${limit} OFFSET ${offset}`
  })

  const ancestorRow = SqlSchema.findOne({
    Request: Schema.Struct({
      organizationId: Schema.String,
      assistantId: Schema.String,
      ancestor: Schema.String,
      descendant: Schema.String
    }),
    Result: Schema.Struct({ found: Schema.Boolean }),
    execute: ({ organizationId, assistantId, ancestor, descendant }) =>
      sql`WITH RECURSIVE ${ancestry("reachable", organizationId, assistantId, descendant)}
        SELECT EXISTS (SELECT 1 FROM reachable WHERE id = ${ancestor}) AS found`
  })

  const mergeBaseRow = SqlSchema.findOneOption({
    Request: Schema.Struct({
      organizationId: Schema.String,
      assistantId: Schema.String,
      a: Schema.String,
      b: Schema.String
    }),
    Result: Schema.Struct({ id: Schema.String }),
    execute: ({ organizationId, assistantId, a, b }) =>
      sql`WITH RECURSIVE ${ancestry("from_a", organizationId, assistantId, a)},
          ${ancestry("from_b", organizationId, assistantId, b)}
        SELECT c.id FROM assistant_commits c JOIN from_a ON from_a.id = c.id JOIN from_b ON from_b.id = c.id
        WHERE c.organization_id = ${organizationId} AND c.assistant_id = ${assistantId} ORDER BY c.seq DESC LIMIT 1`
  })

  return {
    withTransaction: sql.withTransaction,

    insertAssistant: (row) =>
      orDieOnSchema(insertAssistantRow(row)).pipe(Effect.catchTag("NoSuchElementError", Effect.die)),

    listAssistants: (organizationId, page) =>
      page.afterId !== undefined && !isUuid(page.afterId)
        ? Effect.succeed([])
        : orDieOnSchema(
            listAssistantRows({
              organizationId,
              limit: page.limit,
              ...(page.afterId === undefined ? {} : { afterId: page.afterId })
            })
          ),

    getAssistant: (organizationId, assistantId) =>
      isUuid(assistantId)
        ? orDieOnSchema(getAssistantRow({ organizationId, assistantId })).pipe(Effect.map(Option.getOrUndefined))
        : Effect.succeed(undefined),

    updateAssistant: (organizationId, assistantId, changes) =>
      isUuid(assistantId)
        ? orDieOnSchema(
            updateAssistantRow({
              organizationId,
              assistantId,
              name: changes.name ?? null,
              setDescription: changes.description !== undefined,
              description: changes.description ?? null
            })
          ).pipe(Effect.map(Option.getOrUndefined))
        : Effect.succeed(undefined),

    assistantHasAgent: (organizationId, assistantId) =>
      sql`SELECT 1 FROM agents WHERE organization_id = ${organizationId} AND type = 'ai'
        AND assistant_id = ${assistantId} AND deleted_at IS NULL LIMIT 1`.pipe(Effect.map((rows) => rows.length > 0)),

    deleteAssistant: (organizationId, assistantId) =>
      sql`DELETE FROM assistants WHERE id = ${assistantId} AND organization_id = ${organizationId}`.pipe(Effect.asVoid),

    findAssistant: (organizationId, assistantId, forUpdate = false) =>
      isUuid(assistantId)
        ? orDieOnSchema(findAssistantRow({ organizationId, assistantId, forUpdate })).pipe(
            Effect.map(Option.getOrUndefined)
          )
        : Effect.succeed(undefined),

    markVersioned: (organizationId, assistantId) =>
      sql`UPDATE assistants SET versioned = true, updated_at = statement_timestamp()
        WHERE organization_id = ${organizationId} AND id = ${assistantId}`.pipe(Effect.asVoid),

    insertFiles: (organizationId, assistantId, files) =>
      files.length === 0
        ? Effect.void
        : sql`INSERT INTO assistant_files (organization_id, assistant_id, content_hash, content)
            SELECT ${organizationId}, ${assistantId}, f.hash, f.content::jsonb
            FROM unnest(${files.map((file) => file.hash)}::text[], ${files.map((file) => JSON.stringify(file.content))}::text[])
              AS f(hash, content)
            ON CONFLICT DO NOTHING`.pipe(Effect.asVoid),

    insertBranch: (row) => orDieOnSchema(insertBranchRow(row)).pipe(Effect.map(Option.getOrUndefined)),

    findBranch: (organizationId, assistantId, name, forUpdate = false) =>
      orDieOnSchema(findBranchRow({ organizationId, assistantId, name, forUpdate })).pipe(
        Effect.map(Option.getOrUndefined)
      ),

    listBranches: (organizationId, assistantId) => orDieOnSchema(listBranchRows({ organizationId, assistantId })),

    deleteBranch: (organizationId, branchId) =>
      sql`DELETE FROM assistant_branches WHERE organization_id = ${organizationId} AND id = ${branchId}`.pipe(
        Effect.asVoid
      ),

    setHead: (organizationId, branchId, head) =>
      sql`UPDATE assistant_branches SET head_commit_id = ${head}, updated_at = statement_timestamp()
        WHERE organization_id = ${organizationId} AND id = ${branchId}`.pipe(Effect.asVoid),

    touchBranch: (organizationId, branchId) =>
      sql`UPDATE assistant_branches SET updated_at = statement_timestamp()
        WHERE organization_id = ${organizationId} AND id = ${branchId}`.pipe(Effect.asVoid),

    draftHashes: (organizationId, branchId) =>
      orDieOnSchema(draftHashRows({ organizationId, branchId })).pipe(Effect.map(hashesOf)),

    draftFiles: (organizationId, assistantId, branchId, prefix = "") =>
      orDieOnSchema(draftFileRows({ organizationId, assistantId, branchId, prefix })).pipe(Effect.map(filesOf)),

    writeDraft: (organizationId, branchId, set, remove) =>
      Effect.gen(function* () {
        if (remove.length > 0) {
          yield* sql`DELETE FROM assistant_draft_files
            WHERE organization_id = ${organizationId} AND branch_id = ${branchId} AND path = ANY(${[...remove]}::text[])`
        }
        if (set.size > 0) {
          yield* sql`INSERT INTO assistant_draft_files (organization_id, branch_id, path, content_hash)
            SELECT ${organizationId}, ${branchId}, f.path, f.hash
            FROM unnest(${[...set.keys()]}::text[], ${[...set.values()]}::text[]) AS f(path, hash)
            ON CONFLICT (organization_id, branch_id, path) DO UPDATE SET content_hash = EXCLUDED.content_hash`
        }
      }),

    resetDraft: (organizationId, assistantId, branchId, commitId) =>
      Effect.gen(function* () {
        yield* sql`DELETE FROM assistant_draft_files WHERE organization_id = ${organizationId} AND branch_id = ${branchId}`
        if (commitId !== null) {
          yield* sql`INSERT INTO assistant_draft_files (organization_id, branch_id, path, content_hash)
            SELECT organization_id, ${branchId}, path, content_hash FROM assistant_commit_files
            WHERE organization_id = ${organizationId} AND assistant_id = ${assistantId} AND commit_id = ${commitId}`
        }
      }),

    copyDraft: (organizationId, fromBranchId, toBranchId) =>
      sql`INSERT INTO assistant_draft_files (organization_id, branch_id, path, content_hash)
        SELECT organization_id, ${toBranchId}, path, content_hash FROM assistant_draft_files
        WHERE organization_id = ${organizationId} AND branch_id = ${fromBranchId}`.pipe(Effect.asVoid),

    commitHashes: (organizationId, assistantId, commitId) =>
      commitId === null
        ? Effect.succeed(new Map<string, string>())
        : orDieOnSchema(commitHashRows({ organizationId, assistantId, commitId })).pipe(Effect.map(hashesOf)),

    commitFiles: (organizationId, assistantId, commitId) =>
      commitId === null
        ? Effect.succeed(new Map<string, FileVersion>())
        : orDieOnSchema(commitFileRows({ organizationId, assistantId, commitId })).pipe(Effect.map(filesOf)),

    contents: (organizationId, assistantId, hashes) =>
      hashes.length === 0
        ? Effect.succeed(new Map<string, unknown>())
        : orDieOnSchema(contentRows({ organizationId, assistantId, hashes })).pipe(
            Effect.map((rows) => new Map(rows.map((row) => [row.content_hash, row.content])))
          ),

    insertCommit: (row) =>
      Effect.gen(function* () {
        const inserted = yield* orDieOnSchema(insertCommitRow(row))
        if (Option.isSome(inserted)) {
          yield* sql`INSERT INTO assistant_commit_files (organization_id, assistant_id, commit_id, path, content_hash)
          SELECT organization_id, ${row.assistantId}, ${row.id}, path, content_hash FROM assistant_draft_files
          WHERE organization_id = ${row.organizationId} AND branch_id = ${row.branchId}`
          return inserted.value
        }
        // The same id is the same commit (A5: the id hashes parent, files, message, author and time), made by
        // another branch in the same millisecond: read in a statement of its own, whose snapshot sees it committed.
        const existing = yield* orDieOnSchema(
          findCommitRow({ organizationId: row.organizationId, assistantId: row.assistantId, commitId: row.id })
        )
        if (Option.isNone(existing)) return yield* Effect.die(new Error(`commit ${row.id} neither inserted nor found`))
        return existing.value
      }),

    findCommit: (organizationId, assistantId, commitId) =>
      orDieOnSchema(findCommitRow({ organizationId, assistantId, commitId })).pipe(Effect.map(Option.getOrUndefined)),

    listCommitFiles: (organizationId, assistantId, commitId) =>
      orDieOnSchema(commitFileListRows({ organizationId, assistantId, commitId })),

    listCommits: (organizationId, assistantId, page) =>
      page.head === null
        ? Effect.succeed([])
        : orDieOnSchema(
            commitRows({
              organizationId,
              assistantId,
              ...(page.head !== undefined ? { head: page.head } : {}),
              limit: page.limit,
              offset: page.offset
            })
          ),

    isAncestor: (organizationId, assistantId, ancestor, descendant) =>
      orDieOnSchema(ancestorRow({ organizationId, assistantId, ancestor, descendant })).pipe(
        Effect.catchTag("NoSuchElementError", Effect.die),
        Effect.map((row) => row.found)
      ),

    mergeBase: (organizationId, assistantId, a, b) =>
      orDieOnSchema(mergeBaseRow({ organizationId, assistantId, a, b })).pipe(
        Effect.map((row) => (Option.isSome(row) ? row.value.id : null))
      ),

    setPinning: (organizationId, assistantId, pinning) =>
      sql`UPDATE assistants SET session_pinning = ${pinning}, updated_at = statement_timestamp()
        WHERE organization_id = ${organizationId} AND id = ${assistantId}`.pipe(Effect.asVoid),

    findRollout: (organizationId, assistantId) =>
      orDieOnSchema(findRolloutRow({ organizationId, assistantId })).pipe(Effect.map(Option.getOrUndefined)),

    putRollout: (rollout) =>
      orDieOnSchema(putRolloutRow(rollout)).pipe(Effect.catchTag("NoSuchElementError", Effect.die)),

    deleteRollout: (organizationId, assistantId) =>
      sql`DELETE FROM assistant_rollouts WHERE organization_id = ${organizationId} AND assistant_id = ${assistantId}
        RETURNING id`.pipe(Effect.map((rows) => rows.length > 0)),

    findAssignment: (organizationId, sessionId, assistantId) =>
      orDieOnSchema(findAssignmentRow({ organizationId, sessionId, assistantId })).pipe(
        Effect.map(Option.getOrUndefined)
      ),

    insertAssignment: (organizationId, sessionId, assistantId, assignment) =>
      Effect.gen(function* () {
        const row = {
          organizationId,
          sessionId,
          assistantId,
          rolloutId: assignment.rollout_id,
          branchName: assignment.branch_name,
          commitId: assignment.commit_id
        }
        const inserted = yield* orDieOnSchema(insertAssignmentRow(row))
        if (Option.isSome(inserted)) return inserted.value
        // Another run of the session recorded first: read in a statement of its own, whose snapshot sees it.
        const existing = yield* orDieOnSchema(findAssignmentRow({ organizationId, sessionId, assistantId }))
        if (Option.isNone(existing)) return yield* Effect.die(new Error("an assignment neither inserted nor found"))
        return existing.value
      }),

    reassign: (organizationId, sessionId, assistantId, branchName) =>
      sql`UPDATE session_assignments SET branch_name = ${branchName}, rollout_id = NULL,
          updated_at = statement_timestamp()
        WHERE organization_id = ${organizationId} AND session_id = ${sessionId} AND assistant_id = ${assistantId}`.pipe(
        Effect.asVoid
      )
  }
}
