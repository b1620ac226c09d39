/**
 * The API reference page (issue 14 item 4): `/docs` is a small HTML page that
 * runs the Scalar API reference on `/openapi.json`; the Scalar bundle (the
 * standalone build `effect` ships for `HttpApiScalar`, Scalar 1.43.5, about
 * 3.2 MB) is a static asset, `/docs/scalar.js?v=<content hash>`, sent with
 * `ETag`, `Cache-Control: public, max-age=31536000, immutable` and brotli
 * (770 KB) or gzip (866 KB) as the browser accepts, so a page load after the
 * first costs a few kilobytes. Nothing is fetched from the internet: Scalar's default fonts are
 * off and the bundle is served here. The page's icon is `/favicon.svg`, also
 * served as `/favicon.ico`.
 *
 * The reference offers the security schemes of the document (`apiKey` for the
 * conversations and assistants APIs, `adminToken` for the admin API), both
 * HTTP bearer, so "Test Request" sends `Authorization: Bearer <token>`.
 */
import * as crypto from "node:crypto"
import { createRequire } from "node:module"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import * as zlib from "node:zlib"
import { Effect } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"

/**
 * A static asset: its bytes and validator, and its brotli and gzip forms,
 * each compressed on its first request (in Node's thread pool, so neither
 * start-up nor the event loop waits for it) and kept.
 */
interface Asset {
  readonly contentType: string
  readonly etag: string
  readonly identity: Uint8Array
  readonly brotli: Effect.Effect<Uint8Array>
  readonly gzip: Effect.Effect<Uint8Array>
}

const zlibEffect =
  (compress: (body: Uint8Array, done: (error: Error | null, result: Buffer) => void) => void) => (body: Uint8Array) =>
    Effect.callback<Uint8Array>((resume) => {
      compress(body, (error, result) => resume(error === null ? Effect.succeed(result) : Effect.die(error)))
    })

/**
 * Brotli at quality 9: 0.9 s for the 3.2 MB bundle, 770 KB (quality 11 saves
 * 10% more and takes 8.5 s; gzip 9 gives 866 KB in 80 ms).
 */
const brotli = zlibEffect((body, done) =>
  zlib.brotliCompress(body, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 9 } }, done)
)
const gzip = zlibEffect((body, done) => zlib.gzip(body, { level: 9 }, done))

const assetOf = (contentType: string, body: Uint8Array) =>
  Effect.gen(function* () {
    return {
      contentType,
      etag: `"${crypto.createHash("sha256").update(body).digest("base64url").slice(0, 22)}"`,
      identity: body,
      brotli: yield* Effect.cached(brotli(body)),
      gzip: yield* Effect.cached(gzip(body))
    } satisfies Asset
  })

/**
 * The Scalar standalone bundle that `effect` ships (its `HttpApiScalar`
 * inlines it in every page); read by file path, as `effect` does not export
 * the module by name.
 */
const scalarBundle = Effect.promise(async () => {
  const effectRoot = path.dirname(createRequire(import.meta.url).resolve("effect/package.json"))
  const module = (await import(
    pathToFileURL(path.join(effectRoot, "dist/http-api/internal/httpApiScalar.js")).href
  )) as { readonly javascript: string }
  // Scalar's styles load Inter and JetBrains Mono from fonts.scalar.com even with its default fonts off (its
  // API client does): those @font-face sources are made local names, which the browser cannot find and then
  // skips, so the page uses the system's fonts and nothing leaves the machine.
  return module.javascript.replaceAll("url(https://fonts.scalar.com/", "local(scalar-font-")
})

/** The page's icon: a speech bubble. */
const FAVICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><path fill="#2f6fde" d="M4 5h24a2 2 0 0 1 2 2v14a2 2 0 0 1-2 2H13l-6 5v-5H4a2 2 0 0 1-2-2V7a2 2 0 0 1 2-2z"/><path fill="#fff" d="M8 11h16v2H8zm0 5h11v2H8z"/></svg>`

/** How long a browser may keep the versioned bundle and the icon, in seconds (a year: the URL changes with it). */
const IMMUTABLE = "public, max-age=31536000, immutable"

/**
 * The id of the element the page mounts Scalar on. Never `api-reference`: the
 * standalone bundle, when it loads, mounts an app of its own before any element
 * with that id (its HTML API, configured by `data-*` attributes), so a page
 * calling `createApiReference` on `#api-reference` got two apps, the first with
 * no document (`Document  not found in configList`) filling the first screen
 * with blank placeholders (issue 39 item 1). The id `effect`'s `HttpApiScalar`
 * uses.
 */
