/**
 * The shape of the house (issue 37 items 1 and 2; STYLE.md "Services and
 * layers"): no import cycle between files of `src/` (type-only imports count:
 * a cycle of types is still a knot a reader must untie), and no production
 * module imports a test double or anything outside `src/` but packages (test
 * doubles live under `test/`, beside what they double, and import it).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"

const src = path.resolve(import.meta.dirname, "../src")

/** Every `.ts` file under `dir`, as absolute paths. */
const sourceFiles = (dir: string): Array<string> =>
  fs
    .readdirSync(dir, { withFileTypes: true })
    .flatMap((entry) =>
      entry.isDirectory()
        ? sourceFiles(path.join(dir, entry.name))
        : entry.name.endsWith(".ts")
          ? [path.join(dir, entry.name)]
          : []
    )

/** The relative specifiers a file imports or re-exports, statically or dynamically (type-only ones included). */
const relativeImports = (text: string): Array<string> =>
  [
    ...text.matchAll(/^\s*(?:import|export)\b[^"';]*?\bfrom\s+["'](\.[^"']+)["']/gms),
    ...text.matchAll(/^\s*import\s+["'](\.[^"']+)["']/gm),
    ...text.matchAll(/\bimport\(\s*["'](\.[^"']+)["']\s*\)/g)
  ].map((match) => match[1]!)

const files = sourceFiles(src)
const graph = new Map(
  files.map((file) => [
    file,
    relativeImports(fs.readFileSync(file, "utf8")).map((specifier) => path.resolve(path.dirname(file), specifier))
  ])
)

/** The strongly connected components of more than one file (Tarjan), each sorted: the import cycles. */
const cycles = (): Array<Array<string>> => {
  let next = 0
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: Array<string> = []
  const onStack = new Set<string>()
  const found: Array<Array<string>> = []
  const visit = (file: string) => {
    index.set(file, next)
    low.set(file, next)
    next++
    stack.push(file)
    onStack.add(file)
    for (const target of graph.get(file) ?? []) {
      if (!graph.has(target)) continue
      if (!index.has(target)) {
        visit(target)
        low.set(file, Math.min(low.get(file)!, low.get(target)!))
      } else if (onStack.has(target)) {
        low.set(file, Math.min(low.get(file)!, index.get(target)!))
      }
    }
    if (low.get(file) === index.get(file)) {
      const component: Array<string> = []
      let member: string
      do {
        member = stack.pop()!
        onStack.delete(member)
        component.push(path.relative(src, member))
      } while (member !== file)
      if (component.length > 1) found.push(component.sort())
    }
  }
  for (const file of files) if (!index.has(file)) visit(file)
  return found
}

describe("the import graph of src/ (issue 37 item 2)", () => {
  it("reads the imports of every file (the parser finds the known edges)", () => {
    const server = graph.get(path.join(src, "Server.ts"))!
    assert.include(server, path.join(src, "Http.ts"))
    assert.include(server, path.join(src, "Sessions/Sessions.ts"))
    assert.isAbove(files.length, 50)
  })

  it("no import cycle between files of src/, type-only imports included", () => {
    assert.deepStrictEqual(cycles(), [])
  })

  it("production modules import nothing outside src/ but packages (no test double, no test support)", () => {
    const outside = [...graph].flatMap(([file, targets]) =>
      targets
        .filter((target) => !target.startsWith(`${src}${path.sep}`))
        .map((target) => `${path.relative(src, file)} -> ${path.relative(src, target)}`)
    )
    assert.deepStrictEqual(outside, [])
  })

  it("no test double in src/: no in-memory repository and no layerTest over one", () => {
    const doubles = files
      .map((file) => path.relative(src, file))
      .filter((file) => /^(Memory|MemoryRepo|InMemory\w*)\.ts$/.test(path.basename(file)))
    assert.deepStrictEqual(doubles, [])
  })
})
