import { Writable } from "node:stream";

/**
 * A destination for a server's JSON log (`startServer({ logger: { destination } })`) that parses
 * each line into `lines` (a new array, or the one given), as it is written.
 */
export function collectLogLines<Line = Record<string, unknown>>(
  lines: Line[] = [],
): { lines: Line[]; destination: Writable } {
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split("\n")) if (line !== "") lines.push(JSON.parse(line) as Line);
      done();
    },
  });
  return { lines, destination };
}
