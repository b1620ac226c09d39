/**
 * Assistants under version control (assistants.md; DECISIONS.md A1-A14):
 * the items of a snapshot (nodes, tools, variables, config, context), the
 * snapshot, branches, commits, commit files and diff entries; rollouts,
 * runtime settings and run statistics (A12-A14).
 */
import { Schema } from "effect"
import { JsonObject, JsonObjectInput, JsonValueInput, Timestamp } from "./Common.ts"
import { isShallowJson } from "./Limits.ts"

/** An item id (node id, tool id, variable name): 1-255 characters without `/` (its file path is `<kind>/<id>`). */
export const ItemId = Schema.String.pipe(
  Schema.check(
    Schema.isBetweenLength(1, 255),
    Schema.makeFilter<string>((id) => !id.includes("/") || "Must not contain '/'", { expected: "an id without '/'" })
  )
)

/** An item collection of a draft, the first segment of its items' file paths (A5, A9). */
export const ItemKind = Schema.Literals(["nodes", "tools", "variables"])
export type ItemKind = typeof ItemKind.Type

/** How responses name one item of each kind (`Node not found`, A9). */
export const itemKindNames: Record<ItemKind, string> = { nodes: "Node", tools: "Tool", variables: "Variable" }

/** A file of a draft that is one object rather than a collection (A9). */
export type SingletonKind = "config" | "context"

/**
 * A file path of a draft or commit (A5): `context`, `config`, `nodes/<node_id>`,
 * `tools/<tool_id>` or `variables/<name>`, the id being an {@link ItemId}.
 */
export const FilePath = Schema.String.pipe(
  Schema.check(
    Schema.isPattern(/^(?:context|config|(?:nodes|tools|variables)\/[^/]{1,255})$/, {
      message: "Must be context, config, nodes/<node_id>, tools/<tool_id> or variables/<name>"
    })
  )
)

/** Node types (spec "Node"). */
export const NodeType = Schema.Literals(["llm", "classifier", "router", "logic", "skill"])

/** `{x, y}` position in the visual editor (finite numbers). */
export const Position = Schema.Struct({ x: Schema.Finite, y: Schema.Finite })

/** A node as sent in a changeset upsert or a PUT (spec "Node"); `description` defaults to "". */
export const NodeInput = Schema.Struct({
  id: ItemId,
  name: Schema.String,
  description: Schema.optionalKey(Schema.String),
  type: NodeType,
  config: Schema.optionalKey(JsonObjectInput),
  position: Schema.optionalKey(Schema.NullOr(Position))
})
export type NodeInput = typeof NodeInput.Type

/** A node as stored and returned: `{id, name, description, type, config, position?}`. */
export const Node = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  description: Schema.String,
  type: NodeType,
  config: JsonObject,
  position: Schema.optionalKey(Schema.NullOr(Position))
}).annotate({ identifier: "Node" })
export type Node = typeof Node.Type

/** `{url, method}` of a tool's external API, and further members. */
const ToolRequest = Schema.StructWithRest(
  Schema.Struct({
    url: Schema.String,
    method: Schema.Literals(["GET", "POST", "PUT", "PATCH", "DELETE"])
  }),
  [Schema.Record(Schema.String, Schema.Unknown)]
)

/**
 * A tool as every write leaves it (spec "Tool"): a PUT's body, a PATCH's merged
 * result, a changeset's upsert, a snapshot's tool at creation. `id` defaults
 * to `name` (A5), so `name` is an {@link ItemId} too. Without the depth limit
 * of {@link ToolInput}, which applies to what a request sends (D18): a tool
 * stored deeper before that limit stays editable.
 */
export const ToolWrite = Schema.Struct({
  id: Schema.optionalKey(ItemId),
  name: ItemId,
  description: Schema.String,
  request: ToolRequest,
  parameters: Schema.optionalKey(JsonObject),
  should_close: Schema.optionalKey(Schema.Boolean)
})

/** A tool as sent (spec "Tool"): {@link ToolWrite} with `request` and `parameters` nested at most 32 levels (D18). */
export const ToolInput = Schema.Struct({
  ...ToolWrite.fields,
  request: ToolRequest.pipe(Schema.check(isShallowJson())),
  parameters: Schema.optionalKey(JsonObjectInput)
})
export type ToolInput = typeof ToolInput.Type

