/**
 * Downloads go through an undici agent of their own, never the process's global dispatcher:
 * Node's bundled undici (24.21) and the one this project depends on share that dispatcher, and
 * when Node's made it first, a server closing the connection while the download's reader was
 * paused crashed the process with an uncatchable assertion (nodejs/undici#5360), seen as an
 * uncaught exception in the cut-short download tests about one run in four.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { type Dispatcher, getGlobalDispatcher, MockAgent, setGlobalDispatcher } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { downloadFetch } from "../../src/models/download/download-fetch.ts";

let server: Server;
let previous: Dispatcher;

beforeAll(async () => {
  server = createServer((_request, response) => response.end("model bytes"));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  previous = getGlobalDispatcher();
  // A global dispatcher that refuses every connection: a download that used it would fail.
  const refusing = new MockAgent();
  refusing.disableNetConnect();
  setGlobalDispatcher(refusing);
});

afterAll(async () => {
  setGlobalDispatcher(previous);
  await new Promise((resolve) => server.close(resolve));
});

describe("downloadFetch", () => {
  it("uses an agent of its own, whatever the global dispatcher is", async () => {
    const { port } = server.address() as AddressInfo;
    const response = await downloadFetch(new URL(`http://127.0.0.1:${port}/model.gguf`), {});
    expect(response.status).toBe(200);
    expect(await response.text()).toBe("model bytes");
  });
});
