/**
 * Why a model download failed. Only `interrupted` and `server-error` are worth retrying at once
 * (a retry resumes from the partial file); the others need the operator: another URI, network
 * access, a token, a writable models folder.
 */
export type ModelDownloadFailure =
  | "unsupported-source"
  | "not-writable"
  | "not-found"
  | "access-denied"
  | "no-matching-file"
  | "unreachable"
  | "interrupted"
  | "server-error"
  | "size-mismatch"
  | "checksum"
  | "invalid-response"
  /** A setting of this machine is wrong (`TOLLGATE_HF_ENDPOINT`). */
  | "misconfigured";

const retryableFailures: ReadonlySet<ModelDownloadFailure> = new Set(["interrupted", "server-error"]);

/** A model file could not be downloaded; `message` says what happened, in one sentence or two. */
export class ModelDownloadError extends Error {
  override readonly name = "ModelDownloadError";
  readonly failure: ModelDownloadFailure;
  /** How long the server asked to be left alone before a retry (`Retry-After`), when it did. */
  readonly retryAfterMilliseconds: number | undefined;
  /**
   * Bytes of the file kept for a resume when the download gave up (set by `downloadFile`; zero
   * when nothing was saved, `undefined` before it reached the file).
   */
  keptBytes: number | undefined = undefined;
  /**
   * The attempt that failed had dropped (or emptied) the partial file, so the next one starts the
   * download over: counted apart from other failures (retry-transient-failures.ts), since a server
   * that sends the file differently each time would otherwise be downloaded again for ever.
   */
  startedOver = false;

  constructor(
    failure: ModelDownloadFailure,
    message: string,
    options: { cause?: unknown; retryAfterMilliseconds?: number | undefined } = {},
  ) {
    super(message, { cause: options.cause });
    this.failure = failure;
    this.retryAfterMilliseconds = options.retryAfterMilliseconds;
  }

  /** Whether trying again may succeed (a broken connection, a 5xx or 429 answer). */
  get retryable(): boolean {
    return retryableFailures.has(this.failure);
  }

  /**
   * Whether the cause may pass by itself, so that a server tries the download again later
   * (retry-model-download.ts): a broken connection, a 5xx or 429 answer, a stall, or a host that
   * cannot be reached (refused, DNS, no route, timeout), which is how a network that is not up yet
   * looks at boot. Not a certificate the machine refuses, nor anything only the operator can
   * change: a 401/403/404, a checksum, a file that is not a GGUF, a full or read-only disk.
   */
  get transient(): boolean {
    if (this.retryable) return true;
    return this.failure === "unreachable" && !hasCertificateCause(this);
  }
}

/** Whether `error`, or an error it was caused by, is a {@link ModelDownloadError} that may pass. */
export function isTransientDownloadFailure(error: unknown): boolean {
  for (let current = error, depth = 0; current instanceof Error && depth < 8; depth++) {
    if (current instanceof ModelDownloadError) return current.transient;
    current = current.cause;
  }
  return false;
}

/** TLS refusals (Node's and OpenSSL's codes): the same answer until someone changes a certificate. */
const certificateCode =
  /CERT|SELF_SIGNED|UNABLE_TO_(GET|VERIFY)|ERR_TLS|ERR_SSL|DEPTH_ZERO|HOSTNAME_MISMATCH/;

function hasCertificateCause(error: Error): boolean {
  for (let current: unknown = error.cause, depth = 0; current instanceof Error && depth < 8; depth++) {
    const code = "code" in current ? current.code : undefined;
    if (typeof code === "string" && certificateCode.test(code)) return true;
    current = current.cause;
  }
  return false;
}
