/**
 * The erasure endpoints (DECISIONS.md D22, GDPR art. 17): erase a contact,
 * then follow the erasure.
 */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { conversationsBasePath } from "../Domain/BasePaths.ts"
import { Identifier } from "../Domain/Common.ts"
import { Erasure } from "../Domain/Erasure.ts"
import { Authorization } from "../Domain/Security.ts"
import { ContactNotFound, ErasureNotFound } from "./Errors.ts"

/** The erasures group, under the conversations base path, with API-key auth. */
export class ErasuresApi extends HttpApiGroup.make("erasures")
  .add(
    HttpApiEndpoint.delete("erase", "/contacts/:contact_id", {
      params: { contact_id: Identifier },
      success: Erasure.pipe(HttpApiSchema.status(202)),
      error: ContactNotFound.Wire
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Erase a contact",
        description:
          "Requests the erasure of everything Parley holds of the contact (D22): answers 202 with the erasure (`pending`) at once, and from then on nothing of the contact is readable: its sessions answer 404, session search and export leave them out, and ingest from the same `from` makes a new contact, which the erasure does not touch. In the background the contact's sessions (open ones too), messages, runs, ingest receipts, schedules, reply jobs, assignments, conversations, the contact and the events that carried their data are deleted with those events' deliveries (pending ones are never sent); then the erasure is `completed` and one `contact.erased` event goes to subscribed apps. While the contact's erasure is in progress a DELETE answers 202 with that same erasure; a contact unknown or already erased gets 404 `Contact not found`."
      })
    ),
    HttpApiEndpoint.get("get", "/erasures/:erasure_id", {
      params: { erasure_id: Identifier },
      success: Erasure,
      error: ErasureNotFound.Wire
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Get an erasure",
        description:
          "The erasure (D22): `pending` while the contact's rows are being deleted, then `completed` with `completed_at` and `counts` (rows deleted per kind). An erasure of another organization, or an unknown id, gets 404 `Erasure not found`."
      })
    )
  )
  .middleware(Authorization)
  .prefix(conversationsBasePath)
  .annotateMerge(
    OpenApi.annotations({
      title: "Erasures",
      description:
        "Erasure of a contact (GDPR art. 17, D22): a durable background job that deletes everything of the contact and survives restarts and crashes. Requests use an organization's API key."
    })
  ) {}
