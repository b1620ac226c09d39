/**
 * The errors of the erasures domain (DECISIONS.md D22), each a
 * `Schema.TaggedError` with its status and `*.Wire`, the `{detail}` body an
 * endpoint lists (`Domain/Errors.ts` says how). Imports only `effect` and
 * `Domain/`: a contract file.
 */
import { Schema } from "effect"
import { asDetail, detailDefault } from "../Domain/Errors.ts"

/** 404 `Contact not found`: no such contact in the organization, or one already erased (D22). */
export class ContactNotFound extends Schema.TaggedError<ContactNotFound>()(
  "ContactNotFound",
  { detail: detailDefault("Contact not found") },
  { httpApiStatus: 404 }
) {
  static readonly Wire = ContactNotFound.pipe(asDetail(Schema.Literal("Contact not found")))
}

/** 404 `Erasure not found`: unknown, or of another organization (D22). */
export class ErasureNotFound extends Schema.TaggedError<ErasureNotFound>()(
  "ErasureNotFound",
  { detail: detailDefault("Erasure not found") },
  { httpApiStatus: 404 }
) {
  static readonly Wire = ErasureNotFound.pipe(asDetail(Schema.Literal("Erasure not found")))
}
