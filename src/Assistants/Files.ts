/**
 * The pure core of assistant version control: a snapshot is a set of files
 * (path -> content), each identified by its content hash (A5); snapshots are
 * assembled from files, compared file by file, merged three-way (A6) and
 * checked for referential validity (A10). No I/O here.
 */
import * as crypto from "node:crypto"
import canonicalize from "canonicalize"
import type {
  DiffEntry,
  Node,
  NodeInput,
  Snapshot,
  SnapshotInput,
  Tool,
  ToolInput,
  Variable
} from "../Domain/Assistant.ts"
import type { ValidationIssue } from "../Domain/Errors.ts"

/** A file's content and its hash. */
export interface FileVersion {
  readonly hash: string
  readonly content: unknown
}

/** A snapshot as files: path -> content and hash. Paths: `context`, `config`, `nodes/<id>`, `tools/<id>`, `variables/<name>` (A5). */
type Files = ReadonlyMap<string, FileVersion>

/** Path -> hash only (what commits and drafts store). */
export type FileHashes = ReadonlyMap<string, string>

/** Lowercase hex SHA-256 of the RFC 8785 canonical JSON of `content` (A5). */
export const contentHash = (content: unknown): string =>
  crypto
    .createHash("sha256")
    .update(canonicalize(content) ?? "null", "utf8")
    .digest("hex")

/** A file version of `content`. */
export const fileOf = (content: unknown): FileVersion => ({ hash: contentHash(content), content })

/** The file path of node `id` (A5). */
export const nodePath = (id: string) => `nodes/${id}`

/** The file path of tool `id` (A5). */
export const toolPath = (id: string) => `tools/${id}`

/** The file path of variable `name`: variables are identified by name (A5). */
export const variablePath = (name: string) => `variables/${name}`

/** A node as stored: description defaults to "", config to {} (spec "Node"). */
export const nodeContent = (input: NodeInput): Node => ({
  id: input.id,
  name: input.name,
  description: input.description ?? "",
  type: input.type,
  config: input.config ?? {},
  ...(input.position !== undefined ? { position: input.position } : {})
})

/** A tool as stored: `id` defaults to `name` (A5). */
export const toolContent = (input: ToolInput): Tool => ({ ...input, id: input.id ?? input.name })

/**
 * The files of a snapshot given at creation or migration (A2, A11): `context`
 * always, `config` when the graph has config members, one file per item.
 */
export const filesFromSnapshot = (snapshot: SnapshotInput | undefined): Map<string, FileVersion> => {
  const files = new Map<string, FileVersion>()
  files.set("context", fileOf(snapshot?.context ?? {}))
  const { nodes, ...config } = snapshot?.graph ?? {}
  if (Object.keys(config).length > 0) files.set("config", fileOf(config))
  for (const node of nodes ?? []) files.set(nodePath(node.id), fileOf(nodeContent(node)))
  for (const tool of snapshot?.tools ?? []) {
    const content = toolContent(tool)
    files.set(toolPath(content.id), fileOf(content))
  }
  for (const variable of snapshot?.variables ?? []) files.set(variablePath(variable.name), fileOf(variable))
  return files
}

const byPath = (a: readonly [string, unknown], b: readonly [string, unknown]) =>
  a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0

/**
 * Assembles the snapshot of `files` (spec "Snapshot"): `graph` carries the
 * config members and the nodes; arrays are ordered by path.
 */
export const snapshotOf = (files: ReadonlyMap<string, { readonly content: unknown }>): Snapshot => {
  const entries = [...files.entries()].sort(byPath)
  const config = (files.get("config")?.content ?? {}) as Record<string, unknown>
  const items = (prefix: string) => entries.filter(([path]) => path.startsWith(prefix)).map(([, file]) => file.content)
  return {
    context: (files.get("context")?.content ?? {}) as Record<string, unknown>,
    graph: {
      ...config,
      initial_node_id: (config.initial_node_id as string | null | undefined) ?? null,
      nodes: items("nodes/") as Array<Node>
    },
    tools: items("tools/") as Array<Tool>,
    variables: items("variables/") as Array<Variable>
  }
}

/** Whether two file sets have the same paths with the same hashes. */
export const sameFiles = (a: FileHashes, b: FileHashes): boolean => {
  if (a.size !== b.size) return false
  for (const [path, hash] of a) if (b.get(path) !== hash) return false
  return true
}

/** A member of a JSON object by its own keys only (`toString` is a key like any other, never the prototype's). */
const member = (object: Record<string, unknown>, key: string): unknown =>
  Object.hasOwn(object, key) ? object[key] : undefined

const shallowChanges = (before: unknown, after: unknown) => {
  // Entries, then an object of own members: a key `__proto__` must stay a member (a plain assignment would not).
  const changes: Array<[string, { old: unknown; new: unknown }]> = []
  const a = (before ?? {}) as Record<string, unknown>
  const b = (after ?? {}) as Record<string, unknown>
  for (const key of new Set([...Object.keys(a), ...Object.keys(b)])) {
    const [old, next] = [member(a, key) ?? null, member(b, key) ?? null]
    if (contentHash(old) !== contentHash(next) || Object.hasOwn(a, key) !== Object.hasOwn(b, key)) {
      changes.push([key, { old, new: next }])
    }
  }
  return Object.fromEntries(changes)
}

/**
 * File-by-file differences from `before` to `after` (spec "Diff entry"):
 * added, modified (with shallow `changes` of top-level members), removed;
 * ordered by path.
 */
