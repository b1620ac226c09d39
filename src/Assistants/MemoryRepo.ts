/**
 * The assistants repository in memory (`AssistantsRepo.layerTest`): the same
 * answers as the SQL of `Repo.ts` over maps, so the services' rules (merge,
 * publish, rollback, references) can be tested without a database.
 *
 * Transactions are serialized by one semaphore and work on a copy of the
 * store that replaces it when they succeed: a failed transaction changes
 * nothing, and no reader sees a transaction's writes before it ends. A
 * statement outside a transaction is its own transaction (autocommit). The
 * row locks of `forUpdate` are implied by the semaphore. Contents are kept as
 * JSON text, so every read answers a copy, as `jsonb` does.
 */
import { Clock, Context, Effect, Ref, Semaphore } from "effect"
import type { Assistant, Branch, Commit, CommitFile, SessionPinning } from "../Domain/Assistant.ts"
import { isUuid } from "../Domain/Common.ts"
import type { FileVersion } from "./Files.ts"
import type {
  Assignment,
  AssistantRow,
  AssistantsRepo,
  CommitsPage,
  NewAssistant,
  NewBranch,
  NewCommit,
  RolloutRow
} from "./Repo.ts"

interface StoredAssistant extends Assistant {
  readonly description: string | null
  readonly legacy_snapshot: string | null
  readonly session_pinning: SessionPinning
}

/** A rollout as stored (migrations/0015_rollouts.ts). */
interface StoredRollout {
  readonly id: string
  readonly branch_id: string
  readonly percent: number
  readonly created_at: string
  readonly updated_at: string
}

interface StoredCommit extends Commit {
  readonly seq: number
}

/** The tables of migrations/0003_assistants.ts. */
interface Store {
  seq: number
  readonly assistants: Map<string, StoredAssistant>
  /** assistant id -> content hash -> content as JSON text. */
  readonly files: Map<string, Map<string, string>>
  readonly branches: Map<string, Branch>
  /** branch id -> path -> hash. */
  readonly drafts: Map<string, Map<string, string>>
  /** assistant id -> commit id -> commit. */
  readonly commits: Map<string, Map<string, StoredCommit>>
  /** assistant id -> commit id -> path -> hash. */
  readonly commitFiles: Map<string, Map<string, Map<string, string>>>
  /** assistant id -> its rollout. */
  readonly rollouts: Map<string, StoredRollout>
  /** `<session id>/<assistant id>` -> assignment. */
  readonly assignments: Map<string, Assignment>
}

const emptyStore = (): Store => ({
  seq: 0,
  assistants: new Map(),
  files: new Map(),
  branches: new Map(),
  drafts: new Map(),
  commits: new Map(),
  commitFiles: new Map(),
  rollouts: new Map(),
  assignments: new Map()
})

/** The store of the running transaction, with the repository it belongs to. */
const Transaction = Context.Reference<{ readonly owner: object; readonly store: Store } | undefined>(
  "parley/Assistants/MemoryRepo/Transaction",
  { defaultValue: () => undefined }
)

/** A timestamp as PostgreSQL answers it through `isoTimestamp` (microseconds). */
const timestamp = (millis: number) => new Date(millis).toISOString().replace("Z", "000Z")

const byPath = <A>(a: readonly [string, A], b: readonly [string, A]) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)

const getOrCreate = <K, V>(map: Map<K, V>, key: K, make: () => V): V => {
  const found = map.get(key)
  if (found !== undefined) return found
  const made = make()
  map.set(key, made)
  return made
}

/** Ids of `start` and every commit reachable from it over both parent links. */
const ancestry = (commits: ReadonlyMap<string, StoredCommit> | undefined, start: string): Set<string> => {
  const seen = new Set<string>([start])
  const queue = [start]
  while (queue.length > 0) {
    const commit = commits?.get(queue.pop()!)
    for (const parent of [commit?.parent_commit_id, commit?.merge_parent_commit_id]) {
      if (parent != null && !seen.has(parent)) {
        seen.add(parent)
        queue.push(parent)
      }
    }
  }
  return seen
}

