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

/**
 * Opens a connection that sends `head` (declaring most of a megabyte) and `sent` bytes of the
 * body (spaces after its first few), and collects what comes back.
 */
async function holdBody(url: URL, head: string, sent = 9): Promise<{ socket: Socket; answer: () => string }> {
  const socket = connect(Number(url.port), url.hostname);
  socket.on("error", () => {});
  cleanups.push(async () => socket.destroy());
  let answer = "";
  socket.setEncoding("utf8").on("data", (data: string) => {
    answer += data;
  });
  await new Promise((resolve) => socket.once("connect", resolve));
  socket.write(
    `${head}\r\nhost: ${url.host}\r\ncontent-type: application/json\r\ncontent-length: ${MEGABYTE - 10}\r\n\r\n{"model":${" ".repeat(sent - 9)}`,
  );
  return { socket, answer: () => answer };
}

/** A chat request with `key` whose body comes in chunks, sent by `send`; `end` sends its last. */
async function sendChunked(url: URL, key: string) {
  const socket = connect(Number(url.port), url.hostname);
  const closed = new Promise((resolve) => socket.once("close", resolve));
  socket.on("error", () => {});
  cleanups.push(async () => socket.destroy());
  let answer = "";
  socket.setEncoding("utf8").on("data", (data: string) => {
    answer += data;
  });
  await new Promise((resolve) => socket.once("connect", resolve));
  const send = (text: string) => socket.write(`${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`);
  socket.write(
    `POST /v1/chat/completions HTTP/1.1\r\nhost: ${url.host}\r\nauthorization: Bearer ${key}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n`,
  );
  send('{"model":"remote",');
  return {
    send,
    /** Writes `raw` as it is: chunks framed by the caller. */
    write: (raw: string) => socket.write(raw),
    end: () => {
      send('"messages":[{"role":"user","content":"Hi"}],"max_tokens":5}');
      socket.write("0\r\n\r\n");
    },
    answer: () => answer,
    closed,
  };
}

