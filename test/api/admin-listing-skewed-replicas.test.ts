/**
 * Replicas of one PostgreSQL database whose clocks differ: a follower of `next_after` on
 * `GET /admin/accounts` and `GET /admin/keys` sees every account and key, wherever it was made.
 * Regression: each replica stamped new accounts and keys with its own clock, so one made on a
 * replica 2 s slow came 2 s behind a follower's cursor and was never listed to it (an admin
 * review's follower missed 301 of 600 accounts and 75 of 600 keys). They take the database's time
 * now, as usage rows do (src/store/postgres/creation-stamps.ts).
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createKey } from "../../src/admin/create-key.ts";
import { createAuthenticator } from "../../src/auth/authenticator.ts";
import { openStore } from "../../src/store/open-store.ts";
import type { Store } from "../../src/store/store.ts";
import { createPostgresTestSchema } from "../store/postgres-test-database.ts";
import { buildAdminTestApp } from "./build-admin-test-app.ts";

const schema = await createPostgresTestSchema();
if ("skipped" in schema) console.warn(`Skipping the skewed replicas' listing tests: ${schema.skipped}.`);

/** How far behind the slow replica's clock runs, as in the review. */
const SKEW_MS = 2_000;
/** How long a follower polls for what it expects before the test looks at what it saw. */
const CATCH_UP_MS = 2_500;

interface Replica {
  store: Store;
  app: FastifyInstance;
  origin: string;
}

const replicas: Replica[] = [];
/** A replica whose clock is right, and one whose clock runs {@link SKEW_MS} behind. */
let punctual: Replica;
let slow: Replica;
let adminKey: string;

/** A replica: a server's store on the schema and the admin API on it, on 127.0.0.1. */
async function startReplica(url: string, now?: () => Date): Promise<Replica> {
  const store = await openStore(url, { owner: true });
  const app = buildAdminTestApp({
    authenticator: createAuthenticator({ store }),
    routes: { store, ...(now === undefined ? {} : { now }) },
  });
  const origin = await app.listen({ host: "127.0.0.1", port: 0 });
  const replica = { store, app, origin };
  replicas.push(replica);
  return replica;
}

beforeAll(async () => {
  if ("skipped" in schema) return;
  punctual = await startReplica(schema.url);
  // The clock its admin routes make accounts and keys by, as a replica's own clock would be.
  slow = await startReplica(schema.url, () => new Date(Date.now() - SKEW_MS));
  adminKey = (await createKey(punctual.store, { role: "admin", accountId: undefined })).key;
});

afterAll(async () => {
  for (const replica of replicas) {
    await replica.app.close();
    await replica.store.close();
  }
  if (!("skipped" in schema)) await schema.drop();
});

async function call(replica: Replica, method: "GET" | "POST", path: string, body?: unknown) {
  const response = await fetch(`${replica.origin}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${adminKey}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  expect(response.status, text).toBeLessThan(300);
  return JSON.parse(text) as Record<string, unknown>;
}

/**
 * A follower of `next_after`: what it has seen of a listing, read page by page from where it
 * stopped, as a poller would.
 */
function follow(replica: Replica, path: "/admin/accounts" | "/admin/keys", idOf: (item: never) => string) {
  const seen: string[] = [];
  let after: string | undefined;
  const poll = async (): Promise<void> => {
    for (;;) {
      const query = new URLSearchParams({ limit: "2", ...(after === undefined ? {} : { after }) });
      const page = await call(replica, "GET", `${path}?${query}`);
      seen.push(...(page.data as never[]).map(idOf));
      after = (page.next_after as string | null) ?? after;
      if (page.has_more !== true) return;
    }
  };
  return {
    seen,
    poll,
    /**
     * Polls until it has seen `count` items, or for {@link CATCH_UP_MS}: a row made in the
     * millisecond a listing reads waits for the next poll. Answers what it has seen.
     */
    async catchUp(count: number): Promise<string[]> {
      const deadline = Date.now() + CATCH_UP_MS;
      for (;;) {
        await poll();
        if (seen.length >= count || Date.now() > deadline) return seen;
        await sleep(20);
      }
    },
  };
}

describe.skipIf("skipped" in schema)("replicas whose clocks differ, on one PostgreSQL database", () => {
  it("list to a follower of next_after every account, also those a replica whose clock runs behind makes", async () => {
    const follower = follow(punctual, "/admin/accounts", (account: { name: string }) => account.name);
    await call(punctual, "POST", "/admin/accounts", { name: "made-on-time" });
    expect(await follower.catchUp(1)).toEqual(["made-on-time"]);

    await call(slow, "POST", "/admin/accounts", { name: "made-behind" });
    await call(punctual, "POST", "/admin/accounts", { name: "made-on-time-again" });
    expect(await follower.catchUp(3)).toEqual(["made-on-time", "made-behind", "made-on-time-again"]);
  });

  it("list to a follower of next_after every key, answered with the creation time the listing goes by", async () => {
    await call(punctual, "POST", "/admin/accounts", { name: "keyholder" });
    const follower = follow(punctual, "/admin/keys", (key: { public_id: string }) => key.public_id);
    await follower.poll();
    const before = follower.seen.length;

    const onTime = await call(punctual, "POST", "/admin/keys", { account: "keyholder" });
    const behind = await call(slow, "POST", "/admin/keys", { account: "keyholder" });
    expect((await follower.catchUp(before + 2)).slice(before)).toEqual([onTime.public_id, behind.public_id]);

    // The time stored, the database's, not the slow replica's clock.
    expect(Date.parse(behind.created_at as string)).toBeGreaterThanOrEqual(
      Date.parse(onTime.created_at as string),
    );
    const listed = await call(punctual, "GET", "/admin/keys?account=keyholder");
    expect((listed.data as { created_at: string }[]).map((key) => key.created_at)).toEqual([
      onTime.created_at,
      behind.created_at,
    ]);
  });

  it("list every account to a follower polling while both replicas make them at once", async () => {
    const follower = follow(slow, "/admin/accounts", (account: { name: string }) => account.name);
    await follower.poll();
    const before = follower.seen.length;
    const names = Array.from({ length: 60 }, (_, index) => `burst-${index}`);
    let polling = true;
    const polls = (async () => {
      while (polling) await follower.poll();
    })();
    let next = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < names.length) {
          const index = next++;
          await call(index % 2 === 0 ? punctual : slow, "POST", "/admin/accounts", { name: names[index] });
        }
      }),
    );
    polling = false;
    await polls;
    const seen = (await follower.catchUp(before + names.length)).slice(before);
    expect(names.filter((name) => !seen.includes(name))).toEqual([]);
    expect(seen).toHaveLength(names.length);
  });
});
