/**
 * The failures of the assistants API (assistants.md; DECISIONS.md A1-A12), one
 * `Schema.TaggedError` per case, with the data of the case and its status.
 *
 * On the wire every one is `{"detail": "<text>"}` exactly as before (no `_tag`,
 * no data members): `detail` is computed from the data, and `*.Wire` is the
 * schema an endpoint lists in its `error`. Each wire schema pins its text (a
 * literal, or a template for `MergeConflict`), so the OpenAPI document shows the
 * text and a typed client (`HttpApiClient`) decodes a 404 `Branch not found`
 * into a `BranchNotFound`, not into another 404 of the same endpoint.
 *
 * Decoding from the wire recovers what the text carries (the paths of a merge
 * conflict, the kind of a missing item); the other data members are not sent
 * and decode as `""` (the client knows the branch or commit it named).
 */
import { Schema, SchemaTransformation } from "effect"
import { ItemKind, itemKindNames } from "../Domain/Assistant.ts"

/**
 * The wire form `{detail}` of an error class whose instances have a `detail`
 * text: `text` is the schema of the text, `decode` rebuilds the error from it.
 */
const detailWire = <S extends Schema.Top & { readonly Type: { readonly detail: string } }>(
  self: S,
  text: Schema.Codec<string>,
  decode: (detail: string) => S["Type"]
) =>
  Schema.Struct({ detail: text }).pipe(
    Schema.decodeTo(
      Schema.toType(self),
      SchemaTransformation.transform({
        decode: (encoded: { readonly detail: string }) => decode(encoded.detail),
        encode: (error: S["Type"]) => ({ detail: error.detail })
      })
    )
  )

/** The wire form of an error whose text never changes: the text of `sample`. */
const fixedWire = <S extends Schema.Top & { readonly Type: { readonly detail: string } }>(
  self: S,
  sample: () => S["Type"]
) => detailWire(self, Schema.Literal(sample().detail), sample)

/** 404 `Assistant not found`: unknown, or of another organization (A1). */
export class AssistantNotFound extends Schema.TaggedError<AssistantNotFound>()(
  "AssistantNotFound",
  {},
  { httpApiStatus: 404 }
) {
  get detail(): string {
    return "Assistant not found"
  }
  override get message(): string {
    return this.detail
  }
  static readonly Wire = fixedWire(AssistantNotFound, () => new AssistantNotFound())
}

/** 409 `Assistant is not versioned`: a legacy assistant on a version operation (A1). */
export class AssistantNotVersioned extends Schema.TaggedError<AssistantNotVersioned>()(
  "AssistantNotVersioned",
  {},
  { httpApiStatus: 409 }
) {
  get detail(): string {
    return "Assistant is not versioned"
  }
  override get message(): string {
    return this.detail
  }
  static readonly Wire = fixedWire(AssistantNotVersioned, () => new AssistantNotVersioned())
}

/**
 * 409 `Assistant is in use by an agent`: DELETE of an assistant an AI agent of
 * the organization answers from (issue 39 item 6, docs/behaviour.md); delete
 * the agent or point it at another assistant first.
 */
export class AssistantInUse extends Schema.TaggedError<AssistantInUse>()("AssistantInUse", {}, { httpApiStatus: 409 }) {
  get detail(): string {
    return "Assistant is in use by an agent"
  }
  override get message(): string {
    return this.detail
  }
  static readonly Wire = fixedWire(AssistantInUse, () => new AssistantInUse())
}

/** 409 `Assistant is already versioned`: a second migrate (A11). */
export class AssistantAlreadyVersioned extends Schema.TaggedError<AssistantAlreadyVersioned>()(
  "AssistantAlreadyVersioned",
  {},
  { httpApiStatus: 409 }
) {
  get detail(): string {
    return "Assistant is already versioned"
  }
  override get message(): string {
    return this.detail
  }
  static readonly Wire = fixedWire(AssistantAlreadyVersioned, () => new AssistantAlreadyVersioned())
}

/** 404 `Assistant has no published version`: the runtime of an assistant whose `main` has no HEAD (A2). */
export class NoPublishedVersion extends Schema.TaggedError<NoPublishedVersion>()(
  "NoPublishedVersion",
  {},
  { httpApiStatus: 404 }
) {
  get detail(): string {
    return "Assistant has no published version"
  }
  override get message(): string {
    return this.detail
  }
  static readonly Wire = fixedWire(NoPublishedVersion, () => new NoPublishedVersion())
}

/** 404 `Branch not found`: no branch `branch_name` on the assistant (A1). */
export class BranchNotFound extends Schema.TaggedError<BranchNotFound>()(
  "BranchNotFound",
  { branch_name: Schema.String },
  { httpApiStatus: 404 }
) {
  get detail(): string {
    return "Branch not found"
  }
  override get message(): string {
    return `${this.detail}: ${this.branch_name}`
  }
  static readonly Wire = fixedWire(BranchNotFound, () => new BranchNotFound({ branch_name: "" }))
}

