import { pino } from "pino";
import { serializeLogError } from "../errors/serialize-log-error.ts";
import { exitAfterLog } from "./exit-after-log.ts";
import { guardLogStream } from "./guard-log-stream.ts";

/**
 * How long a server that crashed has to stop (its running requests cut at once, settled, its
 * store closed) before it exits all the same: it may be stuck in the state that made it fail.
 */
export const CRASH_STOP_LIMIT_MS = 5_000;

/** The part of a pino logger a crash is told with. */
interface CrashLogger {
  fatal(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

export interface CrashHandling {
  /**
   * The server's logger exists (it is starting): a crash is logged through it from now on. A
   * logger of the crash's own beside it would write its line to the same stdout while this one
   * still writes lines it holds, and the two interleave: the crash's line, longer than a pipe
   * takes at once, was cut by another line and no longer parsed as JSON.
   */
  logging(logger: CrashLogger): void;
  /** The server started: a crash is logged through its logger, and stops it before the exit. */
  serving(logger: CrashLogger, stop: () => Promise<void>): void;
  /** True once a crash began: the process is on its way out with code 1. */
  readonly crashed: boolean;
}

/**
 * Makes an uncaught exception end the process as it does without a handler (code 1, nothing
 * resumes), but said as one JSON line at level fatal among the server's other lines, rather than
 * Node's plain-text stack on stderr that a log collector takes for another format; the error
 * goes through the logs' serializer, which leaves out what must not be logged (a Redis
 * password). A promise rejection no one handles comes here too (Node's default,
 * `--unhandled-rejections=throw`, raises it as an uncaught exception with that origin): a crash
 * as well, and an operator's other `--unhandled-rejections` mode is kept.
 *
 * Once the server runs, a crash stops it first, bounded by {@link CRASH_STOP_LIMIT_MS}: its
 * running requests are cut and charged, where an exit at once left them unpaid. Another error
 * meanwhile exits at once.
 */
export function exitOnCrash(): CrashHandling {
  let logger: CrashLogger | undefined;
  let stop: (() => Promise<void>) | undefined;
  let crashed = false;
  process.on("uncaughtException", (error, origin) => {
    // Before the server made its logger: a logger of its own, as that one would be.
    if (logger === undefined) {
      const own = pino({ serializers: { err: serializeLogError, error: serializeLogError } });
      guardLogStream(own);
      logger = own;
    }
    const log = logger;
    if (crashed) {
      log.fatal({ err: error, origin }, "another uncaught error while stopping after a crash; exiting now");
      exitAfterLog(log, 1);
      return;
    }
    crashed = true;
    log.fatal(
      { err: error, origin },
      origin === "unhandledRejection"
        ? "unhandled promise rejection; stopping the server"
        : "uncaught exception; stopping the server",
    );
    if (stop === undefined) {
      exitAfterLog(log, 1);
      return;
    }
    const limit = setTimeout(() => exitAfterLog(log, 1), CRASH_STOP_LIMIT_MS);
    stop()
      .catch((stopError: unknown) => log.error({ err: stopError }, "stopping after a crash failed"))
      .finally(() => {
        clearTimeout(limit);
        exitAfterLog(log, 1);
      });
  });
  return {
    logging(serverLogger) {
      logger = serverLogger;
    },
    serving(serverLogger, serverStop) {
      logger = serverLogger;
      stop = serverStop;
    },
    get crashed() {
      return crashed;
    },
  };
}
