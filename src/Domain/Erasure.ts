/**
 * The erasure of a contact (DECISIONS.md D22, GDPR art. 17): the resource
 * `DELETE /contacts/{contact_id}` answers and `GET /erasures/{id}` shows, and
 * the `data.object` of the `contact.erased` event (W1).
 */
import { Schema } from "effect"
import { Timestamp, Uuid } from "./Common.ts"

/** The kinds of rows an erasure deletes, in the order of `counts` (D22). */
export const erasureKinds = [
  "contacts",
  "conversations",
  "sessions",
  "messages",
  "runs",
  "schedules",
  "reply_jobs",
  "assignments",
  "ingest_receipts",
  "events",
  "deliveries"
] as const

/** A kind of row an erasure deletes. */
export type ErasureKind = (typeof erasureKinds)[number]

const kindDescriptions: { readonly [K in ErasureKind]: string } = {
  contacts: "The contact itself (1).",
  conversations: "The contact's conversations, one per channel (D8).",
  sessions: "Its sessions, open ones included.",
  messages: "The messages of those sessions.",
  runs: "The AI runs of those sessions (R2).",
  schedules: "The schedules of those sessions (D15).",
  reply_jobs: "Their reply jobs not yet run (R1).",
  assignments: "Their assistant assignments of rollouts (A12).",
  ingest_receipts: "The ingest receipts of the conversations (D10).",
  events: "The events that carried the contact's data (W1).",
  deliveries: "Those events' webhook deliveries, with their attempt logs, pending ones included (never sent)."
}

/** Rows deleted per kind (D22): integers, at least 0. */
export const ErasureCounts = Schema.Struct(
  Object.fromEntries(
    erasureKinds.map((kind) => [kind, Schema.Int.annotate({ description: kindDescriptions[kind] })])
  ) as { readonly [K in ErasureKind]: Schema.Int }
).annotate({ identifier: "ErasureCounts", description: "Rows deleted per kind (D22)." })
export type ErasureCounts = typeof ErasureCounts.Type

/** An erasure's status: `pending` until everything of the contact is deleted, then `completed` (D22). */
export const ErasureStatus = Schema.Literals(["pending", "completed"])
export type ErasureStatus = typeof ErasureStatus.Type

/**
 * An erasure (D22): `requested_at` and `completed_at` ISO 8601 UTC with
 * microseconds; `completed_at` and `counts` null while `pending`.
 */
export const Erasure = Schema.Struct({
  id: Uuid.annotate({ description: "The erasure's id." }),
  contact_id: Schema.String.annotate({ description: "Your id of the erased contact (D8)." }),
  status: ErasureStatus.annotate({
    description: "`pending` until everything of the contact is deleted, then `completed` (D22)."
  }),
  requested_at: Timestamp.annotate({
    description: "When the erasure was requested: from then on nothing of the contact is readable (ISO 8601)."
  }),
  completed_at: Schema.NullOr(Timestamp).annotate({
    description: "When everything of the contact was deleted (ISO 8601); null while pending."
  }),
  counts: Schema.NullOr(ErasureCounts).annotate({ description: "Rows deleted per kind; null while pending." })
}).annotate({
  identifier: "Erasure",
  examples: [
    {
      id: "01936f0e-8a4b-7c3d-9e2f-0a1b2c3d4e5f",
      contact_id: "+15550100",
      status: "pending",
      requested_at: "2026-11-28T10:00:00.000000Z",
      completed_at: null,
      counts: null
    }
  ]
})
export type Erasure = typeof Erasure.Type

/** The `data.object` of `contact.erased` (W1, D22): the contact's id and the erasure's, nothing else. */
export const ContactErased = Schema.Struct({
  contact_id: Schema.String.annotate({ description: "Your id of the erased contact." }),
  erasure_id: Uuid.annotate({ description: "The erasure (GET /erasures/{id})." })
}).annotate({ identifier: "ContactErased" })
