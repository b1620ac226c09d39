/**
 * The pure core of version control (DECISIONS.md A5, A6, A10).
 */
import { assert, describe, it } from "@effect/vitest"
import {
  commitId,
  contentHash,
  diffFiles,
  fileOf,
  mergeThreeWay,
  referenceIssues,
  snapshotOf
} from "../../src/Assistants/Files.ts"

const hashes = (entries: Record<string, string>) => new Map(Object.entries(entries))

describe("Files", () => {
  it("content hashes are SHA-256 of RFC 8785 canonical JSON: key order and number form do not matter (A5)", () => {
    assert.strictEqual(contentHash({ b: 1, a: [1, "x"] }), contentHash({ a: [1, "x"], b: 1.0 }))
    assert.notStrictEqual(contentHash({ a: 1 }), contentHash({ a: "1" }))
    assert.match(contentHash({}), /^[0-9a-f]{64}$/)
    // canonicalize({"a":1}) is the text {"a":1}; its SHA-256 is fixed.
    assert.strictEqual(contentHash({ a: 1 }), "015abd7f5cc57a2dd94b7590f04ad8084273905ee33ec5cebeae62276a97f862")
  })

  it("commit ids are 12 hex characters, deterministic over parent, files, message, author and time (A5)", () => {
    const commit = {
      parent: null,
      mergeParent: null,
      files: hashes({ context: "h1", "nodes/a": "h2" }),
      message: "m",
      authorType: "human",
      authorId: null,
      createdAt: "2026-01-01T00:00:00.000Z"
    }
    assert.match(commitId(commit), /^[0-9a-f]{12}$/)
    assert.strictEqual(commitId(commit), commitId({ ...commit, files: hashes({ "nodes/a": "h2", context: "h1" }) }))
    assert.notStrictEqual(commitId(commit), commitId({ ...commit, message: "n" }))
    assert.notStrictEqual(commitId(commit), commitId({ ...commit, parent: "abcdefabcdef" }))
  })

  it("three-way merge: one-sided changes apply, identical changes are not conflicts, divergent ones are (A6)", () => {
    const base = hashes({ a: "1", b: "1", c: "1", d: "1" })
    const source = hashes({ a: "2", b: "1", c: "2", e: "1" })
    const target = hashes({ a: "1", b: "2", c: "2", d: "1" })
    const merged = mergeThreeWay(base, source, target)
    assert.strictEqual(merged._tag, "Merged")
    if (merged._tag === "Merged") {
      assert.deepStrictEqual(
        [...merged.set],
        [
          ["a", "2"],
          ["e", "1"]
        ]
      )
      assert.deepStrictEqual(merged.remove, ["d"])
    }
    // a diverges; b changes on one side; d is deleted on both sides (identical, not a conflict).
    const conflict = mergeThreeWay(base, hashes({ a: "2", b: "3", c: "1" }), hashes({ a: "3", b: "1", c: "1" }))
    assert.deepStrictEqual(conflict, { _tag: "Conflict", paths: ["a"] })
    // c modified on both sides differently; d deleted by the source, modified by the target.
    const both = mergeThreeWay(base, hashes({ a: "2", b: "1", c: "9" }), hashes({ a: "1", b: "1", c: "8", d: "7" }))
    assert.deepStrictEqual(both, { _tag: "Conflict", paths: ["c", "d"] })
  })

  it("diffs: added, modified with shallow changes, removed, by path", () => {
    const before = new Map([
      ["nodes/a", fileOf({ id: "a", name: "A", config: { x: 1 } })],
      ["nodes/b", fileOf({ id: "b" })]
    ])
    const after = new Map([
      ["nodes/a", fileOf({ id: "a", name: "A2", config: { x: 2 } })],
      ["nodes/c", fileOf({ id: "c" })]
    ])
    const diffs = diffFiles(before, after)
    assert.deepStrictEqual(
      diffs.map((d) => [d.path, d.status]),
      [
        ["nodes/a", "modified"],
        ["nodes/b", "removed"],
        ["nodes/c", "added"]
      ]
    )
    assert.deepStrictEqual(diffs[0]!.changes, {
      name: { old: "A", new: "A2" },
      config: { old: { x: 1 }, new: { x: 2 } }
    })
  })

  it("reference issues name the referring field and the missing item (A10)", () => {
    const files = new Map([
      ["config", fileOf({ initial_node_id: "ghost" })],
      ["nodes/a", fileOf({ id: "a", type: "llm", config: { next_node: "b", tools: ["t", "u"] } })],
      ["nodes/b", fileOf({ id: "b", type: "router", config: { tools: ["u"] } })],
      ["tools/t", fileOf({ id: "t" })]
    ])
    const issues = referenceIssues(files, (path, field, missing) => [path, ...field, missing])
    assert.deepStrictEqual(
      issues.map((issue) => issue.loc),
      [
        ["config", "initial_node_id", "nodes/ghost"],
        ["nodes/a", "config", "tools", 1, "tools/u"]
      ]
    )
    assert.deepStrictEqual(snapshotOf(files).graph.initial_node_id, "ghost")
  })
})
