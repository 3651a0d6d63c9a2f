import { ModelDownloadError } from "../../models/download/model-download-error.ts";
import { redactUrlsInText } from "../../models/download/redact-url.ts";

/**
 * The message API clients get (503 `model_unavailable`) for a model that did not load. A file
 * that could not be downloaded is said to be so, with the fixes in general terms: the reason names
 * the model's host and URI and the fix names the models folder, which are the operator's business
 * and stay in the server log (the warning `local model unavailable`). Another expected failure (`expected`, a
 * local file missing or broken) says how to fix it; anything else sends to the log.
 */
export function describeLoadFailure(options: {
  modelId: string;
  /** `engine.model` as configured. */
  source: string;
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
    return `The model '${modelId}' is unavailable. ${options.expected.message}`;
  return `The model '${modelId}' is unavailable: its file '${redactUrlsInText(options.source)}' could not be loaded. Check the server log, and replace the file with a valid GGUF chat model (\`tollgate models pull\`).`;
}

function isDownloadFailure(error: unknown): boolean {
  for (let current = error, depth = 0; current instanceof Error && depth < 8; depth++) {
    if (current instanceof ModelDownloadError) return true;
    current = current.cause;
  }
  return false;
}