/** The assistant's rollout with its branch's name and HEAD, as the SQL joins them. */
const rolloutRow = (store: Store, assistantId: string): RolloutRow | undefined => {
  const rollout = store.rollouts.get(assistantId)
  const branch = rollout === undefined ? undefined : store.branches.get(rollout.branch_id)
  if (rollout === undefined || branch === undefined) return undefined
  return { ...rollout, branch_name: branch.name, head_commit_id: branch.head_commit_id }
}

/** Builds an in-memory repository with an empty store. */
export const makeMemoryRepo: Effect.Effect<AssistantsRepo["Service"]> = Effect.gen(function* () {
  const owner = {}
  const committed = yield* Ref.make(emptyStore())
  const lock = yield* Semaphore.make(1)

  const withTransaction = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.gen(function* () {
      const outer = yield* Transaction
      if (outer?.owner === owner) {
        // A savepoint: the inner part's writes land in the outer store only if it succeeds.
        const store = structuredClone(outer.store)
        const result = yield* Effect.provideService(self, Transaction, { owner, store })
        Object.assign(outer.store, store)
        return result
      }
      return yield* lock.withPermits(1)(
        Effect.gen(function* () {
          const store = structuredClone(yield* Ref.get(committed))
          const result = yield* Effect.provideService(self, Transaction, { owner, store })
          yield* Ref.set(committed, store)
          return result
        })
      )
    })

  /** Reads the store of the running transaction, else the last committed one. */
  const read = <A>(f: (store: Store) => A): Effect.Effect<A> =>
    Effect.flatMap(Transaction, (tx) =>
      tx?.owner === owner ? Effect.sync(() => f(tx.store)) : Effect.map(Ref.get(committed), f)
    )

  /** Writes in the running transaction's store, else in a transaction of its own (autocommit). */
  const write = <A>(f: (store: Store, now: number) => A): Effect.Effect<A> =>
    Effect.flatMap(Transaction, (tx) =>
      tx?.owner === owner ? Effect.map(Clock.currentTimeMillis, (now) => f(tx.store, now)) : withTransaction(write(f))
    )

  const filesWithContent = (store: Store, assistantId: string, hashes: Iterable<readonly [string, string]>) => {
    const contents = store.files.get(assistantId)
    const files = new Map<string, FileVersion>()
    for (const [path, hash] of hashes) {
      const text = contents?.get(hash)
      if (text !== undefined) files.set(path, { hash, content: JSON.parse(text) })
    }
    return files
  }

  const commitHashesOf = (store: Store, assistantId: string, commitId: string | null) =>
    new Map(commitId === null ? [] : (store.commitFiles.get(assistantId)?.get(commitId) ?? []))

  const repo: AssistantsRepo["Service"] = {
    withTransaction,

    insertAssistant: (row: NewAssistant) =>
      write((store, now) => {
        const assistant: StoredAssistant = {
          id: row.id,
          organization_id: row.organizationId,
          name: row.name,
          versioned: row.versioned,
          created_at: timestamp(now),
          description: row.description,
          legacy_snapshot: row.legacySnapshot === undefined ? null : JSON.stringify(row.legacySnapshot),
          session_pinning: "none"
        }
        store.assistants.set(row.id, assistant)
        return {
          id: assistant.id,
          organization_id: assistant.organization_id,
          name: assistant.name,
          versioned: assistant.versioned,
          created_at: assistant.created_at
        }
      }),

    findAssistant: (organizationId, assistantId) =>
      read((store): AssistantRow | undefined => {
        const assistant = isUuid(assistantId) ? store.assistants.get(assistantId) : undefined
        if (assistant === undefined || assistant.organization_id !== organizationId) return undefined
        return {
          id: assistant.id,
          versioned: assistant.versioned,
          legacy_snapshot: assistant.legacy_snapshot === null ? null : JSON.parse(assistant.legacy_snapshot),
          session_pinning: assistant.session_pinning
        }
      }),

    markVersioned: (assistantId) =>
      write((store) => {
        const assistant = store.assistants.get(assistantId)
        if (assistant !== undefined) store.assistants.set(assistantId, { ...assistant, versioned: true })
      }),

    insertFiles: (assistantId, files) =>
      write((store) => {
        const contents = getOrCreate(store.files, assistantId, () => new Map<string, string>())
        for (const file of files) if (!contents.has(file.hash)) contents.set(file.hash, JSON.stringify(file.content))
      }),

    insertBranch: (row: NewBranch) =>
      write((store, now) => {
        for (const branch of store.branches.values()) {
          if (branch.assistant_id === row.assistantId && branch.name === row.name) return undefined
        }
        const branch: Branch = {
          id: row.id,
          assistant_id: row.assistantId,
          name: row.name,
          head_commit_id: row.head,
          created_at: timestamp(now),
          updated_at: timestamp(now)
        }
        store.branches.set(row.id, branch)
        store.drafts.set(row.id, new Map())
        return branch
      }),

    findBranch: (assistantId, name) =>
      read((store) =>
        [...store.branches.values()].find((branch) => branch.assistant_id === assistantId && branch.name === name)
      ),

    listBranches: (assistantId) =>
      read((store) =>
        [...store.branches.values()]
          .filter((branch) => branch.assistant_id === assistantId)
          .sort((a, b) =>
            a.created_at !== b.created_at ? (a.created_at < b.created_at ? -1 : 1) : a.name < b.name ? -1 : 1
          )
      ),

    deleteBranch: (branchId) =>
      write((store) => {
        store.branches.delete(branchId)
        store.drafts.delete(branchId)
        // ON DELETE CASCADE: the branch's rollout ends (A12).
        for (const [assistantId, rollout] of store.rollouts) {
          if (rollout.branch_id === branchId) store.rollouts.delete(assistantId)
        }
      }),

    setHead: (branchId, head) =>
      write((store, now) => {
        const branch = store.branches.get(branchId)
        if (branch !== undefined) {
          store.branches.set(branchId, { ...branch, head_commit_id: head, updated_at: timestamp(now) })
        }
      }),

    touchBranch: (branchId) =>
      write((store, now) => {
        const branch = store.branches.get(branchId)
        if (branch !== undefined) store.branches.set(branchId, { ...branch, updated_at: timestamp(now) })
      }),

    draftHashes: (branchId) => read((store) => new Map(store.drafts.get(branchId) ?? [])),

    draftFiles: (assistantId, branchId, prefix = "") =>
      read((store) =>
        filesWithContent(
          store,
          assistantId,
          [...(store.drafts.get(branchId) ?? [])].filter(([path]) => path.startsWith(prefix))
        )
      ),

    writeDraft: (branchId, set, remove) =>
      write((store) => {
        const draft = getOrCreate(store.drafts, branchId, () => new Map<string, string>())
        for (const path of remove) draft.delete(path)
        for (const [path, hash] of set) draft.set(path, hash)
      }),

    resetDraft: (assistantId, branchId, commitId) =>
      write((store) => {
        store.drafts.set(branchId, commitHashesOf(store, assistantId, commitId))
      }),

    copyDraft: (fromBranchId, toBranchId) =>
      write((store) => {
        const draft = getOrCreate(store.drafts, toBranchId, () => new Map<string, string>())
        for (const [path, hash] of store.drafts.get(fromBranchId) ?? []) draft.set(path, hash)
      }),

    commitHashes: (assistantId, commitId) => read((store) => commitHashesOf(store, assistantId, commitId)),

    commitFiles: (assistantId, commitId) =>
      read((store) => filesWithContent(store, assistantId, commitHashesOf(store, assistantId, commitId))),

    contents: (assistantId, hashes) =>
      read((store) => {
        const contents = store.files.get(assistantId)
        const found = new Map<string, unknown>()
        for (const hash of hashes) {
          const text = contents?.get(hash)
          if (text !== undefined) found.set(hash, JSON.parse(text))
        }
        return found
      }),

    insertCommit: (row: NewCommit) =>
      write((store) => {
        const commits = getOrCreate(store.commits, row.assistantId, () => new Map<string, StoredCommit>())
        // The same id is the same commit (A5), as in the SQL repository.
        const existing = commits.get(row.id)
        if (existing !== undefined) {
          const { seq: _, ...wire } = existing
          return wire
        }
        const commit: StoredCommit = {
          id: row.id,
          assistant_id: row.assistantId,
          parent_commit_id: row.parent,
          merge_parent_commit_id: row.mergeParent,
          message: row.message,
          author_type: row.authorType,
          author_id: row.authorId,
          created_at: timestamp(row.createdAt.getTime()),
          seq: ++store.seq
        }
        commits.set(row.id, commit)
        getOrCreate(store.commitFiles, row.assistantId, () => new Map()).set(
          row.id,
          new Map(store.drafts.get(row.branchId) ?? [])
        )
        const { seq: _, ...wire } = commit
        return wire
      }),

    findCommit: (assistantId, commitId) =>
      read((store) => {
        const commit = store.commits.get(assistantId)?.get(commitId)
        if (commit === undefined) return undefined
        const { seq: _, ...wire } = commit
        return wire
      }),

    listCommitFiles: (assistantId, commitId) =>
      read((store) =>
        [...commitHashesOf(store, assistantId, commitId)]
          .sort(byPath)
          .map(
            ([path, hash]): CommitFile => ({ id: `${commitId}:${path}`, commit_id: commitId, path, content_hash: hash })
          )
      ),

    listCommits: (assistantId, page: CommitsPage) =>
      read((store) => {
        if (page.head === null) return []
        const commits = store.commits.get(assistantId)
        const reachable = page.head === undefined ? undefined : ancestry(commits, page.head)
        return [...(commits?.values() ?? [])]
          .filter((commit) => reachable === undefined || reachable.has(commit.id))
          .sort((a, b) => b.seq - a.seq)
          .slice(page.offset, page.offset + page.limit)
          .map(({ seq: _, ...wire }) => wire)
      }),

    isAncestor: (assistantId, ancestor, descendant) =>
      read((store) => ancestry(store.commits.get(assistantId), descendant).has(ancestor)),

    mergeBase: (assistantId, a, b) =>
      read((store) => {
        const commits = store.commits.get(assistantId)
        const fromB = ancestry(commits, b)
        let base: StoredCommit | undefined
        for (const id of ancestry(commits, a)) {
          const commit = commits?.get(id)
          if (commit !== undefined && fromB.has(id) && (base === undefined || commit.seq > base.seq)) base = commit
        }
        return base?.id ?? null
      }),

    setPinning: (assistantId, pinning) =>
      write((store) => {
        const assistant = store.assistants.get(assistantId)
        if (assistant !== undefined) store.assistants.set(assistantId, { ...assistant, session_pinning: pinning })
      }),

    findRollout: (assistantId) => read((store) => rolloutRow(store, assistantId)),

    putRollout: (rollout) =>
      write((store, now) => {
        const current = store.rollouts.get(rollout.assistantId)
        const same = current !== undefined && current.branch_id === rollout.branchId
        store.rollouts.set(rollout.assistantId, {
          id: same ? current.id : rollout.id,
          branch_id: rollout.branchId,
          percent: rollout.percent,
          created_at: same ? current.created_at : timestamp(now),
          updated_at: timestamp(now)
        })
        return rolloutRow(store, rollout.assistantId)!
      }),

    deleteRollout: (assistantId) => write((store) => store.rollouts.delete(assistantId)),

    findAssignment: (sessionId, assistantId) => read((store) => store.assignments.get(`${sessionId}/${assistantId}`)),

    insertAssignment: (sessionId, assistantId, assignment) =>
      write((store) => getOrCreate(store.assignments, `${sessionId}/${assistantId}`, () => ({ ...assignment }))),

    reassign: (sessionId, assistantId, branchName) =>
      write((store) => {
        const key = `${sessionId}/${assistantId}`
        const assignment = store.assignments.get(key)
        if (assignment !== undefined) {
          store.assignments.set(key, { ...assignment, rollout_id: null, branch_name: branchName })
        }
      })
  }
  return repo
})
