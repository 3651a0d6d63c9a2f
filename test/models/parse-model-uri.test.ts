import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createModelFileName } from "../../src/models/download/create-model-file-name.ts";
import { describeModelUri, type ModelUri, parseModelUri } from "../../src/models/download/parse-model-uri.ts";
import { resolveModelSource } from "../../src/models/resolve-model-source.ts";

function parse(text: string): ModelUri {
  const uri = parseModelUri(text);
  if (uri === undefined) throw new Error(`not a model URI: ${text}`);
  return uri;
}

describe("parseModelUri", () => {
  it("reads hf:ORG/REPO:QUANT, hf:ORG/REPO/FILE and hf:ORG/REPO", () => {
    expect(parse("hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M")).toMatchObject({
      type: "hugging-face",
      organization: "Qwen",
      repository: "Qwen2.5-0.5B-Instruct-GGUF",
      file: { type: "quant", quant: "Q4_K_M" },
    });
    expect(parse("hf:org/repo/sub/model-q8_0.gguf")).toMatchObject({
      file: { type: "path", path: "sub/model-q8_0.gguf" },
    });
    expect(parse("hf:org/repo")).toMatchObject({ file: { type: "only-gguf" } });
  });

  it("reads the hf: scheme in any case, as the same model and file", () => {
    for (const text of ["HF:org/repo:Q4_K_M", "Hf:org/repo/model.gguf", "hF:org/repo"]) {
      const uri = parse(text);
      expect(uri).toMatchObject({ type: "hugging-face", organization: "org", repository: "repo" });
      expect(createModelFileName(uri)).toBe(createModelFileName(parse(`hf:${text.slice(3)}`)));
    }
  });

  it("reads http and https URLs", () => {
    expect(parse("https://example.com/models/a.gguf")).toMatchObject({ type: "url" });
    expect(parse("http://127.0.0.1:8000/a.gguf")).toMatchObject({ type: "url" });
  });

  it("refuses paths, other schemes and malformed hf: URIs", () => {
    for (const text of [
      "./model.gguf",
      "/models/a.gguf",
      "ftp://host/a.gguf",
      "hf:repo-only",
      "hf:org/repo/../x",
    ]) {
      expect(parseModelUri(text), text).toBeUndefined();
    }
  });

  it("shows URLs without credentials or query", () => {
    expect(describeModelUri(parse("https://user:secret@example.com/a.gguf?token=abc"))).toBe(
      "https://example.com/a.gguf?…",
    );
    expect(describeModelUri(parse("hf:org/repo:Q4_K_M"))).toBe("hf:org/repo:Q4_K_M");
  });
});

describe("createModelFileName", () => {
  it("is readable, stable, and the same for a quantisation in any case", () => {
    const name = createModelFileName(parse("hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M"));
    expect(name).toMatch(/^hf_Qwen_Qwen2\.5-0\.5B-Instruct-GGUF_Q4_K_M-[0-9a-f]{8}\.gguf$/);
    expect(createModelFileName(parse("hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:q4_k_m"))).toBe(name);
    expect(createModelFileName(parse("hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q8_0"))).not.toBe(name);
  });

  it("names URLs after their host and file, distinct per URL", () => {
    const first = createModelFileName(parse("https://example.com/models/My Model.gguf?v=1"));
    const second = createModelFileName(parse("https://example.com/models/My Model.gguf?v=2"));
    expect(first).toMatch(/^example\.com_My_Model-[0-9a-f]{8}\.gguf$/);
    expect(second).not.toBe(first);
  });

  it("names a signed URL after its file, whatever its signature", () => {
    const signed = (signature: string) =>
      createModelFileName(
        parse(
          `https://bucket.s3.amazonaws.com/models/a.gguf?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA%2F20261127&X-Amz-Date=20261127T000000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host&X-Amz-Signature=${signature}`,
        ),
      );
    expect(signed("aaaa")).toBe(signed("bbbb"));
    expect(signed("aaaa")).toBe(createModelFileName(parse("https://bucket.s3.amazonaws.com/models/a.gguf")));
    const sas = (sig: string) =>
      createModelFileName(
        parse(`https://acct.blob.core.windows.net/c/a.gguf?sv=2024-01-01&se=2026-12-01&sr=b&sp=r&sig=${sig}`),
      );
    expect(sas("one")).toBe(sas("two"));
    // Short names that a signing scheme uses still say which file it is on a URL no scheme signed.
    expect(createModelFileName(parse("https://example.com/get?sv=1"))).not.toBe(
      createModelFileName(parse("https://example.com/get?sv=2")),
    );
    expect(createModelFileName(parse("https://example.com/get?id=1&signature=a"))).not.toBe(
      createModelFileName(parse("https://example.com/get?id=1&signature=b")),
    );
    // Credentials stay in the name, as before: a changed password is another URL.
    expect(createModelFileName(parse("https://user:old@example.com/a.gguf"))).not.toBe(
      createModelFileName(parse("https://user:new@example.com/a.gguf")),
    );
    // Parameters that may say which file it is still do.
    expect(createModelFileName(parse("https://example.com/get?id=1&X-Amz-Signature=a"))).not.toBe(
      createModelFileName(parse("https://example.com/get?id=2&X-Amz-Signature=a")),
    );
    // A URL with nothing to take out keeps the name earlier versions gave it.
    expect(createModelFileName(parse("https://example.com/models/a.gguf"))).toBe(
      "example.com_a-5d5f23d9.gguf",
    );
    expect(createModelFileName(parse("http://u:p@127.0.0.1:18731/m/tiny.gguf"))).toBe(
      "127.0.0.1_tiny-0abca6d4.gguf",
    );
  });
});

describe("resolveModelSource", () => {
  it("keeps file paths and maps URIs into the models folder", () => {
    expect(resolveModelSource("/srv/models/a.gguf", { modelsFolder: "/m" })).toEqual({
      type: "file",
      path: "/srv/models/a.gguf",
    });
    const remote = resolveModelSource("hf:org/repo:Q4_K_M", { modelsFolder: "/m" });
    expect(remote).toMatchObject({ type: "remote", uri: { type: "hugging-face" } });
    expect(remote.type === "remote" && remote.path).toBe(
      join("/m", createModelFileName(parse("hf:org/repo:Q4_K_M"))),
    );
    expect(resolveModelSource("s3://bucket/a.gguf", { modelsFolder: "/m" })).toEqual({
      type: "unsupported",
      text: "s3://bucket/a.gguf",
    });
  });
});
