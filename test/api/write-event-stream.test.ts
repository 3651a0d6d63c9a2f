import { EventEmitter, once } from "node:events";
import { createServer, get, type Server, type ServerResponse } from "node:http";
import { type AddressInfo, connect } from "node:net";
import { Readable } from "node:stream";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  closeIfLeftUnread,
  closeWhenStalled,
  endEventStream,
  writeToClient,
} from "../../src/api/write-event-stream.ts";

const servers: Server[] = [];

afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    server.close();
  }
});

/** A server whose one response is handed to `handle`; resolves with its URL. */
async function serve(handle: (response: ServerResponse) => Promise<void>): Promise<string> {
  const server = createServer((_request, response) => {
    response.writeHead(200, { "content-type": "text/event-stream" });
    void handle(response);
  });
  servers.push(server);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
}

/** Reads the answer at `url` to its end, pausing `pauseMs` after each piece; resolves with its length. */
function readSlowly(url: string | URL, pauseMs: number): Promise<number> {
  let received = 0;
  return new Promise<number>((resolve, reject) => {
    get(url, (response) => {
      response.on("data", (piece: Buffer) => {
        received += piece.length;
        response.pause();
        setTimeout(() => response.resume(), pauseMs);
      });
      response.on("end", () => resolve(received));
      response.on("error", reject);
    }).on("error", reject);
  });
}

