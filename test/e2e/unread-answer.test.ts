/**
 * Regression: a client that sent a request for a whole JSON answer and then read nothing held
 * the answer's memory and its connection for as long as it liked, and a stream it pipelined
 * behind that request on the same connection held its reservation and its upstream call too
 * (the stream's own stall only counts once it has the connection). Now an answer left unread
 * for the stall timeout closes the connection, as an unread stream always did; a client that
 * reads slowly but steadily still gets its answer whole.
 */
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningServer, startServer } from "../../src/server.ts";
import { openStore } from "../../src/store/open-store.ts";
import type { Store } from "../../src/store/store.ts";
import {
  type MockUpstream,
  startMockUpstream,
  textEvents,
  writeEvents,
} from "../engine/openai/mock-upstream.ts";
import { createTestConfig, createUpstreamModelEntry } from "../support/test-server.ts";

const MODEL = "upstream-chat";
const STALL_MS = 1_000;
/** A long answer (16 MiB): more than the sockets' buffers of both ends take at once. */
const PIECE = "x".repeat(64 * 1024);
const PIECES = 256;

let folder: string;
let upstream: MockUpstream;
let server: RunningServer;
let store: Store;
let key: string;
let port: number;

beforeAll(async () => {
  folder = mkdtempSync(join(tmpdir(), "tollgate-unread-"));
  const database = `sqlite:${join(folder, "tollgate.db")}`;
  upstream = await startMockUpstream((_request, response) =>
    writeEvents(
      response,
      textEvents(
        Array.from({ length: PIECES }, () => PIECE),
        { usage: [10, 100] },
      ),
    ),
  );
  server = await startServer({
    config: createTestConfig({
      database,
      models: [createUpstreamModelEntry(MODEL, upstream.baseUrl, { contextLength: 1_000_000 })],
    }),
    logger: false,
    clientStallTimeoutMs: STALL_MS,
  });
  key = server.createdKeys.starterKey as string;
  port = Number(new URL(server.baseUrl).port);
  store = await openStore(database);
});

afterAll(async () => {
  await server?.close();
  await store?.close();
  await upstream?.close();
  rmSync(folder, { recursive: true, force: true });
});

function chatRequest(stream: boolean): string {
  const body = JSON.stringify({
    model: MODEL,
    stream,
    // No max_tokens, and a context that holds 16 MiB: an answer past either is ended there.
    messages: [{ role: "user", content: "Hi" }],
  });
  return [
    "POST /v1/chat/completions HTTP/1.1",
    "Host: 127.0.0.1",
    `Authorization: Bearer ${key}`,
    "Content-Type: application/json",
    `Content-Length: ${Buffer.byteLength(body)}`,
    "",
    body,
  ].join("\r\n");
}

async function reservedNano(): Promise<bigint> {
  const account = await store.getAccountByName("starter");
  return (await store.getAccountMoney(account?.id as string))?.reservedNano ?? -1n;
}

describe("an answer its client leaves unread", () => {
  it("closes the connection after the stall timeout, and a stream pipelined behind it ends and is settled", async () => {
    const rowsBefore = (await store.listUsage()).length;
    const socket = connect(port, "127.0.0.1");
    await once(socket, "connect");
    socket.on("error", () => {});
    // Read nothing: the answer fills the sockets' buffers and waits.
    socket.pause();
    socket.write(chatRequest(false) + chatRequest(true));
    // Both requests settle and nothing stays reserved: the stream was waiting for the connection
    // the unread answer held, and ended when it was closed.
    await expect.poll(async () => (await store.listUsage()).length, { timeout: 15_000 }).toBe(rowsBefore + 2);
    await expect.poll(reservedNano, { timeout: 10_000 }).toBe(0n);
    // The client, reading at last, finds its connection closed with the answer cut short.
    let received = 0;
    socket.on("data", (data: Buffer) => {
      received += data.length;
    });
    socket.resume();
    await once(socket, "close");
    expect(received).toBeLessThan(PIECES * PIECE.length);
  });

  it("is not cut while its client reads it, however slowly", async () => {
    const socket = connect(port, "127.0.0.1");
    await once(socket, "connect");
    socket.write(chatRequest(false).replace("Host: 127.0.0.1", "Host: 127.0.0.1\r\nConnection: close"));
    let received = 0;
    let sincePause = 0;
    // Two megabytes at a time, then a pause shorter than the stall timeout.
    socket.on("data", (data: Buffer) => {
      received += data.length;
      sincePause += data.length;
      if (sincePause < 2 * 1024 * 1024) return;
      sincePause = 0;
      socket.pause();
      setTimeout(() => socket.resume(), STALL_MS / 2);
    });
    await once(socket, "end");
    expect(received).toBeGreaterThan(PIECES * PIECE.length);
    socket.destroy();
  });
});
