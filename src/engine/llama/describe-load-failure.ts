import { ModelDownloadError } from "../../models/download/model-download-error.ts";

/**
 * The message API clients get (503 `model_unavailable`) for a model that did not load: what is
 * wrong and the fixes, in general terms. The reason names the model's host and URI, or the file's
 * path on the server, and the fix the models folder or the commands to run there: the operator's
 * business, which stays in the server log (the warning `local model unavailable`). Regression:
 * a missing or broken local file's 503 gave every key holder the server's path and commands.
 */
export function describeLoadFailure(options: {
  modelId: string;
  error: unknown;
  /** The error, when it is one the loader expects (ModelLoadError). */
  expected: Error | undefined;
  /** The download is tried again later (retry-model-download.ts). */
  retrying: boolean;
}): string {
  const { modelId } = options;
  // How to fix it (SPEC §1), in general terms: the log has the host, the URI and the folder.
  if (options.retrying) {
    return `The model '${modelId}' is unavailable: its file is not downloaded yet. To fix it, an operator gives the server network access to the model's host, puts the file in place (\`tollgate models pull ${modelId}\` on a machine with access; the server's log says where), or points the model at a local GGUF file. The server tries again by itself; please retry later.`;
  }
  if (options.expected !== undefined && isDownloadFailure(options.error)) {
    return `The model '${modelId}' is unavailable: its file could not be downloaded. The server's log says why and how to fix it: an operator corrects the model's engine.model (its URI, or the token of a gated repository) or points it at a local GGUF file, then reloads the server.`;
  }
  if (options.expected !== undefined)
    return `The model '${modelId}' is unavailable: its file on the server is missing or cannot be used. The server's log says why and how to fix it: an operator puts a GGUF chat model in place, or points the model's engine.model at another file or a model URI, then reloads the server.`;
  return `The model '${modelId}' is unavailable: its file could not be loaded. The server's log says why: an operator replaces the file with a valid GGUF chat model, or points the model's engine.model at another, then reloads the server.`;
}

function isDownloadFailure(error: unknown): boolean {
  for (let current = error, depth = 0; current instanceof Error && depth < 8; depth++) {
    if (current instanceof ModelDownloadError) return true;
    current = current.cause;
  }
  return false;
}
