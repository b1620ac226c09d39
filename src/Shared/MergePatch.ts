/**
 * RFC 7396 JSON Merge Patch, applied without changing the target: ingest's
 * metadata patches (spec "Unified ingest") and the assistants' changesets and
 * item PATCHes (assistants.md "Drafts") use this one function.
 *
 * The `json-merge-patch` library applies the patch, on a copy of only the
 * objects the patch descends into: the rest of the target is shared, never
 * copied, so a stored item nested thousands of levels deep (from before the
 * D18 limit) can still be patched; the walk follows the patch, whose depth
 * D18 bounds.
 */
import * as MergePatch from "json-merge-patch"

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** `target` with the objects `patch` descends into copied (one level each), the rest shared. */
const copyAlong = (target: Record<string, unknown>, patch: Record<string, unknown>): Record<string, unknown> => {
  const copy = { ...target }
  for (const [key, value] of Object.entries(patch)) {
    const inner = copy[key]
    if (isObject(value) && isObject(inner)) copy[key] = copyAlong(inner, value)
  }
  return copy
}

/**
 * `target` with the RFC 7396 merge `patch` applied (null removes a key,
 * objects merge recursively, anything else replaces); `target` is not changed.
 * A `target` that is not an object is treated as `{}` when `patch` is one.
 */
export const applyMergePatch = (target: unknown, patch: unknown): unknown =>
  MergePatch.apply(isObject(target) && isObject(patch) ? copyAlong(target, patch) : target, patch)
