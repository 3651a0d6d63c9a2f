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
  error: Error & { code?: string },
  modelsFolder: string,
  options: { done?: string } = {},
): ModelDownloadError {
  const done = options.done === undefined ? "" : `; ${options.done}`;
  // A file where the folder (or one above it) should be: TOLLGATE_MODELS_DIR naming a model file.
  if (error.code === "EEXIST" || error.code === "ENOTDIR") {
    return new ModelDownloadError(
      "not-writable",
      `The models folder ${modelsFolder} is not a folder: a file is in its place, or in the place of a folder above it (${error.message}${done}); set TOLLGATE_MODELS_DIR to a folder (it names the folder models are kept in, not a model file), or move that file away.`,
      { cause: error },
    );
  }
  return new ModelDownloadError(
    "not-writable",
    `The models folder ${modelsFolder} cannot take the file (${error.message}${done}); make the folder (TOLLGATE_MODELS_DIR) writable, with room for the model.`,
    { cause: error },
  );
}
