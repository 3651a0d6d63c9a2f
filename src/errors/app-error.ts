import { type ErrorCode, errorCatalog } from "./error-catalog.ts";

/** Options of an {@link AppError} beyond its code and message. */
export interface AppErrorOptions {
  /** The offending request field with its path (`messages[0].role`), or `undefined`. */
  param?: string;
  /** Seconds after which a retry may succeed; sent as `retry-after` on 429 and 503. */
  retryAfterSeconds?: number;
  /**
   * `false` for a request that no retry can help, whatever its code usually means (a 429 for a
   * request larger than the key's whole token rate): the catalogue's flag otherwise.
   */
  retryable?: false;
  /** The underlying failure, for logs only: never sent to the client. */
  cause?: unknown;
}

/**
 * The one error type every layer throws for a failure the client should see. The message is
 * shown to the client as it is: say what was wrong and how to fix it, never a secret.
 */
export class AppError extends Error {
  readonly code: ErrorCode;
  readonly param: string | undefined;
  readonly retryAfterSeconds: number | undefined;
  readonly #retryable: boolean | undefined;

  constructor(code: ErrorCode, message: string, options: AppErrorOptions = {}) {
    super(message, { cause: options.cause });
    this.name = "AppError";
    this.code = code;
    this.param = options.param;
    this.retryAfterSeconds = options.retryAfterSeconds;
    this.#retryable = options.retryable;
  }

  get status(): number {
    return errorCatalog[this.code].status;
  }

  get type(): string {
    return errorCatalog[this.code].type;
  }

  get retryable(): boolean {
    return this.#retryable ?? errorCatalog[this.code].retryable;
  }
}

/** True for an {@link AppError}. */
export function isAppError(value: unknown): value is AppError {
  return value instanceof AppError;
}

/**
 * `error` said again with some of its parts changed (its message, its advice on retrying), the
 * rest kept, `error` its cause; `error` itself when nothing changes. A `retryable: true` drops a
 * `retryable: false` that the code does not imply; a `retryAfterSeconds` given as `undefined`
 * drops the pause.
 */
export function reviseAppError(
  error: AppError,
  changes: { message?: string; retryAfterSeconds?: number | undefined; retryable?: boolean },
): AppError {
  const retryAfterSeconds =
    "retryAfterSeconds" in changes ? changes.retryAfterSeconds : error.retryAfterSeconds;
  const retryable = changes.retryable ?? error.retryable;
  const message = changes.message ?? error.message;
  if (
    message === error.message &&
    retryAfterSeconds === error.retryAfterSeconds &&
    retryable === error.retryable
  )
    return error;
  return new AppError(error.code, message, {
    ...(error.param === undefined ? {} : { param: error.param }),
    ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds }),
    ...(retryable ? {} : { retryable: false }),
    cause: error,
  });
}
