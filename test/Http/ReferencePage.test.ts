/**
 * The reference page as a browser loads it (issue 14 "A reference page that
 * works offline and fast"): `/docs` is a small page naming a versioned,
 * immutable Scalar bundle, served compressed with an ETag; nothing on the
 * page points off the machine; the icon is served at `/favicon.ico`.
 */
import * as http from "node:http"
import * as zlib from "node:zlib"
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { TestApi, withApp } from "../support/TestApp.ts"

/** A raw GET (no decompression): status, headers and body bytes. */
const get = (baseUrl: string, path: string, headers: Record<string, string> = {}) =>
  Effect.promise(
    () =>
      new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }>((resolve, reject) => {
        http
          .get(`${baseUrl}${path}`, { headers }, (response) => {
            const chunks: Array<Buffer> = []
            response.on("data", (chunk: Buffer) => chunks.push(chunk))
            response.on("end", () =>
              resolve({ status: response.statusCode!, headers: response.headers, body: Buffer.concat(chunks) })
            )
          })
          .on("error", reject)
      })
  )

withApp()("the reference page", (it) => {
  it.effect(
    "issue 14: /docs is a page of a few KB naming a versioned bundle and /openapi.json, revalidated by ETag, with no address off the machine",
    () =>
      Effect.gen(function* () {
        const { baseUrl } = yield* TestApi
        const page = yield* get(baseUrl, "/docs")
        assert.strictEqual(page.status, 200)
        assert.match(String(page.headers["content-type"]), /^text\/html/)
        assert.isBelow(page.body.length, 4096)
        const html = page.body.toString("utf8")
        assert.match(html, /<script src="\/docs\/scalar\.js\?v=[A-Za-z0-9_-]{12}"><\/script>/)
        assert.include(html, 'url: "/openapi.json"')
        assert.include(html, "withDefaultFonts: false")
        // The bundle mounts an app of its own (with no document) before any #api-reference (issue 39 item 1).
        assert.notInclude(html, 'id="api-reference"', "no element for the bundle's own HTML API to mount on")
        assert.notMatch(html, /https?:\/\//, "the page names no other host")
        assert.strictEqual(page.headers["cache-control"], "no-cache")
        const again = yield* get(baseUrl, "/docs", { "if-none-match": String(page.headers.etag) })
        assert.deepStrictEqual([again.status, again.body.length], [304, 0])
      })
  )

  it.effect(
    "issue 14: the bundle is immutable under its versioned URL, brotli or gzip as accepted, the same bytes each way, 304 on its ETag",
    () =>
      Effect.gen(function* () {
        const { baseUrl } = yield* TestApi
        const html = (yield* get(baseUrl, "/docs")).body.toString("utf8")
        const url = /src="(\/docs\/scalar\.js\?v=[^"]+)"/.exec(html)![1]!
        const plain = yield* get(baseUrl, url)
        assert.strictEqual(plain.status, 200)
        assert.isUndefined(plain.headers["content-encoding"])
        assert.match(String(plain.headers["content-type"]), /^application\/javascript/)
        assert.strictEqual(plain.headers["cache-control"], "public, max-age=31536000, immutable")
        assert.strictEqual(plain.headers.vary, "accept-encoding")
        assert.isAbove(plain.body.length, 1_000_000)
        assert.include(plain.body.toString("utf8"), "createApiReference")
        assert.notInclude(plain.body.toString("utf8"), "https://fonts.scalar.com", "no web font off the machine")
        const brotli = yield* get(baseUrl, url, { "accept-encoding": "gzip, deflate, br" })
        assert.strictEqual(brotli.headers["content-encoding"], "br")
        assert.isBelow(brotli.body.length, plain.body.length / 3)
        assert.isTrue(zlib.brotliDecompressSync(brotli.body).equals(plain.body))
        const gzip = yield* get(baseUrl, url, { "accept-encoding": "gzip" })
        assert.strictEqual(gzip.headers["content-encoding"], "gzip")
        assert.isTrue(zlib.gunzipSync(gzip.body).equals(plain.body))
        assert.strictEqual(brotli.headers.etag, plain.headers.etag)
        const cached = yield* get(baseUrl, url, { "if-none-match": String(plain.headers.etag) })
        assert.deepStrictEqual([cached.status, cached.body.length], [304, 0])
      })
  )

  it.effect("issue 14: the icon is served at /favicon.ico and /favicon.svg", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestApi
      for (const path of ["/favicon.ico", "/favicon.svg"]) {
        const icon = yield* get(baseUrl, path)
        assert.strictEqual(icon.status, 200, path)
        assert.strictEqual(icon.headers["content-type"], "image/svg+xml", path)
        assert.match(icon.body.toString("utf8"), /^<svg /, path)
      }
    })
  )
})