/** A tool as stored and returned, with its `id`. */
export const Tool = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  description: Schema.String,
  request: ToolRequest,
  parameters: Schema.optionalKey(JsonObject),
  should_close: Schema.optionalKey(Schema.Boolean)
}).annotate({ identifier: "Tool" })
export type Tool = typeof Tool.Type

/** A variable (spec "Variable"), identified by `name` (A5), as stored and returned. */
export const Variable = Schema.Struct({
  name: ItemId,
  permission: Schema.Literals(["read_only", "read_write"]),
  type: Schema.String,
  default_value: Schema.optionalKey(Schema.Unknown)
}).annotate({ identifier: "Variable" })
export type Variable = typeof Variable.Type

/** A variable as sent: `default_value` nests at most 32 levels (D18). */
export const VariableInput = Schema.Struct({
  ...Variable.fields,
  default_value: Schema.optionalKey(JsonValueInput)
})

/** Config (spec "Config and context"): `initial_node_id` and further members. */
export const Config = Schema.StructWithRest(
  Schema.Struct({ initial_node_id: Schema.optionalKey(Schema.NullOr(Schema.String)) }),
  [Schema.Record(Schema.String, Schema.Unknown)]
).annotate({ identifier: "Config" })
export type Config = typeof Config.Type

/** Config as sent (PUT): nested at most 32 levels (D18). */
export const ConfigInput = Config.pipe(Schema.check(isShallowJson()))

/** Context (spec "Config and context"): `assistant_name`, `assistant_description` and further members. */
export const Context = Schema.StructWithRest(
  Schema.Struct({
    assistant_name: Schema.optionalKey(Schema.NullOr(Schema.String)),
    assistant_description: Schema.optionalKey(Schema.NullOr(Schema.String))
  }),
  [Schema.Record(Schema.String, Schema.Unknown)]
).annotate({ identifier: "Context" })
export type Context = typeof Context.Type

/** Context as sent (PUT): nested at most 32 levels (D18). */
export const ContextInput = Context.pipe(Schema.check(isShallowJson()))

/**
 * A snapshot assembled from files (spec "Snapshot"): `graph` holds the config
 * members (`initial_node_id`, ...) and the nodes; arrays are ordered by id.
 */
export const Snapshot = Schema.Struct({
  context: JsonObject,
  graph: Schema.StructWithRest(
    Schema.Struct({ initial_node_id: Schema.NullOr(Schema.String), nodes: Schema.Array(Node) }),
    [Schema.Record(Schema.String, Schema.Unknown)]
  ),
  tools: Schema.Array(Tool),
  variables: Schema.Array(Variable)
}).annotate({ identifier: "Snapshot" })
export type Snapshot = typeof Snapshot.Type

/**
 * A snapshot as sent at creation (O6, A2, A11): every member optional, items as
 * inputs, `context` checked by {@link ContextInput} and the config members of
 * `graph` by {@link Config}, as their own PUTs check them (issue 37 item 3);
 * nested at most 32 levels as a whole (D18).
 */
export const SnapshotInput = Schema.Struct({
  context: Schema.optionalKey(ContextInput),
  graph: Schema.optionalKey(
    Schema.StructWithRest(
      Schema.Struct({ ...Config.schema.fields, nodes: Schema.optionalKey(Schema.Array(NodeInput)) }),
      Config.records
    )
  ),
  tools: Schema.optionalKey(Schema.Array(ToolInput)),
  variables: Schema.optionalKey(Schema.Array(VariableInput))
}).pipe(Schema.check(isShallowJson()))
export type SnapshotInput = typeof SnapshotInput.Type

/** A branch (spec "Branch"). */
export const Branch = Schema.Struct({
  id: Schema.String,
  assistant_id: Schema.String,
  name: Schema.String,
  head_commit_id: Schema.NullOr(Schema.String),
  created_at: Timestamp,
  updated_at: Timestamp
}).annotate({ identifier: "Branch" })
export type Branch = typeof Branch.Type

/** A commit (spec "Commit"): 12 hex characters id (A5), parent and merge parent. */
export const Commit = Schema.Struct({
  id: Schema.String,
  assistant_id: Schema.String,
  parent_commit_id: Schema.NullOr(Schema.String),
  merge_parent_commit_id: Schema.NullOr(Schema.String),
  message: Schema.NullOr(Schema.String),
  author_type: Schema.Literals(["human", "agent", "system"]),
  author_id: Schema.NullOr(Schema.String),
  created_at: Timestamp
}).annotate({ identifier: "Commit" })
export type Commit = typeof Commit.Type