/** A key of a new account with a balance, made through the admin API. */
async function createAccountKey(origin: string, adminKey: string, name: string): Promise<string> {
  const admin = { authorization: `Bearer ${adminKey}`, "content-type": "application/json" };
  const account = (await (
    await fetch(`${origin}/admin/accounts`, {
      method: "POST",
      headers: admin,
      body: JSON.stringify({ name, balance: "10" }),
    })
  ).json()) as { id: string };
  const created = await fetch(`${origin}/admin/keys`, {
    method: "POST",
    headers: admin,
    body: JSON.stringify({ account: account.id }),
  });
  return ((await created.json()) as { key: string }).key;
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
  it("refuses a body that does not fit beside the bytes of those being read with 503 server_overloaded, never reading it, and takes it once they are done", async () => {
    const { server, starterKey: key, url } = await startBudgetedServer(1.5 * MEGABYTE);
    // A client (a key with no balance would do) that declares most of a megabyte, sends 0.9 MB of it and stalls.
    const slow = await holdBody(
      url,
      `POST /v1/chat/completions HTTP/1.1\r\nauthorization: Bearer ${key}`,
      0.9 * MEGABYTE,
    );

    // Once the slow request's bytes are in, the next big body does not fit.
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

  it("refuses with 503 a body whose bytes, as they come, do not fit beside those held, and closes its connection", async () => {
    const { starterKey, adminKey, url, origin } = await startBudgetedServer(1.5 * MEGABYTE);
    const otherKey = await createAccountKey(origin, adminKey, "other");
    await holdBody(
      url,
      `POST /v1/chat/completions HTTP/1.1\r\nauthorization: Bearer ${starterKey}`,
      0.9 * MEGABYTE,
    );
    await sleep(200);

    // 0.6 MB are left: the chunked body's first 0.59 MB are read (it took no body_limit up front).
    const chunked = await sendChunked(url, otherKey);
    chunked.send(`"padding":"${"x".repeat(0.59 * MEGABYTE)}",`);
    await sleep(300);
    expect(chunked.answer()).toBe("");
    chunked.send(`"more":"${"x".repeat(20_000)}",`);
    await chunked.closed;
    expect(chunked.answer()).toMatch(/^HTTP\/1\.1 503 /);
    expect(chunked.answer()).toMatch(/\r\nretry-after: 1\r\n/i);
    expect(chunked.answer()).toMatch(/\r\nconnection: close\r\n/i);
    expect(chunked.answer()).toContain('"code":"server_overloaded"');
  });

  it("admits a chunked body whose bytes fit beside those held, and refuses one whose bytes do not", async () => {
    const { starterKey, adminKey, url, origin } = await startBudgetedServer(2 * MEGABYTE);
    const [otherKey, thirdKey] = await Promise.all([
      createAccountKey(origin, adminKey, "other"),
      createAccountKey(origin, adminKey, "third"),
    ]);
    // 0.99 MB sent and held by each of two accounts: about 20 KB of the 2 MB are left. (The
    // second is admitted because its declared megabyte fits beside the first's bytes.)
    await holdBody(
      url,
      `POST /v1/chat/completions HTTP/1.1\r\nauthorization: Bearer ${starterKey}`,
      0.99 * MEGABYTE,
    );
    await sleep(200);
    await holdBody(
      url,
      `POST /v1/chat/completions HTTP/1.1\r\nauthorization: Bearer ${otherKey}`,
      0.99 * MEGABYTE,
    );
    await sleep(200);
    const chat = async (padding: number) => {
      const chunked = await sendChunked(url, thirdKey ?? "");
      chunked.send(`"padding":"${"x".repeat(padding)}",`);
      chunked.end();
      await chunked.closed;
      return chunked.answer();
    };
    expect(await chat(5_000)).toMatch(/^HTTP\/1\.1 200 /);
    const refused = await chat(30_000);
    expect(refused).toMatch(/^HTTP\/1\.1 503 /);
    expect(refused).toContain('"code":"server_overloaded"');
  });
});

describe("bodies that declare more than they send", () => {
  it("lets connections that declare megabytes and send a byte now and then keep no account's bodies out", async () => {
    // Regression: each declared size was taken up front, so five accounts, each with a connection
    // that declared 8 MiB and sent a byte now and then, kept every tenant's bodies out (503) for
    // the 5-minute request timeout with next to nothing in memory.
    const { server, starterKey, adminKey, url, origin } = await startBudgetedServer(4 * MEGABYTE);
    const keys = await Promise.all(
      ["a", "b", "c", "d", "e"].map((name) => createAccountKey(origin, adminKey, name)),
    );
    const held = await Promise.all(
      keys.map((key) => holdBody(url, `POST /v1/chat/completions HTTP/1.1\r\nauthorization: Bearer ${key}`)),
    );
    await sleep(200);
    for (const each of held) each.socket.write(" ");

    const response = await chatWithBigBody(server, starterKey);
    expect(response.status, await response.text()).toBe(200);
    // A trickling account's own next body fits too: its share holds the bytes it sent.
    const own = await chatWithBigBody(server, keys[0] ?? "");
    expect(own.status, await own.text()).toBe(200);
    expect(held.map((each) => each.answer())).toEqual(["", "", "", "", ""]);
  });

  it("refuses a body sent in one-byte chunks once it is clear, with 400 (regression: a hundred times its size in heap, seconds of CPU)", async () => {
    const { starterKey, url } = await startBudgetedServer(4 * MEGABYTE);
    const chunked = await sendChunked(url, starterKey);
    // In one write, as an attacker sends them: thousands of chunks of one byte.
    const pieces = Array.from({ length: 10_000 }, () => "1\r\n \r\n").join("");
    chunked.write(pieces);
    await chunked.closed;
    expect(chunked.answer()).toMatch(/^HTTP\/1\.1 400 /);
    expect(chunked.answer()).toContain('"code":"invalid_http_request"');
    expect(chunked.answer()).toContain("send it in chunks of at least 64 bytes");
  });

  it("reads a body sent in small chunks whole, joined", async () => {
    const { starterKey, url } = await startBudgetedServer(4 * MEGABYTE);
    const chunked = await sendChunked(url, starterKey);
    for (let piece = 0; piece < 2000; piece++) chunked.send(" ".repeat(100));
    chunked.end();
    await chunked.closed;
    expect(chunked.answer()).toMatch(/^HTTP\/1\.1 200 /);
  });

  it("refuses a chunked body over body_limit with 413, not 503, though its share is no bigger", async () => {
    // A share of one body_limit: its bytes over the limit are the body's fault, which no retry mends.
    const { starterKey, url } = await startBudgetedServer(2 * MEGABYTE);
    const chunked = await sendChunked(url, starterKey);
    for (let piece = 0; piece < 20; piece++) chunked.send("x".repeat(64 * 1024));
    await chunked.closed;
    expect(chunked.answer()).toMatch(/^HTTP\/1\.1 413 /);
    expect(chunked.answer()).toContain('"code":"request_too_large"');
  });

  it("refuses a body that declares more than body_limit with 413, not 503, while the budget is full", async () => {
    // Regression: its declared size, cut to the limit, was taken (or refused 503, retried in vain).
    const { server, starterKey: key, url } = await startBudgetedServer(1.5 * MEGABYTE);
    await holdBody(url, `POST /v1/chat/completions HTTP/1.1\r\nauthorization: Bearer ${key}`, 0.9 * MEGABYTE);
    await sleep(200);
    const response = await fetch(`${server.baseUrl}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "remote", padding: "x".repeat(1.2 * MEGABYTE) }),
    });
    expect(response.status).toBe(413);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe("request_too_large");
  });

  it("admits many chunked bodies of one account at once: each holds the bytes it sent, not body_limit", async () => {
    // Regression: a chunked body took body_limit whole, so a single account got 503 after a
    // quarter of the budget's worth of body_limits (16 uploads at a 4 GB heap), small as they were.
    const { starterKey, url } = await startBudgetedServer(4 * MEGABYTE);
    const uploads = await Promise.all(Array.from({ length: 12 }, () => sendChunked(url, starterKey)));
    await sleep(200);
    for (const upload of uploads) upload.end();
    await Promise.all(uploads.map((upload) => upload.closed));
    expect(uploads.map((upload) => upload.answer().split(" ")[1])).toEqual(Array(12).fill("200"));
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
    const otherKey = await createAccountKey(origin, adminKey, "other");

    // Half a megabyte sent and held: the account's next 0.8 MB do not fit its share.
    const held = await holdBody(
      url,
      `POST /v1/chat/completions HTTP/1.1\r\nauthorization: Bearer ${starterKey}`,
      0.5 * MEGABYTE,
    );
    // Its bytes are read within milliseconds; a big request read before them would take the share.
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

  it("keeps the budget's last quarter for accounts holding one body at most, so four accounts cannot keep the others out (regression: 503 for minutes)", async () => {
    // Eight bodies' worth: each account may hold two, all of them six, and the last two are for
    // accounts that hold one at most.
    const { server, adminKey, url, origin } = await startBudgetedServer(8 * MEGABYTE);
    const attackers = await Promise.all(
      ["a", "b", "c", "d"].map((name) => createAccountKey(origin, adminKey, name)),
    );
    const victim = await createAccountKey(origin, adminKey, "victim");
    const held: { answer: () => string }[] = [];
    for (const key of attackers) {
      // Two bodies each, sent but for their last bytes, and held.
      for (let body = 0; body < 2; body++) {
        held.push(
          await holdBody(
            url,
            `POST /v1/chat/completions HTTP/1.1\r\nauthorization: Bearer ${key}`,
            0.95 * MEGABYTE,
          ),
        );
        await sleep(200);
      }
    }
    // Three accounts hold 5.7 MB, the fourth one body (0.95 MB, in the last quarter); its second is refused.
    expect(held.map((each) => each.answer().split(" ")[1])).toEqual([...Array(7).fill(undefined), "503"]);
    const answer = await chatWithBigBody(server, victim);
    expect(answer.status, await answer.text()).toBe(200);
  });

  it("cuts the bodies a key is still sending once it is revoked, and only then (regression: held for minutes)", async () => {
    const { adminKey, url, origin } = await startBudgetedServer(8 * MEGABYTE);
    const key = await createAccountKey(origin, adminKey, "abuser");
    const publicId = key.split("-")[2];
    const admin = { authorization: `Bearer ${adminKey}`, "content-type": "application/json" };
    const held = await holdBody(
      url,
      `POST /v1/chat/completions HTTP/1.1\r\nauthorization: Bearer ${key}`,
      0.5 * MEGABYTE,
    );
    const closed = new Promise((resolve) => held.socket.once("close", resolve));
    let isClosed = false;
    void closed.then(() => {
      isClosed = true;
    });
    await sleep(200);
    // A change that leaves the key working cuts nothing.
    const updated = await fetch(`${origin}/admin/keys/${publicId}`, {
      method: "PATCH",
      headers: admin,
      body: JSON.stringify({ rpm: 100 }),
    });
    expect(updated.status, await updated.text()).toBe(200);
    await sleep(300);
    expect(isClosed).toBe(false);
    const revoked = await fetch(`${origin}/admin/keys/${publicId}/revoke`, {
      method: "POST",
      headers: admin,
    });
    expect(revoked.status, await revoked.text()).toBe(200);
    // Cut at once, not after the 30 s stall bound nor the 5-minute request timeout.
    await closed;
    expect(held.answer()).toBe("");
  });

  it("holds the bytes an account's bodies really send to its share, as they come, though the budget has room", async () => {
    // A megabyte's share of four: 0.9 MB held, the account's chunked body may bring 0.1 MB more.
    const { starterKey, url } = await startBudgetedServer(4 * MEGABYTE);
    const held = await holdBody(
      url,
      `POST /v1/chat/completions HTTP/1.1\r\nauthorization: Bearer ${starterKey}`,
      0.9 * MEGABYTE,
    );
    await sleep(200);
    const chunked = await sendChunked(url, starterKey);
    chunked.send(`"padding":"${"x".repeat(0.05 * MEGABYTE)}",`);
    await sleep(300);
    expect(chunked.answer()).toBe("");
    chunked.send(`"more":"${"x".repeat(0.1 * MEGABYTE)}",`);
    await chunked.closed;
    expect(chunked.answer()).toMatch(/^HTTP\/1\.1 503 /);
    expect(chunked.answer()).toContain('"code":"server_overloaded"');
    expect(held.answer()).toBe("");
  });
});
