import { writeSync } from "node:fs";
import { symbols } from "pino";

/** The part of pino's destination (sonic-boom) this module patches. */
interface SonicBoomLike {
  on(event: "error", listener: (error: NodeJS.ErrnoException) => void): unknown;
  emit(event: "error", error: Error): unknown;
  write(text: string): unknown;
  flushSync?: () => void;
  end?: () => void;
  destroy?: () => void;
  /** Asked, at each write the reader's full pipe refused, whether to try again. */
  retryEAGAIN?: (...args: unknown[]) => boolean;
}

/**
 * How long a log reader that takes nothing more (a full pipe) is waited for: by an exit, for its
 * lines to be written (exit-after-log.ts), and by a synchronous flush (pino's, after each line at
 * level fatal and at the process's exit). It must not hold the process: short beside
 * `docker stop`'s 10 s.
 */
export const LOG_WRITE_LIMIT_MS = 1_000;

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
  boundSyncFlush(boom);
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

/**
 * Bounds sonic-boom's synchronous flush by {@link LOG_WRITE_LIMIT_MS}: it retried a write that a
 * full pipe refused (EAGAIN) every 100 ms for ever. pino flushes so after every line at level
 * fatal: a crash while the log's reader took nothing more (a stalled collector) hung the process
 * at its fatal line, its running requests never stopped nor charged, whenever another line was
 * still being written at the crash (the fatal one then waited in the queue, which the flush
 * writes). Past the limit the flush fails: pino ignores that, and the stream, which cannot be
 * written now and no longer knows how much of its line went out, is silenced as a failed write
 * silences it (its write under way stops retrying). Writes that are not synchronous keep
 * retrying as before.
 */
function boundSyncFlush(boom: SonicBoomLike): void {
  const flushSync = boom.flushSync;
  if (typeof flushSync !== "function") return;
  let deadline: number | undefined;
  // A silenced stream stops retrying the write under way too: nothing keeps the process up.
  boom.retryEAGAIN = () =>
    !silencedStreams.has(boom) && (deadline === undefined || performance.now() < deadline);
  boom.flushSync = () => {
    deadline = performance.now() + LOG_WRITE_LIMIT_MS;
    try {
      flushSync.call(boom);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "EAGAIN") boom.emit("error", error as Error);
      throw error;
    } finally {
      deadline = undefined;
    }
  };
}
