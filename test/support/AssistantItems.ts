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

/** An assistant snapshot: `nodes` and `tools`, the first node initial unless given. */
export const snapshotOf = (
  nodes: ReadonlyArray<Record<string, unknown>>,
  tools: ReadonlyArray<Record<string, unknown>> = [],
  initial: string = nodes[0]!.id as string
) => ({
  context: { assistant_name: "Support bot", assistant_description: "Answers customers" },
  graph: { initial_node_id: initial, nodes },
  tools
})
