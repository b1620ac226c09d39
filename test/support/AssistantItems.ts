/**
 * Items of assistant snapshots for tests (assistants.md "Node", "Tool"): plain
 * values, no I/O, shared by the HTTP and the in-memory tests.
 */

/** A node of type llm with the given config. */
export const llm = (id: string, config: Record<string, unknown> = {}) => ({
  id,
  name: `Node ${id}`,
  type: "llm" as const,
  config: { instructions: `You are ${id}`, ...config }
})

/** A tool called `name`. */
export const tool = (name: string, extra: Record<string, unknown> = {}) => ({
  name,
  description: `Tool ${name}`,
  request: { url: "https://example.com/tools", method: "POST" as const },
  ...extra
})
