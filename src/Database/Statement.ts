/**
 * Statements of fixed text with named, typed parameters (issue 13 item 4).
 *
 * Speed tactic (measured by `npm run bench` messages and ingest): the hot
 * statements are fixed SQL texts, prepared once per connection, not `sql`
 * templates compiled per request. This builder keeps that while a reader sees
 * which value goes where: the text is written against named placeholders
 * (`${p.organizationId}` renders `$1::uuid`), and a call passes an object of
 * named values, put in placeholder order here. The benchmarks' baseline runs
 * the same texts. A statement whose best plan changes as its tables grow is
 * planned on every call instead ({@link FixedStatementOptions}).
 */
import type { Effect } from "effect"
import type { SqlClient, SqlError } from "effect/sql"

/** The PostgreSQL types of parameters and their TypeScript values (`json`, `jsonb`: JSON text). */
interface ParameterTypes {
  readonly uuid: string
  readonly text: string
  readonly json: string
  readonly jsonb: string
  readonly boolean: boolean
  readonly bytea: Uint8Array
  readonly int4: number
  readonly "uuid[]": ReadonlyArray<string>
  readonly "text[]": ReadonlyArray<string>
  readonly "int4[]": ReadonlyArray<number>
}

/** A parameter's type: `uuid`, `text`, ...; with `?` it may be null. */
export type ParameterType = keyof ParameterTypes | `${keyof ParameterTypes}?`

/** The value of a parameter of type `T`. */
type ValueOf<T extends ParameterType> = T extends `${infer Base extends keyof ParameterTypes}?`
  ? ParameterTypes[Base] | null
  : T extends keyof ParameterTypes
    ? ParameterTypes[T]
    : never

/** The named values of a statement with parameters `P`. */
export type StatementInput<P extends Record<string, ParameterType>> = { readonly [K in keyof P]: ValueOf<P[K]> }

/** A fixed statement: its text, and its values in placeholder order from named ones. */
export interface FixedStatement<P extends Record<string, ParameterType>> {
  readonly text: string
  readonly values: (input: StatementInput<P>) => ReadonlyArray<unknown>
  /** Runs the statement with `input` on `sql`, returning its rows; fails with `SqlError`. */
  readonly run: <Row extends object>(
    sql: SqlClient.SqlClient,
    input: StatementInput<P>
  ) => Effect.Effect<ReadonlyArray<Row>, SqlError.SqlError>
}

/** How a fixed statement runs. */
export interface FixedStatementOptions {
  /**
   * Planned by PostgreSQL on every call, with its arguments and the tables'
   * current size (run unprepared), instead of prepared once per connection,
   * where after five calls PostgreSQL keeps a generic plan made with the
   * statistics of that moment. For a statement over a table that starts
   * empty and grows, when each call does enough work that planning it costs
   * little beside it, or that runs rarely (the sweep of expired
   * Idempotency-Key responses, `Idempotency/Repo.ts`; the sweep of deleted
   * apps' deliveries, `Webhooks/Repo.ts`). Default false.
   */
  readonly plannedPerCall?: boolean
}

/**
 * A fixed statement whose parameters are `parameters` (name -> type, in
 * placeholder order) and whose text `write` builds from their placeholders
 * (`$n::type`, usable any number of times), run as `options` say.
 */
export const fixedStatement = <const P extends Record<string, ParameterType>>(
  parameters: P,
  write: (placeholders: { readonly [K in keyof P]: string }) => string,
  options: FixedStatementOptions = {}
): FixedStatement<P> => {
  const names = Object.keys(parameters) as Array<keyof P & string>
  const placeholders = Object.fromEntries(
    names.map((name, index) => [name, `$${index + 1}::${parameters[name]!.replace("?", "")}`])
  ) as { readonly [K in keyof P]: string }
  const text = write(placeholders)
  const values = (input: StatementInput<P>) => names.map((name) => input[name])
  return {
    text,
    values,
    run: <Row extends object>(sql: SqlClient.SqlClient, input: StatementInput<P>) => {
      const statement = sql.unsafe<Row>(text, values(input))
      return options.plannedPerCall === true ? statement.unprepared : statement
    }
  }
}
