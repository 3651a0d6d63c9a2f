import { symbols } from "pino";
import { isSilencedLogStream, LOG_WRITE_LIMIT_MS } from "./guard-log-stream.ts";

/** The code of the exit under way: the highest asked for. */
let exitCode = 0;

/** The part of a pino destination (sonic-boom) this module uses. */
interface LogStream {
  write(text: string): unknown;
  once(event: "drain", listener: () => void): unknown;
  destroy?(): unknown;
}

/**
 * Ends the process with `code` (or a higher one asked for meanwhile) once the lines given to
 * `logger` (a pino logger) so far are written, or after {@link LOG_WRITE_LIMIT_MS}. pino writes
 * to stdout asynchronously: at `process.exit` it writes the lines it still holds, but not the
 * rest of a write under way, so a last line longer than the pipe took at once (a crash's, with
 * its stack; a log collector that had fallen behind) lost its end. A write of nothing queues
 * behind the lines before it, and the stream says `drain` once all of them are out (another
 * kind of stream, or a reader that closed the pipe, leaves the limit to end the wait).
 */
export function exitAfterLog(logger: object, code: number): void {
  // Exits asked for meanwhile (a drain that ends while a second signal's exit waits) never
  // lower the code of one asked for before.
  exitCode = Math.max(exitCode, code);
  const exit = () => process.exit(exitCode);
  const stream = (logger as Record<symbol, unknown>)[symbols.streamSym];
  // A log that could not be written was silenced: there is nothing to wait for.
  if (!isLogStream(stream) || isSilencedLogStream(stream)) {
    exit();
    return;
  }
  setTimeout(() => {
    // A reader that takes nothing more (a full pipe): pino's own exit hook would write what it
    // holds synchronously, retrying for ever; a destroyed stream it leaves alone.
    try {
      stream.destroy?.();
    } finally {
      exit();
    }
  }, LOG_WRITE_LIMIT_MS);
  stream.once("drain", exit);
  try {
    stream.write("");
  } catch {
    // Destroyed: nothing more can be written.
    exit();
  }
}

function isLogStream(value: unknown): value is LogStream {
  const stream = value as Partial<LogStream> | null | undefined;
  return typeof stream?.write === "function" && typeof stream.once === "function";
}
