/**
 * `node bench/lib/loadChild.ts '<LoadOptions as JSON>'`: one {@link runLoad}
 * in a process of its own, its result as JSON on stdout. For a second load
 * that must not share the event loop of the load being measured (the
 * fairness benchmark's hammered organization): see `runLoadApart` in load.ts.
 */
import { type LoadOptions, runLoad } from "./load.ts"

const options: LoadOptions = JSON.parse(process.argv[2] ?? "{}")
process.stdout.write(`${JSON.stringify(await runLoad(options))}\n`)
