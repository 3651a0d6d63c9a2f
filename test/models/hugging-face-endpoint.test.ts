import { describe, expect, it } from "vitest";
import { resolveHuggingFaceEndpoint } from "../../src/models/download/hugging-face-endpoint.ts";
import { ModelDownloadError } from "../../src/models/download/model-download-error.ts";

describe("resolveHuggingFaceEndpoint", () => {
  it("takes huggingface.co by default, a mirror from TOLLGATE_HF_ENDPOINT, and HF_TOKEN", () => {
    expect(resolveHuggingFaceEndpoint({})).toEqual({ baseUrl: "https://huggingface.co", token: undefined });
    expect(
      resolveHuggingFaceEndpoint({ TOLLGATE_HF_ENDPOINT: "http://mirror.local/hf/", HF_TOKEN: "hf_x" }),
    ).toEqual({ baseUrl: "http://mirror.local/hf", token: "hf_x" });
  });

  it.each(["huggingface.co", "ftp://mirror.local", "http//mirror"])(
    "names the variable when it is not an http(s) URL: %s (regression: 'Invalid URL', or a models folder to make writable)",
    (value) => {
      let thrown: unknown;
      try {
        resolveHuggingFaceEndpoint({ TOLLGATE_HF_ENDPOINT: value });
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(ModelDownloadError);
      expect((thrown as ModelDownloadError).message).toBe(
        `TOLLGATE_HF_ENDPOINT must be an http:// or https:// URL such as https://huggingface.co (got ${JSON.stringify(value)}); fix or unset it.`,
      );
    },
  );

  it("refuses a user and password in the URL, without showing them, and says to use HF_TOKEN", () => {
    let thrown: unknown;
    try {
      resolveHuggingFaceEndpoint({ TOLLGATE_HF_ENDPOINT: "https://me:s3cret@mirror.local/hf" });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ModelDownloadError);
    const message = (thrown as ModelDownloadError).message;
    expect(message).toMatch(/holds a user and password .* HF_TOKEN .* such as https:\/\/mirror\.local\.$/);
    expect(message).not.toContain("s3cret");
  });

  // Regression: the value was cut at 77 code units, which could split an emoji and show "\ud83d".
  it("shows the start of a long value without cutting an emoji in half", () => {
    expect(() =>
      resolveHuggingFaceEndpoint({ TOLLGATE_HF_ENDPOINT: `${"x".repeat(76)}😀${"y".repeat(10)}` }),
    ).toThrow(`(got "${"x".repeat(76)}..."); fix or unset it.`);
  });
});
