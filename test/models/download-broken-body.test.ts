import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { downloadFile } from "../../src/models/download/download-file.ts";
import { ModelDownloadError } from "../../src/models/download/model-download-error.ts";
import { makeTemporaryDirectory } from "../store/temporary-directory.ts";

const folder = makeTemporaryDirectory();
let server: ChildProcess;
let url: string;

beforeAll(async () => {
  // Its own process, so the bytes arrive as fast as a remote server sends them.
  server = spawn(process.execPath, [join(import.meta.dirname, "half-body-server.ts")], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const [data] = (await once(server.stdout!, "data")) as [Buffer];
  url = `http://127.0.0.1:${data.toString().trim()}/model.gguf`;
});

afterAll(() => {
  server?.kill();
});

it("reports a connection dropped mid-body as interrupted, every time, without crashing the process", async () => {
  // Node's bundled fetch (24.21) failed an internal assertion here, now and then, which no catch
  // could stop: the process died. Many tries make that near certain to show.
  for (let attempt = 0; attempt < 25; attempt++) {
    const error = await downloadFile({
      url,
      destination: join(folder, `model-${attempt}.gguf`),
      maxAttempts: 1,
      retryDelayMilliseconds: 1,
      stallTimeoutMilliseconds: 5_000,
      onProgress: () => {},
    }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ModelDownloadError);
    expect((error as ModelDownloadError).failure).toBe("interrupted");
  }
});
