/** The part of autocannon@9's programmatic API the benchmarks use (the package ships no types). */
declare module "autocannon" {
  interface Histogram {
    readonly average: number
    readonly mean: number
    readonly stddev: number
    readonly min: number
    readonly max: number
    readonly total: number
    readonly p50: number
    readonly p90: number
    readonly p99: number
  }

  interface Options {
    readonly url: string
    readonly method?: string
    readonly headers?: Record<string, string>
    readonly body?: string
    readonly connections?: number
    readonly duration?: number
    readonly pipelining?: number
    readonly timeout?: number
    readonly title?: string
  }

  interface Result {
    readonly requests: Histogram
    readonly latency: Histogram
    readonly throughput: Histogram
    readonly errors: number
    readonly timeouts: number
    readonly non2xx: number
    readonly resets: number
    readonly duration: number
    readonly "2xx": number
    readonly statusCodeStats: Record<string, { readonly count: number }>
  }

  function autocannon(options: Options): Promise<Result>
  export default autocannon
}