describe("writeToClient", () => {
  it("waits for a slow client many times without piling up listeners on the response", async () => {
    const writes = 40;
    const piece = "x".repeat(256 * 1024);
    const seen: { waits: number; closeListeners: number[]; errorListeners: number[] } = {
      waits: 0,
      closeListeners: [],
      errorListeners: [],
    };
    let finished: Promise<void> | undefined;
    const url = await serve(async (response) => {
      // Larger than the socket's buffer: most writes wait for a drain.
      response.on("drain", () => {
        seen.waits++;
      });
      finished = (async () => {
        for (let index = 0; index < writes; index++) {
          expect(await writeToClient(response, piece)).toBe(true);
          seen.closeListeners.push(response.listenerCount("close"));
          seen.errorListeners.push(response.listenerCount("error"));
        }
        response.end();
      })();
    });
    // A slow reader: the server sees backpressure again and again.
    const received = await readSlowly(url, 1);
    await finished;
    expect(received).toBe(writes * piece.length);
    expect(seen.waits).toBeGreaterThan(writes / 2);
    // What the response had after the first write is what it has after the last.
    expect(new Set(seen.closeListeners).size).toBe(1);
    expect(new Set(seen.errorListeners).size).toBe(1);
  });

  it("returns false once the client has gone, and at once afterwards", async () => {
    const results: boolean[] = [];
    let finished: Promise<void> | undefined;
    const url = await serve(async (response) => {
      finished = (async () => {
        const piece = "x".repeat(1024 * 1024);
        // The client leaves after the first bytes: a write waiting for a drain hears the close.
        for (let index = 0; index < 64 && (results.at(-1) ?? true); index++) {
          results.push(await writeToClient(response, piece));
        }
        results.push(await writeToClient(response, "late"));
      })();
    });
    await new Promise<void>((resolve, reject) => {
      const request = get(url, (response) => {
        response.once("data", () => {
          request.destroy();
          resolve();
        });
      });
      request.on("error", () => {});
      request.on("close", resolve);
      setTimeout(() => reject(new Error("no data")), 5_000).unref();
    });
    await finished;
    expect(results.at(-2)).toBe(false);
    expect(results.at(-1)).toBe(false);
  });

  it("disconnects a client that leaves what was sent unread for the stall timeout", async () => {
    const results: boolean[] = [];
    let closed: Promise<unknown> | undefined;
    let finished: Promise<void> | undefined;
    const url = new URL(
      await serve(async (response) => {
        closed = once(response, "close");
        finished = (async () => {
          const piece = "x".repeat(1024 * 1024);
          for (let index = 0; index < 64 && (results.at(-1) ?? true); index++) {
            results.push(await writeToClient(response, piece, 300));
          }
        })();
      }),
    );
    // A client that sends its request and then reads nothing, its socket left open.
    const socket = connect(Number(url.port), url.hostname);
    socket.write(`GET / HTTP/1.1\r\nHost: ${url.host}\r\n\r\n`);
    socket.pause();
    for (let attempt = 0; attempt < 100 && finished === undefined; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    await finished;
    await closed;
    expect(results.at(-1)).toBe(false);
    // Far fewer than the 64 MiB it would have taken: the socket's buffers, then the timeout.
    expect(results.length).toBeLessThan(64);
    socket.destroy();
  });

  // Regression: only a drain stopped the timer, and with megabytes of socket buffers a client
  // reading steadily (16 KiB/s) saw none within the minute, and was cut as one that read nothing.
  it("leaves alone a client that reads steadily, though no drain comes within the stall timeout", async () => {
    const results: boolean[] = [];
    let finished: Promise<void> | undefined;
    const url = await serve(async (response) => {
      finished = (async () => {
        // Each write waits for megabytes to be read: longer than the 1 s stall timeout. The
        // reader takes some megabytes a second: what it takes shows in the socket's queue only
        // as the kernel's send buffer frees a third of itself (a megabyte or more), so a reader
        // of one megabyte a second (50 ms pauses) sometimes showed no progress within a second.
        const piece = "z".repeat(12 * 1024 * 1024);
        for (let index = 0; index < 2; index++) results.push(await writeToClient(response, piece, 1000));
        response.end();
      })();
    });
    const received = await readSlowly(url, 10);
    await finished;
    expect(results).toEqual([true, true]);
    expect(received).toBe(2 * 12 * 1024 * 1024);
  });

  it("counts a pipelined response's stall only once it has its connection (regression: cut while queued, connection left open)", async () => {
    const piece = "y".repeat(1024 * 1024);
    let queued: Promise<boolean> | undefined;
    const server = createServer((request, response) => {
      response.writeHead(200, { "content-type": "text/event-stream" });
      if (request.url === "/first") {
        // A long stream the client reads all along: the second response waits behind it.
        response.write("first ");
        setTimeout(() => response.end("done"), 600);
        return;
      }
      queued = writeToClient(response, piece, 150).then((written) => {
        response.end();
        return written;
      });
    });
    servers.push(server);
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const { port } = server.address() as AddressInfo;
    const socket = connect(port, "127.0.0.1");
    let received = 0;
    socket.on("data", (data: Buffer) => {
      received += data.length;
    });
    const ended = once(socket, "end");
    // Both requests at once on one connection; the second asks for the connection to close after it.
    socket.write(
      `GET /first HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /second HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`,
    );
    await ended;
    expect(await queued).toBe(true);
    // The second response came whole, and the server closed the connection after it.
    expect(received).toBeGreaterThan(piece.length);
    socket.destroy();
  });
});

describe("endEventStream", () => {
  it("disconnects a client that leaves a stream's tail unread, though every write was taken (regression: held for ever)", async () => {
    let ended: { unsent: number; closed: Promise<unknown> } | undefined;
    const url = new URL(
      await serve(async (response) => {
        // Every write is taken (below the high-water mark) until the kernel's buffers are full:
        // the stream then ends with its last piece unsent, and nothing waits for a drain.
        const piece = "z".repeat(16 * 1024);
        for (let writes = 0; writes < 4096; writes++) {
          if (!response.write(piece)) break;
          await new Promise((resolve) => setImmediate(resolve));
          if ((response.socket?.writableLength ?? 0) > 0) break;
        }
        const unsent = response.socket?.writableLength ?? 0;
        const closed = once(response, "close");
        endEventStream(response, 300);
        ended = { unsent, closed };
      }),
    );
    // A client that sends its request and then reads nothing, its socket left open.
    const socket = connect(Number(url.port), url.hostname);
    socket.write(`GET / HTTP/1.1\r\nHost: ${url.host}\r\n\r\n`);
    socket.pause();
    for (let attempt = 0; attempt < 1000 && ended === undefined; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(ended?.unsent).toBeGreaterThan(0);
    expect(ended?.unsent).toBeLessThan(64 * 1024);
    // The server closes it after the stall timeout, while the client still reads nothing.
    const outcome = await Promise.race([
      ended?.closed.then(() => "closed"),
      new Promise((resolve) => setTimeout(() => resolve("still open"), 3000)),
    ]);
    socket.destroy();
    expect(outcome).toBe("closed");
  });
});

describe("closeWhenStalled", () => {
  /**
   * A server whose response is piped from a stream of `pieces` 1 MiB pieces, each after
   * `pauseMs`, watched at `stallMs`; `closed` is the response's close, once it has been asked for.
   */
  async function servePiped(pieces: number, pauseMs: number, stallMs: number) {
    let closed: Promise<unknown> | undefined;
    const url = new URL(
      await serve(async (response) => {
        closed = once(response, "close");
        async function* body() {
          for (let index = 0; index < pieces; index++) {
            if (pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, pauseMs));
            yield "c".repeat(1024 * 1024);
          }
        }
        closeWhenStalled(response, stallMs);
        Readable.from(body()).pipe(response);
      }),
    );
    return { url, closed: () => closed };
  }

  it("disconnects a client that reads nothing of a piped response (regression: held for ever)", async () => {
    // More than the kernel's buffers take: the pipe stops and waits for a drain that never comes.
    const { url, closed } = await servePiped(256, 0, 200);
    const client = connect(Number(url.port), url.hostname);
    client.write(`GET / HTTP/1.1\r\nHost: ${url.host}\r\n\r\n`);
    client.pause();
    for (let attempt = 0; attempt < 1000 && closed() === undefined; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const outcome = await Promise.race([
      closed()?.then(() => "closed"),
      new Promise((resolve) => setTimeout(() => resolve("still open"), 5000)),
    ]);
    client.destroy();
    expect(outcome).toBe("closed");
  });

  it("leaves a slow reader and a slow producer alone", async () => {
    // Pieces come slower than the stall timeout (nothing waits for the client meanwhile), and
    // the client reads slowly: neither is a stall.
    const { url, closed } = await servePiped(6, 150, 100);
    const received = await readSlowly(url, 5);
    await closed();
    expect(received).toBe(6 * 1024 * 1024);
  });
});

describe("the stall of a client that reads nothing", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  /** An ended response whose socket holds `unsent()` bytes not yet handed to the kernel. */
  function unreadResponse(unsent: () => number) {
    let destroyed = false;
    const socket = {
      get writableLength() {
        return unsent();
      },
      destroy() {
        destroyed = true;
      },
    };
    const response = Object.assign(new EventEmitter(), { writableFinished: false, destroyed: false, socket });
    return { response: response as unknown as ServerResponse, destroyed: () => destroyed };
  }

  it("counts from the last time the kernel took bytes, not from the first look (regression: cut after two stall periods)", () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
    // As a write is refused the kernel still takes bytes for a moment: 1,000 unsent at the first
    // look, 500 a few milliseconds later, and then none taken, ever.
    let unsent = 1000;
    const { response, destroyed } = unreadResponse(() => unsent);
    closeIfLeftUnread(response, 60_000);
    vi.advanceTimersByTime(5);
    unsent = 500;
    vi.advanceTimersByTime(59_000);
    expect(destroyed()).toBe(false);
    // A quarter of a stall at most past the minute since the last bytes were taken: it was cut
    // only at the second minute's look.
    vi.advanceTimersByTime(16_000);
    expect(destroyed()).toBe(true);
  });

  it("starts the time again whenever the client takes bytes", () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
    let unsent = 1000;
    const { response, destroyed } = unreadResponse(() => unsent);
    closeIfLeftUnread(response, 60_000);
    for (let minute = 0; minute < 5; minute++) {
      vi.advanceTimersByTime(50_000);
      unsent -= 100;
    }
    expect(destroyed()).toBe(false);
  });
});
