import { connect, type Socket } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it } from "vitest";
import { startServer } from "../../src/server.ts";
import { startMockUpstream } from "../engine/openai/mock-upstream.ts";
import { makeTemporaryDirectory, newDatabaseUrl } from "../store/temporary-directory.ts";
import { createTestConfig, createUpstreamModelEntry } from "../support/test-server.ts";

const directory = makeTemporaryDirectory();
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const MEGABYTE = 1024 * 1024;

/** A server routing `remote` to a mock upstream, whose bodies may hold `budget` bytes at once. */
async function startBudgetedServer(budget: number) {
  const upstream = await startMockUpstream();
  cleanups.push(() => upstream.close());
  const server = await startServer({
    config: createTestConfig({
      server: { host: "127.0.0.1", port: 0, bodyLimitBytes: MEGABYTE },
      database: newDatabaseUrl(directory),
      models: [createUpstreamModelEntry("remote", upstream.baseUrl)],
    }),
    logger: false,
    bodyBudgetBytes: budget,
  });
  cleanups.push(() => server.close());
  const { starterKey, adminKey } = server.createdKeys;
  if (starterKey === undefined || adminKey === undefined) throw new Error("no keys made at start");
  const url = new URL(server.baseUrl);
  return { server, starterKey, adminKey, url, origin: url.origin };
}

/** Opens a connection that sends `head` (declaring most of a megabyte) and a few bytes of the body, and collects what comes back. */
async function holdBody(url: URL, head: string): Promise<{ socket: Socket; answer: () => string }> {
  const socket = connect(Number(url.port), url.hostname);
  socket.on("error", () => {});
  cleanups.push(async () => socket.destroy());
  let answer = "";
  socket.setEncoding("utf8").on("data", (data: string) => {
    answer += data;
  });
  await new Promise((resolve) => socket.once("connect", resolve));
  socket.write(
    `${head}\r\nhost: ${url.host}\r\ncontent-type: application/json\r\ncontent-length: ${MEGABYTE - 10}\r\n\r\n{"model":`,
  );
  return { socket, answer: () => answer };
}

/** The first answer of `request`, sent one after another, whose status `wanted` takes (100 tries). */
async function firstAnswer(
  request: () => Promise<Response>,
  wanted: (status: number) => boolean,
): Promise<Response> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const response = await request();
    if (wanted(response.status)) return response;
    await response.text();
  }
  throw new Error("no such answer in 100 tries");
}

/** A chat request of about 0.8 MB with `key`: unknown fields are ignored, the bytes without the tokens. */
function chatWithBigBody(server: { baseUrl: string }, key: string): Promise<Response> {
  return fetch(`${server.baseUrl}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({
      model: "remote",
      messages: [{ role: "user", content: "Hi" }],
      max_tokens: 5,
      padding: "x".repeat(0.8 * MEGABYTE),
    }),
  });
}

describe("the bytes of request bodies held at once", () => {
  it("refuses a body that does not fit beside those being read with 503 server_overloaded, never reading it, and takes it once they are done", async () => {
    const { server, starterKey: key, url } = await startBudgetedServer(1.5 * MEGABYTE);
    // A client (a key with no balance would do) that declares most of a megabyte and sends a few bytes.
    const slow = await holdBody(url, `POST /v1/chat/completions HTTP/1.1\r\nauthorization: Bearer ${key}`);

    // Once the slow request's headers are in, the next big body does not fit.
    const refused = await firstAnswer(
      () => chatWithBigBody(server, key),
      (status) => status === 503,
    );
    expect(refused.headers.get("retry-after")).toBe("1");
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("server_overloaded");
    // Requests without a body still pass.
    const models = await fetch(`${server.baseUrl}/models`, { headers: { authorization: `Bearer ${key}` } });
    expect(models.status).toBe(200);

    // The slow client leaves: its bytes come back.
    slow.socket.destroy();
    const answered = await firstAnswer(
      () => chatWithBigBody(server, key),
      (status) => status !== 503,
    );
    expect(answered.status, await answered.text()).toBe(200);
  });
});

describe("who may hold the request bodies' budget", () => {
  it("takes nothing for requests without a valid key or a route that reads bodies: they are answered at once, their bodies never read", async () => {
    // Regression: about 70 connections with no key, each declaring megabytes and sending a byte
    // (a path no route serves, a bad key, an OPTIONS), kept every tenant's bodies out for 5 minutes.
    const { server, starterKey, url } = await startBudgetedServer(1.5 * MEGABYTE);
    const held = [
      await holdBody(url, "POST /nonexistent HTTP/1.1"),
      await holdBody(url, "POST /v1/chat/completions HTTP/1.1\r\nauthorization: Bearer sk-wrong"),
      await holdBody(url, "OPTIONS /v1/chat/completions HTTP/1.1\r\naccess-control-request-method: POST"),
    ];
    await expect
      .poll(() => held.map((each) => each.answer().split(" ")[1]), { timeout: 5_000 })
      .toEqual(["404", "401", "404"]);
    const response = await chatWithBigBody(server, starterKey);
    expect(response.status, await response.text()).toBe(200);
  });

  it("holds an account's bodies to a share of it, at least one body, so another account's still fit", async () => {
    // Four bodies' worth: each account may hold one.
    const { server, starterKey, adminKey, url, origin } = await startBudgetedServer(4 * MEGABYTE);
    const admin = { authorization: `Bearer ${adminKey}`, "content-type": "application/json" };
    const account = (await (
      await fetch(`${origin}/admin/accounts`, {
        method: "POST",
        headers: admin,
        body: JSON.stringify({ name: "other", balance: "10" }),
      })
    ).json()) as { id: string };
    const otherKey = (
      (await (
        await fetch(`${origin}/admin/keys`, {
          method: "POST",
          headers: admin,
          body: JSON.stringify({ account: account.id }),
        })
      ).json()) as { key: string }
    ).key;

    const held = await holdBody(
      url,
      `POST /v1/chat/completions HTTP/1.1\r\nauthorization: Bearer ${starterKey}`,
    );
    // Its head is read within milliseconds; a big request read before it would take the share.
    await sleep(200);
    const refused = await firstAnswer(
      () => chatWithBigBody(server, starterKey),
      (status) => status === 503,
    );
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("server_overloaded");
    const other = await chatWithBigBody(server, otherKey);
    expect(other.status, await other.text()).toBe(200);
    // The account's own body was taken all along.
    expect(held.answer()).toBe("");
  });
});
