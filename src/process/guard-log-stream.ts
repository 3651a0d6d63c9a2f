import { writeSync } from "node:fs";
import { symbols } from "pino";

/** The part of pino's destination (sonic-boom) this module patches. */
interface SonicBoomLike {
  on(event: "error", listener: (error: NodeJS.ErrnoException) => void): unknown;
  write(text: string): unknown;
  flushSync?: () => void;
  end?: () => void;
  destroy?: () => void;
}

/** Destinations {@link guardLogStream} silenced: nothing they hold will ever be written. */
const silencedStreams = new WeakSet<object>();

/** Whether `stream` (a pino logger's destination) was silenced after a failed write. */
export function isSilencedLogStream(stream: object): boolean {
  return silencedStreams.has(stream);
}

/**
 * Keeps a log that cannot be written from stopping the service. pino silences its destination
 * on EPIPE only; any other failed write (EIO once the terminal the server was started from hung
 * up, ENOSPC on a full disk) was raised as an uncaught error, whose fatal line pino then flushed
 * synchronously through sonic-boom, which retries such a write for ever: the server stopped
 * answering, ignored SIGTERM and kept its port, and the requests in flight were never charged.
 * Now such a failure silences the log, as pino does on EPIPE (what cannot be written is dropped),
 * and says so once on stderr. `logger` is a pino logger; other destinations are left as they are.
 */
export function guardLogStream(logger: object): void {
  const stream = (logger as Record<symbol, unknown>)[symbols.streamSym] as Partial<SonicBoomLike> | undefined;
  if (typeof stream?.on !== "function" || typeof stream.write !== "function") return;
  const boom = stream as SonicBoomLike;
  let silenced = false;
  boom.on("error", (error) => {
    if (silenced) return;
    silenced = true;
    silencedStreams.add(boom);
    const noop = () => {};
    boom.write = () => true;
    boom.flushSync = noop;
    boom.end = noop;
    boom.destroy = noop;
    try {
      writeSync(
        2,
        `tollgate: the log cannot be written (${error.code ?? error.message}); logging stops, the server goes on\n`,
      );
    } catch {
      // stderr is gone too (the same terminal): nothing more to say.
    }
  });
}
