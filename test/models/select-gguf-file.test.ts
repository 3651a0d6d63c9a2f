import { describe, expect, it } from "vitest";
import { ModelDownloadError } from "../../src/models/download/model-download-error.ts";
import { type RepositoryFile, selectGgufFile } from "../../src/models/download/select-gguf-file.ts";

const files: RepositoryFile[] = [
  "README.md",
  "qwen2.5-0.5b-instruct-q4_k_m.gguf",
  "qwen2.5-0.5b-instruct-q4_k.gguf",
  "qwen2.5-0.5b-instruct-Q8_0.gguf",
  "mmproj-qwen-q8_0.gguf",
  "big/qwen-q6_k-00001-of-00002.gguf",
  "big/qwen-q6_k-00002-of-00002.gguf",
].map((path) => ({ path, size: undefined, sha256: undefined }));

function select(quant: string): string {
  return selectGgufFile({ repository: "org/repo", files, selector: { type: "quant", quant } }).path;
}

function failure(action: () => unknown): ModelDownloadError {
  try {
    action();
  } catch (error) {
    if (error instanceof ModelDownloadError) return error;
    throw error;
  }
  throw new Error("expected a ModelDownloadError");
}

describe("selectGgufFile", () => {
  it("matches the quantisation as a whole word, case-insensitively", () => {
    expect(select("Q4_K_M")).toBe("qwen2.5-0.5b-instruct-q4_k_m.gguf");
    expect(select("q4_k")).toBe("qwen2.5-0.5b-instruct-q4_k.gguf");
    expect(select("q8_0")).toBe("qwen2.5-0.5b-instruct-Q8_0.gguf");
  });

  it("says which files exist when none matches", () => {
    const error = failure(() => select("Q2_K"));
    expect(error.failure).toBe("no-matching-file");
    expect(error.message).toMatch(
      /has no file for the quantisation Q2_K\. Its GGUF files are: .*q4_k_m\.gguf/,
    );
    expect(error.message).not.toContain("mmproj");
  });

  it("refuses a model split into parts", () => {
    expect(failure(() => select("Q6_K")).message).toMatch(/split into parts/);
  });

  it("asks for a file name when several match", () => {
    const error = failure(() =>
      selectGgufFile({
        repository: "org/repo",
        files: [
          { path: "a-q4_0.gguf", size: undefined, sha256: undefined },
          { path: "b-q4_0.gguf", size: undefined, sha256: undefined },
        ],
        selector: { type: "quant", quant: "Q4_0" },
      }),
    );
    expect(error.message).toMatch(/several files .*a-q4_0\.gguf, b-q4_0\.gguf.*hf:org\/repo\/FILE/);
  });

  it("takes a named file, or the only GGUF file", () => {
    expect(
      selectGgufFile({
        repository: "org/repo",
        files,
        selector: { type: "path", path: "big/qwen-q6_k-00001-of-00002.gguf" },
      }).path,
    ).toBe("big/qwen-q6_k-00001-of-00002.gguf");
    const single = [files[0], files[1]].filter((file) => file !== undefined);
    expect(
      selectGgufFile({ repository: "org/repo", files: single, selector: { type: "only-gguf" } }).path,
    ).toBe("qwen2.5-0.5b-instruct-q4_k_m.gguf");
  });
});
