import { describe, expect, it } from "vitest";
import { ModelLoadError } from "../../src/engine/llama/load-llama-model.ts";
import {
  isTransientDownloadFailure,
  ModelDownloadError,
} from "../../src/models/download/model-download-error.ts";

/** A fetch failure as undici throws it: a TypeError whose cause carries the system's code. */
function fetchFailure(code: string): Error {
  return new TypeError("fetch failed", { cause: Object.assign(new Error(code), { code }) });
}

/** As the engine sees it: the loader's error, caused by ensureModelFile's, caused by the downloader's. */
function asLoadError(inner: ModelDownloadError): ModelLoadError {
  const wrapped = new ModelDownloadError(
    inner.failure,
    `Its file could not be downloaded: ${inner.message}`,
    {
      cause: inner,
    },
  );
  return new ModelLoadError(wrapped.message, { cause: wrapped });
}

describe("isTransientDownloadFailure: which failed downloads a server tries again by itself", () => {
  it("tries again after a refused connection, a DNS failure, a broken connection, a 5xx or a 429", () => {
    for (const code of ["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "UND_ERR_CONNECT_TIMEOUT"]) {
      const error = new ModelDownloadError("unreachable", `Cannot reach host (${code}).`, {
        cause: fetchFailure(code),
      });
      expect(isTransientDownloadFailure(asLoadError(error))).toBe(true);
    }
    expect(isTransientDownloadFailure(asLoadError(new ModelDownloadError("interrupted", "stalled")))).toBe(
      true,
    );
    expect(isTransientDownloadFailure(asLoadError(new ModelDownloadError("server-error", "HTTP 503")))).toBe(
      true,
    );
  });

  it("does not try again what only the operator can mend", () => {
    for (const failure of [
      "not-found",
      "access-denied",
      "checksum",
      "size-mismatch",
      "invalid-response",
      "not-writable",
      "no-matching-file",
      "misconfigured",
      "unsupported-source",
    ] as const) {
      expect(isTransientDownloadFailure(asLoadError(new ModelDownloadError(failure, failure)))).toBe(false);
    }
    const certificate = new ModelDownloadError("unreachable", "Cannot reach host (certificate).", {
      cause: fetchFailure("UNABLE_TO_VERIFY_LEAF_SIGNATURE"),
    });
    expect(isTransientDownloadFailure(asLoadError(certificate))).toBe(false);
    // A file that is there but is no GGUF, or any error that is not a download's.
    expect(isTransientDownloadFailure(new ModelLoadError("not a GGUF file"))).toBe(false);
    expect(isTransientDownloadFailure(new Error("ECONNREFUSED"))).toBe(false);
  });
});
