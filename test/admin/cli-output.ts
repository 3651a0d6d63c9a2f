import type { OutputSink } from "../../src/admin/cli-error.ts";

/** An output sink that keeps the lines a command writes. */
export function collectOutput(): OutputSink & { lines: string[] } {
  const lines: string[] = [];
  return { lines, write: (line) => lines.push(line) };
}
