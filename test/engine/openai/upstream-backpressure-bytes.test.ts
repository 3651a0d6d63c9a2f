import { subscribe, unsubscribe } from "node:diagnostics_channel";
import type { ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import type { StreamPart } from "../../../src/engine/engine.ts";
import { until } from "../../support/until.ts";
import {
  chatRequest,
  closeEnginesAndMocks,
  createTestEngine,
  startTestMock,
  textOf,
  upstreamModel,
} from "./engine-helpers.ts";
import { chunk } from "./mock-upstream.ts";

afterEach(closeEnginesAndMocks);

/** Characters of content per event: an event of some 4 KiB, a write of 16 of them: 64 KiB, one socket read. */
const EVENT_TEXT = "abcdefgh".repeat(512);
const WRITE = `data: ${JSON.stringify(chunk({ content: EVENT_TEXT }))}\n\n`.repeat(16);

/** Writes `text`, waiting for the socket to take it (the upstream's own backpressure); false once closed. */
async function write(response: ServerResponse, text: string): Promise<boolean> {
  if (response.destroyed) return false;
  if (response.write(text)) return true;
  await new Promise<void>((resolve) => {
    const done = () => {
      response.off("drain", done);
      response.off("close", done);
      resolve();
    };
    response.on("drain", done);
    response.on("close", done);
  });
  return !response.destroyed;
}

/**
 * An upstream that streams as fast as it is let until `finish` is called, then ends the answer;
 * `contentWritten` counts the characters of content it sent.
 */
function endlessUpstream() {
  let ending = false;
  const state = {
    contentWritten: 0,
    finish: () => {
      ending = true;
    },
  };
  const handler = async (_request: unknown, response: ServerResponse) => {
    response.writeHead(200, { "content-type": "text/event-stream" });
    if (!(await write(response, `data: ${JSON.stringify(chunk({ role: "assistant", content: "" }))}\n\n`)))
      return;
    while (!ending) {
      if (!(await write(response, WRITE))) return;
      state.contentWritten += EVENT_TEXT.length * 16;
    }
    await write(response, `data: ${JSON.stringify(chunk({}, "stop"))}\n\ndata: [DONE]\n\n`);
    response.end();
  };
  return { state, handler };
}

/** The sockets undici opens to `port` (the engine's connections to the upstream), as they connect. */
function watchUpstreamSockets(port: number): { sockets: Socket[]; stop: () => void } {
  const sockets: Socket[] = [];
  const onConnected = (message: unknown) => {
    const socket = (message as { socket: Socket }).socket;
    if (socket.remotePort === port) sockets.push(socket);
  };
  subscribe("undici:client:connected", onConnected);
  return { sockets, stop: () => unsubscribe("undici:client:connected", onConnected) };
}

/** Polls until `condition` holds, or gives up after a while (the test's assertions then fail). */
describe("upstream engine: what a stream that is not read holds", () => {
  it("pauses the upstream after a bounded number of bytes, not pieces, and resumes whole (regression)", async () => {
    const { state, handler } = endlessUpstream();
    const upstream = await startTestMock(handler);
    const watched = watchUpstreamSockets(upstream.port);
    try {
      // A context length of its own: no model list is asked for, on a connection the watch would count.
      const engine = createTestEngine({
        model: upstreamModel([upstream.baseUrl], { contextLength: 100_000 }),
      });
      const prepared = await engine.prepare(chatRequest());
      const batches = prepared.run(new AbortController().signal)[Symbol.asyncIterator]();
      // The client takes the first batch, then stops reading.
      const parts: StreamPart[] = [];
      const first = await batches.next();
      if (first.done !== true) parts.push(...first.value);
      const socket = (): Socket | undefined => watched.sockets[0];
      // Node's socket reads from the kernel only while it holds less than its high-water mark, and
      // undici empties it at once unless the answer is paused: a full socket buffer is a paused
      // answer, which stays so while nobody reads.
      await until(() => {
        const current = socket();
        return current !== undefined && current.readableLength >= current.readableHighWaterMark;
      });
      const current = socket();
      expect(current).toBeDefined();
      if (current === undefined) return;
      expect(current.readableLength).toBeGreaterThanOrEqual(current.readableHighWaterMark);
      // What left the socket for Tollgate: the head and the first piece (one read, at most
      // 64 KiB), the text held unread (64 Ki characters, start-upstream-call.ts) and the piece
      // that crossed that (one more read), some 192 KiB at most. Here 137 KiB; 32 pieces held
      // whatever 32 reads brought: 1.1 MB here, up to 2 MiB.
      const taken = current.bytesRead - current.readableLength;
      expect(taken).toBeLessThanOrEqual(256 * 1024);
      // The client reads again: the upstream resumes, and the answer comes whole.
      state.finish();
      for (let next = await batches.next(); next.done !== true; next = await batches.next())
        parts.push(...next.value);
      expect(textOf(parts)).toHaveLength(state.contentWritten);
      expect(parts.at(-1)).toMatchObject({ type: "finish", reason: "stop" });
    } finally {
      watched.stop();
    }
  });
});
