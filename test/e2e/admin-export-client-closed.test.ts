/**
 * A client that stops reading a usage export and closes its connection still gets the request's
 * log line and metrics, as 499: Fastify's onResponse hook waits for a finish that never comes,
 * and an abandoned export went unrecorded.
 */
import { request } from "node:http";
import { PassThrough } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import { beforeAll, expect, it } from "vitest";
import { CLIENT_CLOSED_STATUS } from "../../src/api/build-app.ts";
import { makeUsage } from "../store/store-fixtures.ts";
import { useTestServer } from "../support/use-test-server.ts";

/** Several pages of CSV: far more than the first chunk the client reads before it leaves. */
const ROWS = 5000;

const logLines: Record<string, unknown>[] = [];
const destination = new PassThrough();
destination.on("data", (data: Buffer) => {
  for (const line of data.toString().split("\n")) if (line.trim() !== "") logLines.push(JSON.parse(line));
});
const server = useTestServer({ logDestination: destination });

beforeAll(async () => {
  for (let row = 0; row < ROWS; row++) {
    await server().store.insertUsage(
      makeUsage({
        accountId: server().starterAccountId,
        keyPublicId: "keyexport001",
        model: "m",
        requestId: `export_${row}`,
        createdAt: new Date(Date.UTC(2025, 6, 1) + row * 1000),
      }),
    );
  }
});

/** Starts a CSV export and closes the connection once its first bytes arrive; answers the request id. */
function leaveExportEarly(): Promise<string> {
  return new Promise((resolve, reject) => {
    const exporting = request(
      `${server().origin}/admin/usage?format=csv`,
      { headers: { authorization: `Bearer ${server().adminKey}` } },
      (response) => {
        response.once("data", () => {
          exporting.destroy();
          resolve(String(response.headers["x-request-id"]));
        });
      },
    );
    exporting.on("error", reject);
    exporting.end();
  });
}

it("logs and counts an export its client left as 499", async () => {
  const requestId = await leaveExportEarly();
  let line: Record<string, unknown> | undefined;
  for (let waited = 0; line === undefined && waited < 5000; waited += 20) {
    line = logLines.find((each) => each.reqId === requestId && each.msg === "request");
    if (line === undefined) await sleep(20);
  }
  expect(line).toMatchObject({ route: "/admin/usage", status: CLIENT_CLOSED_STATUS, error: "client_closed" });
  const metrics = await (await fetch(`${server().origin}/metrics`)).text();
  expect(metrics).toMatch(/tollgate_requests_total\{route="\/admin\/usage",model="",status="499"\} 1/);
});