/** 409 `Branch already exists`: creating or forking onto a name in use (A3). */
export class BranchAlreadyExists extends Schema.TaggedError<BranchAlreadyExists>()(
  "BranchAlreadyExists",
  { branch_name: Schema.String },
  { httpApiStatus: 409 }
) {
  get detail(): string {
    return "Branch already exists"
  }
  override get message(): string {
    return `${this.detail}: ${this.branch_name}`
  }
  static readonly Wire = fixedWire(BranchAlreadyExists, () => new BranchAlreadyExists({ branch_name: "" }))
}

/** 400 `The main branch cannot be deleted` (A3). */
export class MainBranchUndeletable extends Schema.TaggedError<MainBranchUndeletable>()(
  "MainBranchUndeletable",
  {},
  { httpApiStatus: 400 }
) {
  get detail(): string {
    return "The main branch cannot be deleted"
  }
  override get message(): string {
    return this.detail
  }
  static readonly Wire = fixedWire(MainBranchUndeletable, () => new MainBranchUndeletable())
}

/** 404 `Commit not found`: no commit `commit_id` on the assistant (A1). */
export class CommitNotFound extends Schema.TaggedError<CommitNotFound>()(
  "CommitNotFound",
  { commit_id: Schema.String },
  { httpApiStatus: 404 }
) {
  get detail(): string {
    return "Commit not found"
  }
  override get message(): string {
    return `${this.detail}: ${this.commit_id}`
  }
  static readonly Wire = fixedWire(CommitNotFound, () => new CommitNotFound({ commit_id: "" }))
}

/** 400 `Commit is not in the history of this branch`: a rollback to a commit that is not an ancestor of HEAD (A7). */
export class CommitNotInHistory extends Schema.TaggedError<CommitNotInHistory>()(
  "CommitNotInHistory",
  { commit_id: Schema.String },
  { httpApiStatus: 400 }
) {
  get detail(): string {
    return "Commit is not in the history of this branch"
  }
  override get message(): string {
    return `${this.detail}: ${this.commit_id}`
  }
  static readonly Wire = fixedWire(CommitNotInHistory, () => new CommitNotInHistory({ commit_id: "" }))
}

/** 400 `No changes to publish`: the draft equals HEAD (A4). */
export class NothingToPublish extends Schema.TaggedError<NothingToPublish>()(
  "NothingToPublish",
  {},
  { httpApiStatus: 400 }
) {
  get detail(): string {
    return "No changes to publish"
  }
  override get message(): string {
    return this.detail
  }
  static readonly Wire = fixedWire(NothingToPublish, () => new NothingToPublish())
}

const MERGE_CONFLICT = "Merge conflict on paths: "

/** 409 `Merge conflict on paths: <a>, <b>`: `paths` changed on both sides to different contents, sorted (A6). */
export class MergeConflict extends Schema.TaggedError<MergeConflict>()(
  "MergeConflict",
  { paths: Schema.Array(Schema.String) },
  { httpApiStatus: 409 }
) {
  get detail(): string {
    return `${MERGE_CONFLICT}${this.paths.join(", ")}`
  }
  override get message(): string {
    return this.detail
  }
  static readonly Wire = detailWire(
    MergeConflict,
    Schema.TemplateLiteral([MERGE_CONFLICT, Schema.String]),
    (detail) => new MergeConflict({ paths: detail.slice(MERGE_CONFLICT.length).split(", ") })
  )
}

/** 404 `Node not found`, `Tool not found` or `Variable not found`: no item `id` of `kind` in the draft (A9). */
export class ItemNotFound extends Schema.TaggedError<ItemNotFound>()(
  "ItemNotFound",
  { kind: ItemKind, id: Schema.String },
  { httpApiStatus: 404 }
) {
  get detail(): string {
    return `${itemKindNames[this.kind]} not found`
  }
  override get message(): string {
    return `${this.detail}: ${this.id}`
  }
  static readonly Wire = detailWire(
    ItemNotFound,
    Schema.Literals(ItemKind.literals.map((kind) => `${itemKindNames[kind]} not found`)),
    (detail) =>
      new ItemNotFound({
        kind: ItemKind.literals.find((kind) => detail === `${itemKindNames[kind]} not found`) ?? "nodes",
        id: ""
      })
  )
}

/** 400 `Branch has no published version`: a rollout of a branch whose HEAD is null (A12). */
export class BranchNotPublished extends Schema.TaggedError<BranchNotPublished>()(
  "BranchNotPublished",
  { branch_name: Schema.String },
  { httpApiStatus: 400 }
) {
  get detail(): string {
    return "Branch has no published version"
  }
  override get message(): string {
    return `${this.detail}: ${this.branch_name}`
  }
  static readonly Wire = fixedWire(BranchNotPublished, () => new BranchNotPublished({ branch_name: "" }))
}

/** 404 `No rollout`: the assistant has no rollout to read or end (A12). */
export class NoRollout extends Schema.TaggedError<NoRollout>()("NoRollout", {}, { httpApiStatus: 404 }) {
  get detail(): string {
    return "No rollout"
  }
  override get message(): string {
    return this.detail
  }
  static readonly Wire = fixedWire(NoRollout, () => new NoRollout())
}
