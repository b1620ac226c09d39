/**
 * RFC 7396 JSON Merge Patch (src/Shared/MergePatch.ts): the RFC's Appendix A
 * examples, member names JavaScript treats specially, and the target left
 * unchanged. No database.
 */
import { assert, describe, it } from "@effect/vitest"
import { applyMergePatch } from "../../src/Shared/MergePatch.ts"

/** Compares through JSON text, which keeps an own `__proto__` member (deepStrictEqual would not see it). */
const same = (actual: unknown, expected: string) => assert.strictEqual(JSON.stringify(actual), expected)

describe("applyMergePatch", () => {
  it("gives the results of RFC 7396 Appendix A", () => {
    const cases: ReadonlyArray<readonly [string, string, string]> = [
      ['{"a":"b"}', '{"a":"c"}', '{"a":"c"}'],
      ['{"a":"b"}', '{"b":"c"}', '{"a":"b","b":"c"}'],
      ['{"a":"b"}', '{"a":null}', "{}"],
      ['{"a":"b","b":"c"}', '{"a":null}', '{"b":"c"}'],
      ['{"a":["b"]}', '{"a":"c"}', '{"a":"c"}'],
      ['{"a":"c"}', '{"a":["b"]}', '{"a":["b"]}'],
      ['{"a":{"b":"c"}}', '{"a":{"b":"d","c":null}}', '{"a":{"b":"d"}}'],
      ['{"a":[{"b":"c"}]}', '{"a":[1]}', '{"a":[1]}'],
      ['["a","b"]', '["c","d"]', '["c","d"]'],
      ['{"a":"b"}', '["c"]', '["c"]'],
      ['{"a":"foo"}', "null", "null"],
      ['{"a":"foo"}', '"bar"', '"bar"'],
      ['{"e":null}', '{"a":1}', '{"e":null,"a":1}'],
      ["[1,2]", '{"a":"b","c":null}', '{"a":"b"}'],
      ["{}", '{"a":{"bb":{"ccc":null}}}', '{"a":{"bb":{}}}']
    ]
    for (const [target, patch, result] of cases) same(applyMergePatch(JSON.parse(target), JSON.parse(patch)), result)
  })

  it("treats __proto__, constructor, prototype and hasOwnProperty as ordinary member names", () => {
    same(
      applyMergePatch(JSON.parse('{"hasOwnProperty":1,"a":2}'), JSON.parse('{"a":null,"b":3}')),
      '{"hasOwnProperty":1,"b":3}'
    )
    same(
      applyMergePatch({}, JSON.parse('{"constructor":"c","__proto__":{"x":1},"prototype":2,"after":true}')),
      '{"constructor":"c","__proto__":{"x":1},"prototype":2,"after":true}'
    )
    const patched = applyMergePatch(JSON.parse('{"__proto__":{"x":1,"y":2}}'), JSON.parse('{"__proto__":{"y":null}}'))
    same(patched, '{"__proto__":{"x":1}}')
    assert.strictEqual(Object.getPrototypeOf(patched), Object.prototype)
    same(
      applyMergePatch(JSON.parse('{"__proto__":1,"toString":2}'), JSON.parse('{"__proto__":null,"toString":null}')),
      "{}"
    )
    // A member the target does not have is not read from Object.prototype.
    same(applyMergePatch({}, JSON.parse('{"toString":{"a":1}}')), '{"toString":{"a":1}}')
  })

  it("leaves the target unchanged and shares what the patch does not descend into", () => {
    const untouched = { deep: [1, 2, 3] }
    const target = { a: { b: 1, c: 2 }, untouched }
    const before = JSON.stringify(target)
    const patched = applyMergePatch(target, { a: { b: null, d: 4 } }) as any
    assert.strictEqual(JSON.stringify(target), before)
    same(patched, '{"a":{"c":2,"d":4},"untouched":{"deep":[1,2,3]}}')
    assert.strictEqual(patched.untouched, untouched)
  })
})
