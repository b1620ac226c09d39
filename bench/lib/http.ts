/** A small JSON-over-HTTP client for benchmark setup (admin and conversations APIs). */

export interface JsonResponse {
  readonly status: number
  readonly text: string
  readonly json: any
}

/** `method url` with an optional bearer token and JSON body; the body parsed when it is JSON. */
export const requestJson = async (
  method: string,
  url: string,
  options: { readonly token?: string; readonly body?: unknown } = {}
): Promise<JsonResponse> => {
  const headers: Record<string, string> = {}
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`
  if (options.body !== undefined) headers["content-type"] = "application/json"
  const response = await fetch(url, {
    method,
    headers,
    ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}),
    signal: AbortSignal.timeout(10_000)
  })
  const text = await response.text()
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    json = undefined
  }
  return { status: response.status, text, json }
}

/** Like {@link requestJson}, failing unless the status is `expected`. */
export const expectJson = async (
  expected: number,
  method: string,
  url: string,
  options: { readonly token?: string; readonly body?: unknown } = {}
): Promise<any> => {
  const response = await requestJson(method, url, options)
  if (response.status !== expected) {
    throw new Error(`${method} ${url}: expected ${expected}, got ${response.status}: ${response.text.slice(0, 500)}`)
  }
  return response.json
}
