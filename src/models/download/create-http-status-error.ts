import { ModelDownloadError } from "./model-download-error.ts";
import { redactUrl } from "./redact-url.ts";

/** The error for an HTTP answer that is neither the file nor a redirect. */
export function createHttpStatusError(response: Response, url: URL): ModelDownloadError {
  const status = `${response.status}${response.statusText === "" ? "" : ` ${response.statusText}`}`;
  const shown = redactUrl(url);
  if (response.status === 404 || response.status === 410) {
    return new ModelDownloadError(
      "not-found",
      `${shown} does not exist (HTTP ${status}); check the model URI.`,
    );
  }
  if (response.status === 401 || response.status === 403) {
    return new ModelDownloadError(
      "access-denied",
      `${shown} refused the download (HTTP ${status}); a private or gated Hugging Face repository needs HF_TOKEN set to a token that may read it.`,
    );
  }
  if (response.status === 408 || response.status === 429 || response.status >= 500) {
    return new ModelDownloadError("server-error", `${url.host} answered HTTP ${status}.`);
  }
  return new ModelDownloadError("invalid-response", `${shown} answered HTTP ${status}, not the file.`);
}