const MOUNT_ID = "api-reference-container"

/** The page: the bundle, then one Scalar app on `/openapi.json` with our settings, on {@link MOUNT_ID}. */
const pageHtml = (bundleUrl: string) => `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <title>Parley API reference</title>
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <link rel="icon" href="/favicon.svg" type="image/svg+xml" />
  </head>
  <body>
    <div id="${MOUNT_ID}"></div>
    <script src="${bundleUrl}"></script>
    <script>
      window.Scalar.createApiReference(document.getElementById("${MOUNT_ID}"), {
        url: "/openapi.json",
        withDefaultFonts: false,
        favicon: "/favicon.svg",
        hideClientButton: false,
        // Scalar's developer toolbar (Share, Generate SDKs), shown on localhost by default, offers to send the document out.
        showDeveloperTools: "never",
        authentication: { preferredSecurityScheme: "apiKey" }
      })
    </script>
  </body>
</html>
`

/**
 * Responds with the asset `load` gives: 304 when `If-None-Match` names its ETag, else its bytes,
 * brotli or gzip when `Accept-Encoding` allows, with `cacheControl`.
 */
const serve = (load: Effect.Effect<Asset>, cacheControl: string) =>
  Effect.gen(function* () {
    const asset = yield* load
    const request = yield* HttpServerRequest.HttpServerRequest
    const headers = { etag: asset.etag, "cache-control": cacheControl, vary: "accept-encoding" }
    if (request.headers["if-none-match"] === asset.etag) return HttpServerResponse.empty({ status: 304, headers })
    const accepted = request.headers["accept-encoding"] ?? ""
    const encoding = /\bbr\b/.test(accepted) ? "br" : /\bgzip\b/.test(accepted) ? "gzip" : undefined
    const body = encoding === "br" ? yield* asset.brotli : encoding === "gzip" ? yield* asset.gzip : asset.identity
    return HttpServerResponse.uint8Array(body, {
      contentType: asset.contentType,
      headers: encoding === undefined ? headers : { ...headers, "content-encoding": encoding }
    })
  })

/** The paths of the reference page's routes (for route templates). */
export const referencePaths = ["/docs", "/docs/scalar.js", "/favicon.ico", "/favicon.svg"] as const

/**
 * `/docs`, its bundle and the icon (see module docs). The bundle and the page
 * are built at the first request of either, once (concurrent first requests
 * share the build): a process nobody reads the reference of never holds the
 * 3.2 MB bundle (issue 44, the idle process's memory: bench/README.md
 * "memory").
 */
export const ReferencePageRoutes = HttpRouter.use(
  Effect.fnUntraced(function* (router) {
    const assets = yield* Effect.cached(
      Effect.gen(function* () {
        const bundle = yield* assetOf("application/javascript; charset=utf-8", Buffer.from(yield* scalarBundle, "utf8"))
        const page = yield* assetOf(
          "text/html; charset=utf-8",
          Buffer.from(pageHtml(`/docs/scalar.js?v=${bundle.etag.slice(1, 13)}`), "utf8")
        )
        return { bundle, page }
      })
    )
    const icon = yield* assetOf("image/svg+xml", Buffer.from(FAVICON_SVG, "utf8"))
    // The page is small and names the bundle's version: browsers revalidate it (ETag) on every load.
    yield* router.add(
      "GET",
      "/docs",
      serve(
        Effect.map(assets, (built) => built.page),
        "no-cache"
      )
    )
    yield* router.add(
      "GET",
      "/docs/scalar.js",
      serve(
        Effect.map(assets, (built) => built.bundle),
        IMMUTABLE
      )
    )
    yield* router.add("GET", "/favicon.svg", serve(Effect.succeed(icon), "public, max-age=86400"))
    yield* router.add("GET", "/favicon.ico", serve(Effect.succeed(icon), "public, max-age=86400"))
  })
)
