/**
 * A credit whose COMMIT reached PostgreSQL but whose answer was lost (the connection cut as it came
 * back) is a credit made by this request: `201` without `idempotent-replayed`. Regression: the
 * store found the row it had just committed and took it for an earlier credit with the same id,
 * so the first credit of all, even one sent without an Idempotency-Key, was answered
 * `idempotent-replayed: true` (an admin review's proxy cut the answer to COMMIT).
 */
import { connect, createServer, type Socket } from "node:net";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAccount } from "../../src/admin/create-account.ts";
import { createKey } from "../../src/admin/create-key.ts";
import { createAuthenticator } from "../../src/auth/authenticator.ts";
import { openStore } from "../../src/store/open-store.ts";
import type { Account, Store } from "../../src/store/store.ts";
import { createPostgresTestSchema } from "../store/postgres-test-database.ts";
import { buildAdminTestApp } from "./build-admin-test-app.ts";

const schema = await createPostgresTestSchema();
if ("skipped" in schema) console.warn(`Skipping the lost COMMIT answer tests: ${schema.skipped}.`);

/** A TCP proxy in front of PostgreSQL that, once armed, cuts the connection whose COMMIT it passes as the answer comes back. */
interface CommitCuttingProxy {
  port: number;
  /** The next COMMIT reaches the server; its answer never reaches the client. */
  arm(): void;
  /** Answers to COMMIT dropped so far. */
  readonly cuts: number;
  close(): Promise<void>;
}

async function startCommitCuttingProxy(target: { host: string; port: number }): Promise<CommitCuttingProxy> {
  let armed = false;
  let cuts = 0;
  const sockets = new Set<Socket>();
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => {});
  };
  const server = createServer((client) => {
    const upstream = connect(target.port, target.host);
    track(client);
    track(upstream);
    let cutting = false;
    client.on("data", (chunk: Buffer) => {
      // A simple query message ('Q') of COMMIT, as kysely ends a transaction.
      if (armed && chunk[0] === 0x51 && /^commit\0$/i.test(chunk.subarray(5).toString("latin1"))) {
        armed = false;
        cutting = true;
      }
      upstream.write(chunk);
    });
    upstream.on("data", (chunk: Buffer) => {
      if (cutting) {
        cuts++;
        client.destroy();
        upstream.destroy();
        return;
      }
      client.write(chunk);
    });
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (typeof address !== "object" || address === null) throw new Error("the proxy has no port");
  return {
    port: address.port,
    arm: () => {
      armed = true;
    },
    get cuts() {
      return cuts;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

let proxy: CommitCuttingProxy;
/** A server's store, through the proxy. */
let proxied: Store;
/** The same database, straight: what the test reads. */
let direct: Store;
let app: FastifyInstance;
let origin: string;
let adminKey: string;

beforeAll(async () => {
  if ("skipped" in schema) return;
  const url = new URL(schema.url);
  proxy = await startCommitCuttingProxy({ host: url.hostname, port: Number(url.port || 5432) });
  direct = await openStore(schema.url);
  adminKey = (await createKey(direct, { role: "admin", accountId: undefined })).key;
  url.hostname = "127.0.0.1";
  url.port = String(proxy.port);
  proxied = await openStore(url.toString(), { owner: true });
  app = buildAdminTestApp({
    authenticator: createAuthenticator({ store: proxied }),
    routes: { store: proxied },
  });
  origin = await app.listen({ host: "127.0.0.1", port: 0 });
});

afterAll(async () => {
  await app?.close();
  await proxied?.close();
  await direct?.close();
  await proxy?.close();
  if (!("skipped" in schema)) await schema.drop();
});

async function credit(account: Account, amount: string, idempotencyKey?: string) {
  const response = await fetch(`${origin}/admin/accounts/${account.id}/credits`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${adminKey}`,
      "content-type": "application/json",
      ...(idempotencyKey === undefined ? {} : { "idempotency-key": idempotencyKey }),
    },
    body: JSON.stringify({ amount }),
  });
  const body = (await response.json()) as { credit: { id: string }; account: { balance: string } };
  return { status: response.status, replayed: response.headers.get("idempotent-replayed"), body };
}

describe.skipIf("skipped" in schema)("a credit whose answer to COMMIT is lost", () => {
  it("without an Idempotency-Key is answered as the credit it made, never as a replay", async () => {
    const account = await createAccount(direct, { name: "no-key" });
    const cutsBefore = proxy.cuts;
    proxy.arm();
    const answer = await credit(account, "1.5");
    expect(proxy.cuts).toBe(cutsBefore + 1);
    expect(answer.status).toBe(201);
    expect(answer.replayed).toBeNull();
    expect(answer.body.account.balance).toBe("1.5");
    expect((await direct.listCredits(account.id)).map((each) => each.id)).toEqual([answer.body.credit.id]);
    expect((await direct.getAccountMoney(account.id))?.balanceNano).toBe(1_500_000_000n);
  });

  it("with an Idempotency-Key is answered as made, and only its retry as a replay", async () => {
    const account = await createAccount(direct, { name: "with-key" });
    const cutsBefore = proxy.cuts;
    proxy.arm();
    const first = await credit(account, "2", "top-up-1");
    expect(proxy.cuts).toBe(cutsBefore + 1);
    expect(first.status).toBe(201);
    expect(first.replayed).toBeNull();

    const retry = await credit(account, "2", "top-up-1");
    expect(retry.status).toBe(201);
    expect(retry.replayed).toBe("true");
    expect(retry.body.credit.id).toBe(first.body.credit.id);
    expect((await direct.getAccountMoney(account.id))?.balanceNano).toBe(2_000_000_000n);
  });
});
