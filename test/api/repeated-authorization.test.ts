import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../support/test-server.ts";

// Regression (security review): with two Authorization headers Node kept the first and dropped
// the other, so the key a proxy adds after the client's own was ignored for the client's, without
// a word; the admin API answered as the first key's role said.

let test: TestServer;

beforeAll(async () => {
  test = await startTestServer({ metricsKey: "metrics-secret" });
});

afterAll(async () => {
  await test?.close();
});

/** A GET sending each of `authorizations` as its own Authorization header. */
function get(path: string, authorizations: string[]): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const outgoing = request(
      `${test.origin}${path}`,
      {
        headers: [
          "Host",
          new URL(test.origin).host,
          ...authorizations.flatMap((value) => ["Authorization", value]),
        ],
      },
      (answer) => {
        let body = "";
        answer.setEncoding("utf8");
        answer.on("data", (text: string) => {
          body += text;
        });
        answer.on("end", () => resolve({ status: answer.statusCode ?? 0, body }));
      },
    );
    outgoing.on("error", reject);
    outgoing.end();
  });
}

describe("a request with more than one Authorization header", () => {
  it("is refused with 401 on the API, the admin API and /metrics, whichever key comes first", async () => {
    const user = `Bearer ${test.starterKey}`;
    const admin = `Bearer ${test.adminKey}`;
    for (const [path, keys] of [
      ["/v1/models", [user, user]],
      ["/admin/accounts", [user, admin]],
      ["/admin/accounts", [admin, user]],
      ["/admin/no-such-route", [admin, user]],
      ["/metrics", ["Bearer metrics-secret", "Bearer other"]],
    ] as const) {
      const answer = await get(path, [...keys]);
      expect(answer.status, path).toBe(401);
      expect(JSON.parse(answer.body)).toMatchObject({
        error: {
          code: "invalid_api_key",
          message: expect.stringContaining("more than one Authorization header"),
        },
      });
      expect(answer.body).not.toContain(test.adminKey.slice(-12));
    }
    // One header is read as before.
    expect((await get("/admin/accounts", [admin])).status).toBe(200);
    expect((await get("/metrics", ["Bearer metrics-secret"])).status).toBe(200);
  });
});
