/**
 * The errors of the webhooks domain: apps and deliveries (O6),
 * each a `Schema.TaggedError` with its status and `*.Wire`, the `{detail}`
 * body an endpoint lists (`Domain/Errors.ts` says how). Imports only `effect`
 * and `Domain/`: a contract file.
 */
import { Schema } from "effect"
import { asDetail, detailDefault } from "../Domain/Errors.ts"

/** 404 `App not found` (O6): an unknown app, or another organization's. */
export class AppNotFound extends Schema.TaggedError<AppNotFound>()(
  "AppNotFound",
  { detail: detailDefault("App not found"), app_id: Schema.optionalKey(Schema.String) },
  { httpApiStatus: 404 }
) {
  static readonly Wire = AppNotFound.pipe(asDetail(Schema.Literal("App not found")))
}

/** 404 `Delivery not found` (O6): an unknown delivery of the app. */
export class DeliveryNotFound extends Schema.TaggedError<DeliveryNotFound>()(
  "DeliveryNotFound",
  { detail: detailDefault("Delivery not found"), delivery_id: Schema.optionalKey(Schema.String) },
  { httpApiStatus: 404 }
) {
  static readonly Wire = DeliveryNotFound.pipe(asDetail(Schema.Literal("Delivery not found")))
}