export const diffFiles = (before: Files, after: Files): Array<DiffEntry> => {
  const paths = [...new Set([...before.keys(), ...after.keys()])].sort()
  const diffs: Array<DiffEntry> = []
  for (const path of paths) {
    const a = before.get(path)
    const b = after.get(path)
    if (a === undefined && b !== undefined) {
      diffs.push({ path, status: "added", old_content: null, new_content: b.content })
    } else if (a !== undefined && b === undefined) {
      diffs.push({ path, status: "removed", old_content: a.content, new_content: null })
    } else if (a !== undefined && b !== undefined && a.hash !== b.hash) {
      diffs.push({
        path,
        status: "modified",
        old_content: a.content,
        new_content: b.content,
        changes: shallowChanges(a.content, b.content)
      })
    }
  }
  return diffs
}

/** The outcome of a three-way merge (A6). */
export type MergeOutcome =
  | { readonly _tag: "Conflict"; readonly paths: ReadonlyArray<string> }
  | {
      readonly _tag: "Merged"
      /** Paths to set in the target (path -> hash), and paths to remove. */
      readonly set: ReadonlyMap<string, string>
      readonly remove: ReadonlyArray<string>
    }

/**
 * Three-way merge at path level (A6): a path changed from `base` in `source`
 * and in `target` to different results is a conflict; identical changes are
 * not. Otherwise the source's changes are applied to the target.
 */
export const mergeThreeWay = (base: FileHashes, source: FileHashes, target: FileHashes): MergeOutcome => {
  const conflicts: Array<string> = []
  const set = new Map<string, string>()
  const remove: Array<string> = []
  for (const path of new Set([...base.keys(), ...source.keys()])) {
    const inBase = base.get(path)
    const inSource = source.get(path)
    if (inBase === inSource) continue
    const inTarget = target.get(path)
    if (inTarget === inSource) continue
    if (inTarget !== inBase) {
      conflicts.push(path)
      continue
    }
    if (inSource === undefined) remove.push(path)
    else set.set(path, inSource)
  }
  if (conflicts.length > 0) return { _tag: "Conflict", paths: conflicts.sort() }
  return { _tag: "Merged", set, remove }
}

/**
 * A commit id (A5): the first 12 hex characters of a SHA-256 over the commit's
 * parents, files (sorted path/hash pairs), message, author and time.
 */
export const commitId = (commit: {
  readonly parent: string | null
  readonly mergeParent: string | null
  readonly files: FileHashes
  readonly message: string | null
  readonly authorType: string
  readonly authorId: string | null
  readonly createdAt: string
}): string =>
  contentHash({
    parent: commit.parent,
    merge_parent: commit.mergeParent,
    files: [...commit.files.entries()].sort(byPath),
    message: commit.message,
    author_type: commit.authorType,
    author_id: commit.authorId,
    created_at: commit.createdAt
  }).slice(0, 12)

/**
 * Where a reference problem is reported (A10), given the file that holds the
 * reference, the field in it, and the path of the missing item.
 */
export type Locate = (
  path: string,
  field: ReadonlyArray<string | number>,
  missing: string
) => ReadonlyArray<string | number>

/**
 * The referential problems of a draft (A10): `config.initial_node_id`, each
 * node's `config.next_node` and each llm node's `config.tools` must name items
 * of the draft. `locate` maps a referring file and field to a request `loc`.
 */
export const referenceIssues = (
  files: ReadonlyMap<string, { readonly content: unknown }>,
  locate: Locate
): Array<ValidationIssue> => {
  const issues: Array<ValidationIssue> = []
  const config = files.get("config")?.content as Record<string, unknown> | undefined
  const initial = config?.initial_node_id
  if (typeof initial === "string" && !files.has(nodePath(initial))) {
    issues.push({
      loc: locate("config", ["initial_node_id"], nodePath(initial)),
      msg: `initial_node_id names no node of the draft: ${initial}`,
      type: "reference_error"
    })
  }
  for (const [path, file] of files) {
    if (!path.startsWith("nodes/")) continue
    const node = file.content as Node
    const nodeConfig = (node.config ?? {}) as Record<string, unknown>
    const next = nodeConfig.next_node
    if (typeof next === "string" && !files.has(nodePath(next))) {
      issues.push({
        loc: locate(path, ["config", "next_node"], nodePath(next)),
        msg: `next_node names no node of the draft: ${next}`,
        type: "reference_error"
      })
    }
    if (node.type === "llm" && Array.isArray(nodeConfig.tools)) {
      nodeConfig.tools.forEach((tool, index) => {
        if (typeof tool === "string" && !files.has(toolPath(tool))) {
          issues.push({
            loc: locate(path, ["config", "tools", index], toolPath(tool)),
            msg: `tools names no tool of the draft: ${tool}`,
            type: "reference_error"
          })
        }
      })
    }
  }
  return issues
}

/** The paths of the files that refer to `path` (A10: DELETE of a referenced item). */
export const referrersOf = (files: ReadonlyMap<string, { readonly content: unknown }>, path: string): Array<string> => {
  const [kind, id] = [path.slice(0, path.indexOf("/")), path.slice(path.indexOf("/") + 1)]
  const referrers: Array<string> = []
  if (kind === "nodes") {
    const config = files.get("config")?.content as Record<string, unknown> | undefined
    if (config?.initial_node_id === id) referrers.push("config")
  }
  for (const [other, file] of files) {
    if (!other.startsWith("nodes/") || other === path) continue
    const node = file.content as Node
    const config = (node.config ?? {}) as Record<string, unknown>
    if (kind === "nodes" && config.next_node === id) referrers.push(other)
    if (kind === "tools" && node.type === "llm" && Array.isArray(config.tools) && config.tools.includes(id)) {
      referrers.push(other)
    }
  }
  return referrers.sort()
}
