import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { downloadFile, UNVALIDATED_OVERLAP_BYTES } from "../../src/models/download/download-file.ts";
import { makeTemporaryDirectory } from "../store/temporary-directory.ts";
import { createModelBytes } from "./model-file-server.ts";

const folder = makeTemporaryDirectory();
let model: { bytes: Buffer; sha256: string };
let servers: RestartingServer[] = [];

beforeAll(async () => {
  model = await createModelBytes(7);
});

afterEach(async () => {
  await Promise.all(servers.map((server) => server.stop()));
  servers = [];
});

/**
 * A file server that supports `Range` and can be stopped (its connections cut) and started
 * again on the same port, as a server that restarts does. `cutAfterBytes`: the first answer
 * stops the whole server after that many body bytes, mid-file.
 */
interface RestartingServer {
  url: string;
  ranges: (string | undefined)[];
  start(): Promise<void>;
  stop(): Promise<void>;
}

async function startRestartingServer(options: { cutAfterBytes?: number } = {}): Promise<RestartingServer> {
  const ranges: (string | undefined)[] = [];
  let server: Server | undefined;
  let port = 0;
  let cut = options.cutAfterBytes;
  const stop = () =>
    new Promise<void>((resolve) => {
      const running = server;
      server = undefined;
      if (running === undefined) return resolve();
      running.closeAllConnections();
      running.close(() => resolve());
    });
  const start = () =>
    new Promise<void>((resolve) => {
      const created = createServer((request, response) => {
        ranges.push(request.headers.range);
        const match = /^bytes=(\d+)-$/.exec(request.headers.range ?? "");
        const offset = match === null ? 0 : Number(match[1]);
        const body = model.bytes.subarray(offset);
        const total = model.bytes.length;
        response.writeHead(match === null ? 200 : 206, {
          "content-type": "application/octet-stream",
          etag: '"v1"',
          "content-length": String(body.length),
          ...(match === null ? {} : { "content-range": `bytes ${offset}-${total - 1}/${total}` }),
        });
        if (cut !== undefined) {
          const sent = cut;
          cut = undefined;
          // The bytes so far reach the client, then the server goes away, mid-file.
          response.write(body.subarray(0, sent), () => void stop());
          return;
        }
        response.end(body);
      });
      server = created;
      created.listen(port, "127.0.0.1", () => {
        port = (created.address() as AddressInfo).port;
        resolve();
      });
    });
  await start();
  const restarting = {
    url: `http://127.0.0.1:${port}/model.gguf`,
    ranges,
    start,
    stop,
  };
  servers.push(restarting);
  return restarting;
}

function sha256(bytes: Buffer): string {
  return createHash("sha256").update(bytes).digest("hex");
}

describe("downloadFile: a file server that restarts", () => {
  it("regression: finishes the file when the server goes away mid-file and is back 1.5 s later (the refused reconnects were fatal)", async () => {
    const server = await startRestartingServer({ cutAfterBytes: 1_000_000 });
    const destination = join(folder, "restarted.gguf");
    const notices: string[] = [];
    let restarted: Promise<void> | undefined;
    const download = downloadFile({
      url: server.url,
      destination,
      // Retries after 0.25, 0.5, 1 and 2 s: the third comes after the server is back.
      retryDelayMilliseconds: 250,
      stallTimeoutMilliseconds: 5_000,
      onNotice: (message) => {
        notices.push(message);
        restarted ??= delay(1_500).then(server.start);
      },
    });
    const file = await download.finally(() => restarted);
    expect(file.bytes).toBe(model.bytes.length);
    expect(sha256(await readFile(destination))).toBe(model.sha256);
    expect(existsSync(`${destination}.partial`)).toBe(false);
    expect(
      notices.some((message) =>
        /Cannot reach 127\.0\.0\.1:\d+ again .*ECONNREFUSED.*Retrying in/.test(message),
      ),
    ).toBe(true);
    expect(server.ranges[0]).toBeUndefined();
    expect(server.ranges.at(-1)).toMatch(/^bytes=[1-9]\d*-$/);
  });

  it("resumes a partial file of an earlier run when the server refuses at first and then comes back", async () => {
    const server = await startRestartingServer();
    await server.stop();
    const destination = join(folder, "resumed.gguf");
    await writeFile(`${destination}.partial`, model.bytes.subarray(0, 2_000_000));
    const back = delay(600).then(server.start);
    const file = await downloadFile({
      url: server.url,
      destination,
      retryDelayMilliseconds: 250,
      stallTimeoutMilliseconds: 5_000,
    }).finally(() => back);
    expect(file.bytes).toBe(model.bytes.length);
    expect(sha256(await readFile(destination))).toBe(model.sha256);
    expect(server.ranges).toEqual([`bytes=${2_000_000 - UNVALIDATED_OVERLAP_BYTES}-`]);
  });
});
