declare module "json-merge-patch" {
  /** RFC 7396: applies `patch` to `target` (mutating and returning it). */
  export function apply(target: unknown, patch: unknown): unknown
  /** RFC 7396: the patch that turns `before` into `after`. */
  export function generate(before: unknown, after: unknown): unknown
  /** Merges two patches into one. */
  export function merge(first: unknown, second: unknown): unknown
}
