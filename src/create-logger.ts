import { type Logger, pino } from "pino";
import { serializeLogError } from "./errors/serialize-log-error.ts";
import { guardLogStream } from "./process/guard-log-stream.ts";
import type { StartServerOptions } from "./server.ts";

/** The server's logger: JSON lines on stdout unless the options say otherwise. */
export function createLogger(options: StartServerOptions): Logger {
  const serializers = { err: serializeLogError, error: serializeLogError };
  const level =
    (options.logger === false ? undefined : options.logger?.level) ?? options.config.logLevel ?? "info";
  const logger =
    options.logger === false
      ? pino({ enabled: false })
      : options.logger?.destination === undefined
        ? pino({ level, serializers })
        : pino({ level, serializers }, options.logger.destination);
  guardLogStream(logger);
  return logger;
}