/** A commit file (spec "Files"): `id` is `<commit_id>:<path>`. */
export const CommitFile = Schema.Struct({
  id: Schema.String,
  commit_id: Schema.String,
  path: Schema.String,
  content_hash: Schema.String
}).annotate({ identifier: "CommitFile" })
export type CommitFile = typeof CommitFile.Type

/** A diff entry (spec "Diff entry"); `changes` only for `modified`. */
export const DiffEntry = Schema.Struct({
  path: Schema.String,
  status: Schema.Literals(["added", "modified", "removed"]),
  old_content: Schema.NullOr(Schema.Unknown),
  new_content: Schema.NullOr(Schema.Unknown),
  changes: Schema.optionalKey(Schema.Record(Schema.String, Schema.Struct({ old: Schema.Unknown, new: Schema.Unknown })))
}).annotate({ identifier: "DiffEntry" })
export type DiffEntry = typeof DiffEntry.Type

/**
 * An assistant as the admin and assistants APIs return it (O6; issue 39 item 6
 * adds `description` and `updated_at`, which PATCH changes).
 */
export const Assistant = Schema.Struct({
  id: Schema.String.annotate({ description: "The assistant's id." }),
  organization_id: Schema.String.annotate({ description: "The organization it belongs to." }),
  name: Schema.String.annotate({ description: "Its name." }),
  description: Schema.NullOr(Schema.String).annotate({ description: "Its description; null: none." }),
  versioned: Schema.Boolean.annotate({
    description: "Whether it is under version control (A2); false: a legacy assistant (A11)."
  }),
  created_at: Timestamp.annotate({ description: "When it was created (ISO 8601, UTC)." }),
  updated_at: Schema.NullOr(Timestamp).annotate({
    description: "When its name, description or versioning last changed (ISO 8601, UTC); null: never."
  })
}).annotate({ identifier: "Assistant" })
export type Assistant = typeof Assistant.Type

/**
 * Session pinning (A13): `none` (default), every run reads the HEAD of its
 * session's branch; `session`, every run of a session reads the commit of its
 * first run.
 */
export const SessionPinning = Schema.Literals(["none", "session"]).annotate({ identifier: "SessionPinning" })
export type SessionPinning = typeof SessionPinning.Type

/** The runtime settings of an assistant (A13): GET and PUT `/assistants/{id}/runtime-settings`. */
export const RuntimeSettings = Schema.Struct({ session_pinning: SessionPinning }).annotate({
  identifier: "RuntimeSettings"
})
export type RuntimeSettings = typeof RuntimeSettings.Type

/**
 * An assistant's rollout (A12): `branch_name` goes to `percent` (0-100) of the
 * sessions whose first run comes while it is set; `head_commit_id` is that
 * branch's HEAD now; `created_at` is when this rollout started (a PUT of the
 * same branch changes `percent` and `updated_at` only).
 */
export const Rollout = Schema.Struct({
  assistant_id: Schema.String,
  branch_name: Schema.String,
  percent: Schema.Int,
  head_commit_id: Schema.NullOr(Schema.String),
  created_at: Timestamp,
  updated_at: Timestamp
}).annotate({ identifier: "Rollout" })
export type Rollout = typeof Rollout.Type

/**
 * The runs of one commit read through one branch over a time range (A14):
 * how many, how they ended, their duration's p50 and p95 in ms (values some
 * run recorded: the nearest rank), and their tokens summed.
 */
export const CommitRunStats = Schema.Struct({
  commit_id: Schema.String,
  /** The branch the runs read; null for runs recorded before runs kept their branch. */
  branch_name: Schema.NullOr(Schema.String),
  runs: Schema.Int,
  succeeded: Schema.Int,
  failed: Schema.Int,
  duration_ms: Schema.Struct({ p50: Schema.Int, p95: Schema.Int }),
  input_tokens: Schema.Int,
  output_tokens: Schema.Int
}).annotate({ identifier: "CommitRunStats" })
export type CommitRunStats = typeof CommitRunStats.Type

/** Run statistics (A14): one entry per commit and branch, newest commit first. */
export const RunStats = Schema.Struct({ commits: Schema.Array(CommitRunStats) }).annotate({ identifier: "RunStats" })
export type RunStats = typeof RunStats.Type
