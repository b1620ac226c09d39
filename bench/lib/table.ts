/** Plain-text and markdown tables for benchmark output. */

export type Cell = string | number | undefined

export interface Column {
  readonly header: string
  /** Right-aligned (numbers) unless "left". */
  readonly align?: "left" | "right"
}

/** A number with `digits` decimals; "-" for undefined/NaN. */
export const fixed = (value: number | undefined, digits = 1): string =>
  value === undefined || Number.isNaN(value) ? "-" : value.toFixed(digits)

const text = (cell: Cell) => (cell === undefined ? "-" : String(cell))

/** Columns padded to their widest cell, a rule under the header. */
export const formatTable = (columns: ReadonlyArray<Column>, rows: ReadonlyArray<ReadonlyArray<Cell>>): string => {
  const widths = columns.map((column, i) => Math.max(column.header.length, ...rows.map((row) => text(row[i]).length)))
  const line = (cells: ReadonlyArray<string>) =>
    cells
      .map((cell, i) => (columns[i]!.align === "left" ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!)))
      .join("  ")
      .trimEnd()
  return [
    line(columns.map((column) => column.header)),
    line(widths.map((width) => "-".repeat(width))),
    ...rows.map((row) => line(columns.map((_, i) => text(row[i]))))
  ].join("\n")
}

/** The same table as GitHub markdown. */
export const markdownTable = (columns: ReadonlyArray<Column>, rows: ReadonlyArray<ReadonlyArray<Cell>>): string =>
  [
    `| ${columns.map((column) => column.header).join(" | ")} |`,
    `| ${columns.map((column) => (column.align === "left" ? ":---" : "---:")).join(" | ")} |`,
    ...rows.map((row) => `| ${columns.map((_, i) => text(row[i]).replace(/\|/g, "\\|")).join(" | ")} |`)
  ].join("\n")
