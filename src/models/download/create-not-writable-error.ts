import { ModelDownloadError } from "./model-download-error.ts";

/** A file-system error (`EACCES`, `ENOSPC`, ...), not one of Node's own `ERR_*` codes. */
export function isSystemError(error: unknown): error is Error & { code: string } {
  return (
    error instanceof Error &&
    "code" in error &&
    typeof error.code === "string" &&
    /^E[A-Z]+$/.test(error.code)
  );
}

/**
 * The error for a models folder that cannot take the file (full, read-only, not ours): not
 * retried, since only the operator can make room or change the permissions. `done` says what was
 * done about it, after the system error's text.
 */
export function createNotWritableError(
  error: Error,
  modelsFolder: string,
  options: { done?: string } = {},
): ModelDownloadError {
  const done = options.done === undefined ? "" : `; ${options.done}`;
  return new ModelDownloadError(
    "not-writable",
    `The models folder ${modelsFolder} cannot take the file (${error.message}${done}); make the folder (TOLLGATE_MODELS_DIR) writable, with room for the model.`,
    { cause: error },
  );
}
