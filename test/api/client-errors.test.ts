import { once } from "node:events";
import { createServer } from "node:http";
import { type AddressInfo, connect } from "node:net";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { answerClientError, boundUnreadBody } from "../../src/api/answer-client-error.ts";
import { buildApp } from "../../src/api/build-app.ts";
import { AppError } from "../../src/errors/app-error.ts";
import { MAX_JSON_CONTAINERS, MAX_JSON_DEPTH } from "../../src/json/check-json-depth.ts";
import { ModelRegistry } from "../../src/models/model-registry.ts";
import { acceptOneKey } from "./accept-one-key.ts";
import { exchangeRaw } from "./exchange-raw.ts";

const REQUEST_TIMEOUT_MS = 400;
const HEADERS_TIMEOUT_MS = 200;
const TIMEOUTS = { headersTimeoutMs: HEADERS_TIMEOUT_MS, requestTimeoutMs: REQUEST_TIMEOUT_MS };

let app: FastifyInstance;
let port: number;

beforeAll(async () => {
  app = buildApp({
    registry: new ModelRegistry([], () => undefined),
    authenticate: acceptOneKey,
    requestTimeoutMs: REQUEST_TIMEOUT_MS,
    headersTimeoutMs: HEADERS_TIMEOUT_MS,
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  const address = app.server.address();
  port = typeof address === "object" && address !== null ? address.port : 0;
});

afterAll(async () => {
  await app?.close();
});

/** {@link exchangeRaw} with this file's server unless another port is given. */
function exchange(chunks: string[], trickleMs?: number, serverPort: number = port) {
  return exchangeRaw(serverPort, chunks, trickleMs);
}

function parseResponse(text: string) {
  const [head = "", body = ""] = text.split("\r\n\r\n");
  const [statusLine = "", ...headerLines] = head.split("\r\n");
  const headers = Object.fromEntries(
    headerLines.map((line) => {
      const colon = line.indexOf(":");
      return [line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim()];
    }),
  );
  return { status: Number(statusLine.split(" ")[1]), headers, body: JSON.parse(body) as unknown };
}

describe("requests the HTTP parser refuses", () => {
  it("answers a request that is not HTTP with 400 in the contract's error shape, then closes", async () => {
    const { text, closed } = await exchange(["HELLO THERE\r\n\r\n"]);
    expect(closed).toBe(true);
    const response = parseResponse(text);
    expect(response.status).toBe(400);
    expect(response.headers["content-type"]).toBe("application/json; charset=utf-8");
    expect(response.headers.connection).toBe("close");
    expect(response.headers["x-request-id"]).toMatch(/^req_[0-9a-f]{24}$/);
    expect(response.body).toEqual({
      error: {
        message: expect.stringMatching(/^The request is not valid HTTP\/1\.1 \(.+\)\.$/),
        type: "invalid_request_error",
        param: null,
        code: "invalid_http_request",
      },
    });
  });

  it("answers the whole requests before bytes it refuses first, then refuses them and closes (regression: the requests cut unanswered)", async () => {
    const health = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
    const { text, closed } = await exchange([`${health}${health}HELLO THERE\r\n\r\n`]);
    expect(closed).toBe(true);
    const [first = "", second = "", refused = ""] = text.split(/(?=HTTP\/1\.1 \d{3} )/);
    expect(first).toMatch(/^HTTP\/1\.1 200 [\s\S]*\{"status":"ok"\}$/);
    expect(second).toMatch(/^HTTP\/1\.1 200 [\s\S]*\{"status":"ok"\}$/);
    expect(parseResponse(refused)).toMatchObject({
      status: 400,
      body: { error: { code: "invalid_http_request" } },
    });
    // After a request that asked for the connection to close, what follows is ignored (RFC 9112, 9.6).
    const closing = await exchange([
      `GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nHELLO\r\n\r\n`,
    ]);
    expect(closing.closed).toBe(true);
    expect(closing.text).toMatch(/^HTTP\/1\.1 200 [\s\S]*\{"status":"ok"\}$/);
  });

  it("answers a path with a broken percent escape in the contract's shape, with a request id", async () => {
    for (const path of ["/v1/models/%ZZ", "/v1/models/%E0%A4%A", "/v1/%ZZ", "/v1/models/%FF"]) {
      const { text } = await exchange([`GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`]);
      const response = parseResponse(text);
      expect(response.status, path).toBe(400);
      expect(response.headers["x-request-id"]).toMatch(/^req_[0-9a-f]{24}$/);
      expect(response.body).toEqual({
        error: {
          message: expect.stringMatching(/^The request URL is not valid: every '%'/),
          type: "invalid_request_error",
          param: null,
          code: "invalid_http_request",
        },
      });
    }
  });

  it("answers a bad Content-Length the same way", async () => {
    const { text } = await exchange([
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: ten\r\n\r\n",
    ]);
    const response = parseResponse(text);
    expect(response.status).toBe(400);
    expect(response.body).toMatchObject({ error: { code: "invalid_http_request" } });
  });

  it("answers headers over Node's limit with 431 headers_too_large", async () => {
    const { text } = await exchange([
      `GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`,
    ]);
    const response = parseResponse(text);
    expect(response.status).toBe(431);
    expect(response.body).toEqual({
      error: {
        message: expect.stringContaining("headers are larger than this server accepts"),
        type: "invalid_request_error",
        param: null,
        code: "headers_too_large",
      },
    });
  });

  it("answers a body that stops arriving with 408 request_timeout once the request timeout passes", async () => {
    const started = Date.now();
    const { text, closed } = await exchange([
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer good\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n",
      '{"model":',
    ]);
    expect(closed).toBe(true);
    expect(Date.now() - started).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 50);
    const response = parseResponse(text);
    expect(response.status).toBe(408);
    expect(response.body).toEqual({
      error: {
        message: `The request did not arrive in full within ${REQUEST_TIMEOUT_MS / 1000} seconds of its start; send its body without long pauses.`,
        type: "invalid_request_error",
        param: null,
        code: "request_timeout",
      },
    });
  });

  it("answers headers that stop arriving with 408 naming the headers bound, not the whole request's", async () => {
    // Node reports both bounds as ERR_HTTP_REQUEST_TIMEOUT; the headers bound is the shorter.
    for (const head of ["GET /health HTTP/1.1\r\nHost: x\r\n", "GET /heal"]) {
      const { text, closed } = await exchange([head]);
      expect(closed).toBe(true);
      const response = parseResponse(text);
      expect(response.status).toBe(408);
      expect(response.body).toEqual({
        error: {
          message: `The request's headers did not arrive in full within ${HEADERS_TIMEOUT_MS / 1000} seconds; send them without long pauses.`,
          type: "invalid_request_error",
          param: null,
          code: "request_timeout",
        },
      });
    }
  });

  it("answers within seconds of the headers bound when the whole request's bound is long, as in production", async () => {
    // Node looks for requests past their bounds only every so often: it looked every 30 s (a
    // quarter of the request bound, at most 30 s), so the one-minute headers bound lapsed at 90 s.
    const roomy = buildApp({
      registry: new ModelRegistry([], () => undefined),
      authenticate: async () => {
        throw new AppError("invalid_api_key", "Not a key.");
      },
      requestTimeoutMs: 120_000,
      headersTimeoutMs: 500,
    });
    try {
      await roomy.listen({ host: "127.0.0.1", port: 0 });
      const { port: roomyPort } = roomy.server.address() as AddressInfo;
      const { text, closed } = await exchange(["GET /health HTTP/1.1\r\nHost: x\r\n"], undefined, roomyPort);
      expect(closed).toBe(true);
      expect(parseResponse(text).status).toBe(408);
    } finally {
      await roomy.close();
    }
  });

  it("names the headers bound for a second request on a keep-alive connection whose headers stop", async () => {
    const { text } = await exchange(["GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\n"]);
    expect(text).toMatch(/^HTTP\/1\.1 200 [\s\S]*HTTP\/1\.1 408 /);
    expect(text).toContain(`headers did not arrive in full within ${HEADERS_TIMEOUT_MS / 1000} seconds`);
  });

  it("closes a connection whose body still trickles in past the timeout after an early answer", async () => {
    // The key is refused before the body is read; Node then reads the rest of the body for the
    // next request on the connection, a byte at a time if the client sends it so.
    const started = Date.now();
    const { text, closed } = await exchange(
      [
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer bad\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n",
        "{",
      ],
      50,
    );
    expect(closed).toBe(true);
    expect(Date.now() - started).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 50);
    expect(parseResponse(text).status).toBe(401);
  });

  it("keeps a connection whose body was read in full after an early answer", async () => {
    const body = JSON.stringify({ model: "x", messages: [] });
    const { text, closed } = await exchange([
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer bad\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
      "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    ]);
    expect(closed).toBe(true);
    expect(text).toMatch(/^HTTP\/1\.1 401 [\s\S]*HTTP\/1\.1 200 [\s\S]*\{"status":"ok"\}$/);
  });

  it("leaves no listener behind on a keep-alive connection that gets many early answers", async () => {
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on("warning", onWarning);
    const socket = connect(port, "127.0.0.1");
    let received = "";
    socket.setEncoding("utf8");
    socket.on("data", (data: string) => {
      received += data;
    });
    try {
      const body = JSON.stringify({ model: "x", messages: [] });
      for (let index = 1; index <= 15; index++) {
        // Headers first; the body only once the 401 is out, as a slow upload's would come.
        socket.write(
          `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer bad\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
        );
        for (let waited = 0; (received.match(/HTTP\/1\.1 401/g) ?? []).length < index; waited += 5) {
          if (waited > 5_000) throw new Error(`no answer ${index}: ${received}`);
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
        socket.write(body);
      }
      expect((received.match(/HTTP\/1\.1 401/g) ?? []).length).toBe(15);
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(warnings.filter((warning) => warning.name === "MaxListenersExceededWarning")).toEqual([]);
    } finally {
      process.off("warning", onWarning);
      socket.destroy();
    }
  });

  it("still answers well-formed requests on other connections", async () => {
    const response = await fetch(`http://127.0.0.1:${port}/health`);
    expect(response.status).toBe(200);
  });
});

describe("request heads Node would refuse with a bare answer of its own", () => {
  it("answers an HTTP/1.1 request without Host with 400 in the contract's shape, then closes", async () => {
    const { text, closed } = await exchange(["GET /health HTTP/1.1\r\nX-Request-Id: no-host\r\n\r\n"]);
    expect(closed).toBe(true);
    const response = parseResponse(text);
    expect(response.status).toBe(400);
    expect(response.headers["content-type"]).toBe("application/json; charset=utf-8");
    expect(response.headers.connection).toBe("close");
    expect(response.headers["x-request-id"]).toBe("no-host");
    expect(response.body).toEqual({
      error: {
        message: expect.stringMatching(
          /^The request has no Host header, which HTTP\/1\.1 requires; send one/,
        ),
        type: "invalid_request_error",
        param: null,
        code: "invalid_http_request",
      },
    });
  });

  it("answers CONNECT (the server taken for a proxy) with 400 in the contract's shape, then closes", async () => {
    // Node closes such a connection without a word unless something answers it.
    for (const target of ["127.0.0.1:443", "/v1/models"]) {
      const { text, closed } = await exchange([`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`]);
      expect(closed).toBe(true);
      const response = parseResponse(text);
      expect(response.status).toBe(400);
      expect(response.headers["x-request-id"]).toMatch(/^req_[0-9a-f]{24}$/);
      expect(response.body).toEqual({
        error: {
          message: expect.stringMatching(/^CONNECT is not supported: this server is not a proxy\./),
          type: "invalid_request_error",
          param: null,
          code: "invalid_http_request",
        },
      });
    }
  });

  it("still answers an HTTP/1.0 request without Host, as Node does", async () => {
    const { text } = await exchange(["GET /health HTTP/1.0\r\n\r\n"]);
    expect(text).toMatch(/^HTTP\/1\.1 200 [\s\S]*\{"status":"ok"\}$/);
  });

  it("answers an Expect other than 100-continue in the contract's shape and keeps the connection", async () => {
    const { text } = await exchange([
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
      "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    ]);
    const [refused = "", next = ""] = text.split(/(?=HTTP\/1\.1 200 )/);
    const response = parseResponse(refused);
    expect(response.status).toBe(400);
    expect(response.headers["x-request-id"]).toMatch(/^req_[0-9a-f]{24}$/);
    expect(response.body).toEqual({
      error: {
        message:
          "The request's 'Expect: 200-ok' cannot be met: this server knows only 'Expect: 100-continue'; remove the header.",
        type: "invalid_request_error",
        param: null,
        code: "invalid_http_request",
      },
    });
    expect(next).toMatch(/\{"status":"ok"\}$/);
  });

  it("still meets Expect: 100-continue", async () => {
    const { text } = await exchange([
      "GET /health HTTP/1.1\r\nHost: x\r\nExpect: 100-Continue\r\nConnection: close\r\n\r\n",
    ]);
    expect(text).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 [\s\S]*\{"status":"ok"\}$/);
  });
});

describe("a body over the limit (body_limit 1024 bytes)", () => {
  let small: FastifyInstance;
  let smallPort: number;
  beforeAll(async () => {
    small = buildApp({
      registry: new ModelRegistry([], () => undefined),
      authenticate: acceptOneKey,
      bodyLimitBytes: 1024,
    });
    await small.listen({ host: "127.0.0.1", port: 0 });
    smallPort = (small.server.address() as AddressInfo).port;
  });
  afterAll(() => small.close());

  /** A body of a megabyte: over the small server's limit. */
  const OVERSIZED = 1_000_000;

  /**
   * Opens a connection (half-open where asked, as a socket in Python or C is: the server's FIN
   * does not stop its writes), sends `head`, and waits for the answer that comes before the body,
   * as a client that writes its whole body before it reads. Collects what comes and the errors.
   */
  async function awaitEarlyAnswer(head: string, allowHalfOpen = false) {
    const socket = connect({ port: smallPort, host: "127.0.0.1", allowHalfOpen });
    let text = "";
    let ended = false;
    const errors: Error[] = [];
    socket.setEncoding("utf8");
    socket.on("data", (data: string) => {
      text += data;
    });
    socket.on("error", (error) => errors.push(error));
    socket.on("end", () => {
      ended = true;
    });
    const closed = new Promise((resolve) => socket.on("close", resolve));
    socket.write(head);
    for (let waited = 0; !/\r\n\r\n\{.*\}$/s.test(text); waited += 5) {
      if (waited > 5_000) throw new Error(`no answer: ${text}`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    return { socket, closed, errors, text: () => text, ended: () => ended };
  }

  /**
   * For an answer whose connection closes after it: waits for the server to close its half, sends
   * the rest of the body, then ends and waits for the close; answers what came, with no error.
   */
  async function sendRestAfterClose(head: string): Promise<string> {
    const { socket, closed, errors, text, ended } = await awaitEarlyAnswer(head, true);
    // The server closed its half after the answer; the rest of the body is still taken.
    await expect.poll(ended).toBe(true);
    await new Promise<void>((resolve, reject) =>
      socket.write("x".repeat(OVERSIZED), (error) => (error ? reject(error) : resolve())),
    );
    socket.end();
    await closed;
    expect(errors).toEqual([]);
    return text();
  }

  it("is answered 413 on a connection that stays open to take the rest of the body (no reset)", async () => {
    const { socket, closed, errors, text } = await awaitEarlyAnswer(
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer good\r\nContent-Type: application/json\r\nContent-Length: ${OVERSIZED}\r\n\r\n`,
    );
    socket.write("x".repeat(OVERSIZED));
    socket.write("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    await closed;
    expect(errors).toEqual([]);
    const [refused = "", next = ""] = text().split(/(?=HTTP\/1\.1 200 )/);
    expect(parseResponse(refused)).toMatchObject({
      status: 413,
      body: { error: { code: "request_too_large", type: "invalid_request_error" } },
    });
    expect(next).toMatch(/\{"status":"ok"\}$/);
  });

  it("is answered 401 for a wrong key to a client that asked for the connection to close, closed once the body came (regression: reset)", async () => {
    const text = await sendRestAfterClose(
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: ${OVERSIZED}\r\n\r\n`,
    );
    expect(parseResponse(text)).toMatchObject({
      status: 401,
      body: { error: { code: "invalid_api_key" } },
    });
  });

  it.each([
    ["Connection: close", "HTTP/1.1", "Connection: close\r\n"],
    ["HTTP/1.0", "HTTP/1.0", ""],
  ])(
    "is answered 413 to a client that asked for the connection to close (%s), closed once the body came, not under it (regression: reset)",
    async (_name, version, connection) => {
      const text = await sendRestAfterClose(
        `POST /v1/chat/completions ${version}\r\nHost: x\r\nAuthorization: Bearer good\r\nContent-Type: application/json\r\n${connection}Content-Length: ${OVERSIZED}\r\n\r\n`,
      );
      const response = parseResponse(text);
      expect(response.status).toBe(413);
      expect(response.headers.connection).toBe("close");
      expect(response.body).toMatchObject({ error: { code: "request_too_large" } });
    },
  );

  const head = (length: number) =>
    `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer good\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: ${length}\r\n\r\n`;

  it("with Expect: 100-continue is refused with 413 before its body is asked for, and its connection closes", async () => {
    // Node answered 100 Continue at once: the client sent its body (curl: any body over 1 KB),
    // only to be refused while it came.
    const { text, closed } = await exchangeRaw(smallPort, [head(1_000_000)]);
    expect(closed).toBe(true);
    expect(text).not.toContain("100 Continue");
    const response = parseResponse(text);
    expect(response.status).toBe(413);
    expect(response.headers.connection).toBe("close");
    expect(response.body).toMatchObject({ error: { code: "request_too_large", param: null } });
  });

  it.each([10, 1_000_000])(
    "with Expect: 100-continue (Content-Length %i) and a wrong key is refused with 401 before its body is asked for",
    async (length) => {
      // The key first, then the body (SPEC section 11): over the limit too.
      const { text, closed } = await exchangeRaw(smallPort, [
        head(length).replace("Bearer good", "Bearer wrong"),
      ]);
      expect(closed).toBe(true);
      expect(text).not.toContain("100 Continue");
      const response = parseResponse(text);
      expect(response.status).toBe(401);
      expect(response.headers.connection).toBe("close");
    },
  );

  it("tells a body within the limit that waits with Expect: 100-continue to come, and reads it", async () => {
    const socket = connect(smallPort, "127.0.0.1");
    let text = "";
    socket.setEncoding("utf8");
    socket.on("data", (data: string) => {
      text += data;
    });
    const body = '{"model":"none","messages":[{"role":"user","content":"hi"}]}';
    socket.write(head(Buffer.byteLength(body)));
    for (let waited = 0; !text.includes("\r\n\r\n"); waited += 5) {
      if (waited > 5_000) throw new Error(`no 100 Continue: ${text}`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    expect(text).toBe("HTTP/1.1 100 Continue\r\n\r\n");
    socket.end(body);
    await once(socket, "close");
    const response = parseResponse(text.slice("HTTP/1.1 100 Continue\r\n\r\n".length));
    expect(response.status).toBe(404);
    expect(response.body).toMatchObject({ error: { code: "model_not_found" } });
  });
});

describe("answerClientError after an early answer", () => {
  it("writes no second answer when the request timeout catches up with a body left unread", async () => {
    // Whichever comes first, the bound on the unread body or Node's request timeout: the client
    // got its answer and must not see another one for a request it never sent.
    const server = createServer((request, response) => {
      response.end("early");
      boundUnreadBody(request, 60_000);
      response.on("finish", () => {
        const timeout = Object.assign(new Error("timeout"), { code: "ERR_HTTP_REQUEST_TIMEOUT" });
        answerClientError(timeout, request.socket, TIMEOUTS);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const address = server.address() as AddressInfo;
    const socket = connect(address.port, "127.0.0.1");
    let text = "";
    socket.setEncoding("utf8");
    socket.on("data", (data: string) => {
      text += data;
    });
    socket.write("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{");
    await once(socket, "close");
    server.close();
    expect(text).toMatch(/^HTTP\/1\.1 200 [\s\S]*early$/);
    expect(text).not.toContain("408");
  });
});

describe("a request body nested too deep", () => {
  it("is refused with 400 invalid_json before it is parsed, in fields the server would ignore too", async () => {
    // Four million levels of brackets, under the size limit: parsed, it held 225 MB for seconds.
    const depth = 2_000_000;
    const body = `{"model":"m","messages":[{"role":"user","content":"hi"}],"x":${"[".repeat(depth)}${"]".repeat(depth)}}`;
    const post = (authorization?: string) =>
      fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          ...(authorization === undefined ? {} : { authorization }),
        },
        body,
      });
    const refused = await post("Bearer good");
    expect(refused.status).toBe(400);
    expect(await refused.json()).toEqual({
      error: {
        message: `The request body nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep; no request needs that.`,
        type: "invalid_request_error",
        param: null,
        code: "invalid_json",
      },
    });
    // The key is still checked first (SPEC section 11).
    expect((await post()).status).toBe(401);
  });

  it("is refused with 400 invalid_json when it holds more arrays and objects than any request needs (regression: 30 times its size in heap)", async () => {
    // Empty objects in a field the server ignores: two bytes of text each, about 90 of heap parsed.
    const post = (count: number) =>
      fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: "Bearer good" },
        body: `{"model":"m","messages":[{"role":"user","content":"hi"}],"x":[${Array(count).fill("{}").join(",")}]}`,
      });
    const refused = await post(MAX_JSON_CONTAINERS);
    expect(refused.status).toBe(400);
    expect(await refused.json()).toMatchObject({
      error: {
        message: "The request body holds more than 250,000 arrays and objects; no request needs that.",
        code: "invalid_json",
      },
    });
    // Within the bound (with the body's own object, messages array and message), it is parsed.
    const parsed = await post(MAX_JSON_CONTAINERS - 4);
    expect(((await parsed.json()) as { error?: { code: string } }).error?.code).not.toBe("invalid_json");
  });
});
