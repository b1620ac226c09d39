/**
 * A real headless Chromium for tests of what a person sees (Debian's
 * `chromium`, which .ci/run installs when missing, or `CHROMIUM_PATH`), driven
 * by `playwright-core`: where it is, the flags it needs here, where
 * screenshots go, and whether an element is seen without scrolling. Used by
 * test/Http/Browser.test.ts and test/Evaluations/Report.test.ts.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import type { Locator } from "playwright-core"

/** The Chromium binary. */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium"

/**
 * Whether Chromium is installed. When it is not, `testFile`'s browser tests
 * are skipped with the reason printed, except under CI, where this throws
 * (.ci/run installs it).
 */
export const chromiumAvailable = (testFile: string) => {
  const available = fs.existsSync(CHROMIUM)
  if (!available) {
    const reason = `${testFile}: no Chromium at ${CHROMIUM} (Debian package chromium, or CHROMIUM_PATH)`
    if (process.env.CI === "true") throw new Error(`${reason}; .ci/run installs it`)
    process.stdout.write(`[parley tests] skipped: ${reason}\n`)
  }
  return available
}

/** The flags a headless Chromium needs here: no sandbox as root, no background traffic off the machine. */
export const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync"
]

/** The path of the screenshot `name` in test/artifacts/ (git-ignored), its folder made. */
export const artifact = (name: string) => {
  const file = path.resolve(import.meta.dirname, "../artifacts", name)
  fs.mkdirSync(path.dirname(file), { recursive: true })
  return file
}

/** Where an element is as a person sees it, from {@link seen}. */
export interface Seen {
  readonly visible: boolean
  readonly box: { readonly x: number; readonly y: number; readonly width: number; readonly height: number } | null
  readonly onTop: boolean
}

/**
 * Where `locator`'s element is as a person sees it without scrolling: whether
 * Playwright finds it visible (attached, non-empty box, not
 * `visibility: hidden`), its box in CSS pixels from the viewport's top left,
 * and whether the element hit at the box's centre is it or inside it (nothing
 * covers it). Waits up to `timeoutMs` for it to become visible.
 */
export const seen = async (locator: Locator, timeoutMs = 15_000): Promise<Seen> => {
  await locator.waitFor({ state: "visible", timeout: timeoutMs })
  const box = await locator.boundingBox()
  const onTop =
    box !== null &&
    (await locator.evaluate(
      (element, [x, y]) => {
        const hit = element.ownerDocument.elementFromPoint(x, y)
        return hit !== null && element.contains(hit)
      },
      [box.x + box.width / 2, box.y + box.height / 2] as const
    ))
  return { visible: await locator.isVisible(), box, onTop }
}

/** Whether `where` is seen inside a first viewport of `viewport` (non-zero size, wholly inside, on top). */
export const inFirstViewport = (where: Seen, viewport: { readonly width: number; readonly height: number }) => {
  const { visible, box, onTop } = where
  return (
    visible &&
    onTop &&
    box !== null &&
    box.width > 0 &&
    box.height > 0 &&
    box.x >= 0 &&
    box.y >= 0 &&
    box.x + box.width <= viewport.width &&
    box.y + box.height <= viewport.height
  )
}
