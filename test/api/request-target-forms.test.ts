/**
 * Targets the router reads as another path than they are written (absolute form, percent-encoded
 * letters) get the checks of the path they reach. Regressions: `/%61dmin/nosuch` and
 * `GET http://host/admin/nosuch` answered 404 to a caller without the admin key (SPEC section
 * 11: 401, so which admin routes exist is not told), and `GET http://host/v1/models` with an
 * `Origin` had no CORS headers.
 */
import type { AddressInfo } from "node:net";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildApp } from "../../src/api/build-app.ts";
import { ModelRegistry } from "../../src/models/model-registry.ts";
import { acceptOneKey } from "./accept-one-key.ts";
import { exchangeRaw } from "./exchange-raw.ts";

let app: FastifyInstance;
let port: number;

beforeAll(async () => {
  app = buildApp({
    registry: new ModelRegistry([], () => undefined),
    authenticate: acceptOneKey,
    registerAdminRoutes: () => {},
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  port = (app.server.address() as AddressInfo).port;
});

afterAll(() => app.close());

/** The status line and headers of one request whose head is `head` (its connection then closed). */
async function answerTo(head: string): Promise<{ status: number; headers: string }> {
  const { text } = await exchangeRaw(port, [`${head}\r\nHost: x\r\nConnection: close\r\n\r\n`]);
  const [headers = ""] = text.split("\r\n\r\n");
  return { status: Number(headers.split(" ")[1]), headers: headers.toLowerCase() };
}

describe("request targets written otherwise than their path", () => {
  it.each([
    ["GET /admin/nosuch HTTP/1.1"],
    ["GET /%61dmin/nosuch HTTP/1.1"],
    [`GET http://127.0.0.1/admin/nosuch HTTP/1.1`],
    [`POST http://127.0.0.1/%61dmin/nosuch HTTP/1.1\r\nContent-Length: 2`],
  ])("%j: an unknown admin path asks for the admin key (401), as written plainly", async (head) => {
    expect((await answerTo(head)).status).toBe(401);
  });

  it("an absolute-form /v1 request with an Origin gets the CORS headers", async () => {
    const answer = await answerTo(
      "GET http://127.0.0.1/v1/models HTTP/1.1\r\nAuthorization: Bearer good\r\nOrigin: https://page.example",
    );
    expect(answer.status).toBe(200);
    expect(answer.headers).toContain("access-control-allow-origin: *");
  });
});
