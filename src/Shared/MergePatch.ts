/**
 * RFC 7396 JSON Merge Patch, applied without changing the target: ingest's
 * metadata patches (spec "Unified ingest") and the assistants' changesets and
 * item PATCHes (assistants.md "Drafts") use this one function.
 *
 * Our own code, not the `json-merge-patch` library it replaced: that library
 * (1.0.2) stops at a patch member named `__proto__`, `constructor` or
 * `prototype` and silently drops the rest of the patch, and throws on a target
 * with an own member named `hasOwnProperty` (a 500 found by the fuzz test).
 * Both are valid JSON member names a client may store. Here every member is
 * an own data property (defined, never assigned, so `__proto__` is a key like
 * any other) and membership is `Object.hasOwn`.
 *
 * Only the objects the patch descends into are copied (one level each): the
 * rest of the target is shared, so a stored item nested thousands of levels
 * deep (from before the D18 limit) can still be patched; the recursion follows
 * the patch, whose depth D18 bounds.
 */

type JsonObject = Record<string, unknown>

const isObject = (value: unknown): value is JsonObject =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** Sets `key` as an own enumerable data property (an assignment to `__proto__` would set the prototype). */
const define = (object: JsonObject, key: string, value: unknown): void => {
  Object.defineProperty(object, key, { value, writable: true, enumerable: true, configurable: true })
}

/**
 * `target` with the RFC 7396 merge `patch` applied (null removes a member,
 * objects merge recursively, anything else replaces); `target` is not changed.
 * A `target` that is not an object is treated as `{}` when `patch` is one.
 * Never fails.
 */
export const applyMergePatch = (target: unknown, patch: unknown): unknown => {
  if (!isObject(patch)) return patch
  const base = isObject(target) ? target : {}
  const result: JsonObject = {}
  for (const key of Object.keys(base)) define(result, key, base[key])
  for (const key of Object.keys(patch)) {
    const value = patch[key]
    if (value === null) delete result[key]
    else define(result, key, applyMergePatch(Object.hasOwn(base, key) ? base[key] : undefined, value))
  }
  return result
}
