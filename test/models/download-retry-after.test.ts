import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseRetryAfter } from "../../src/models/download/create-http-status-error.ts";
import { downloadFile } from "../../src/models/download/download-file.ts";
import { makeTemporaryDirectory } from "../store/temporary-directory.ts";
import { createModelBytes, type ModelFileServer, startModelFileServer } from "./model-file-server.ts";

const folder = makeTemporaryDirectory();
let server: ModelFileServer;
let model: { bytes: Buffer; sha256: string };

beforeAll(async () => {
  server = await startModelFileServer();
  model = await createModelBytes(8);
});

afterAll(async () => {
  await server?.close();
});

describe("Retry-After", () => {
  it("waits as long as a 429 answer asks before retrying", async () => {
    server.files.set("/files/busy.gguf", {
      bytes: model.bytes,
      statusCode: 429,
      retryAfter: "1",
      statusCount: 1,
    });
    const destination = join(folder, "busy.gguf");
    const notices: string[] = [];
    const started = Date.now();
    await downloadFile({
      url: `${server.baseUrl}/files/busy.gguf`,
      destination,
      retryDelayMilliseconds: 1,
      onNotice: (message) => notices.push(message),
    });
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
    expect(notices[0]).toMatch(/answered HTTP 429 Too Many Requests\. Retrying in 1 s \(attempt 2 of 5\)\.$/);
    expect((await readFile(destination)).equals(model.bytes)).toBe(true);
  });

  it("reads seconds and HTTP dates, capped at 60 s", () => {
    const now = Date.parse("2026-01-01T00:00:00Z");
    expect(parseRetryAfter("5", now)).toBe(5000);
    expect(parseRetryAfter("120", now)).toBe(60_000);
    expect(parseRetryAfter("Thu, 01 Jan 2026 00:00:10 GMT", now)).toBe(10_000);
    expect(parseRetryAfter("Wed, 31 Dec 2025 23:59:00 GMT", now)).toBe(0);
    expect(parseRetryAfter("soon", now)).toBeUndefined();
    expect(parseRetryAfter(null, now)).toBeUndefined();
  });
});

describe("a download refused for want of credentials", () => {
  // Regression: a plain URL's 401 said only that a Hugging Face repository needs HF_TOKEN, which
  // is never sent to another host.
  it("says what credentials each kind of server takes", async () => {
    server.files.set("/files/private.gguf", { bytes: model.bytes, statusCode: 401, statusCount: 1 });
    const error = await downloadFile({
      url: `${server.baseUrl}/files/private.gguf`,
      destination: join(folder, "private.gguf"),
    }).catch((caught: unknown) => caught);
    expect((error as Error).message).toMatch(
      /refused the download \(HTTP 401[^)]*\): it needs credentials that may read it\. From a Hugging Face repository, private or gated \(accept its licence on the hub first\), set HF_TOKEN .*; from another server, write its user and password in the URL \(https:\/\/user:password@host\/\.\.\.\) or use a signed URL\.$/,
    );
  });
});
