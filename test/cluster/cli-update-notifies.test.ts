/**
 * `tollgate keys update` on a deployment with Redis tells the servers at once, on the channel
 * their invalidation buses listen to, as `keys revoke` and the admin API do: they drop the key's
 * cached settings instead of using the old ones for up to a second.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, describe, expect, it } from "vitest";
import { createAccount } from "../../src/admin/create-account.ts";
import { createKey } from "../../src/admin/create-key.ts";
import { openStore } from "../../src/store/open-store.ts";
import { checkTestRedis, createTestPrefix } from "./redis-test-connection.ts";

const redis = await checkTestRedis();
const cli = join(import.meta.dirname, "../../src/cli.ts");
const folder = mkdtempSync(join(tmpdir(), "tollgate-cli-update-"));

afterAll(() => rmSync(folder, { recursive: true, force: true }));

describe("keys update with Redis in the config", () => {
  it.skipIf("skipped" in redis)("publishes the key's change for the servers to drop it at once", async () => {
    if ("skipped" in redis) return;
    const database = join(folder, "tollgate.db");
    const store = await openStore(`sqlite:${database}`);
    const account = await createAccount(store, { name: "updating", balanceNano: 0n });
    const { record } = await createKey(store, { role: "user", accountId: account.id, rpm: 1 });
    await store.close();
    const configFile = join(folder, "tollgate.yaml");
    writeFileSync(configFile, `database: sqlite:${database}\nredis: ${redis.url}\nmodels: []\n`);

    const prefix = createTestPrefix("cli-update");
    const subscriber = new Redis(redis.url);
    const messages: string[] = [];
    subscriber.on("message", (_channel: string, message: string) => messages.push(message));
    await subscriber.subscribe(`${prefix}invalidate`);
    try {
      const child = spawn(
        process.execPath,
        [cli, "keys", "update", record.publicId, "--rpm", "5", "--config", configFile],
        {
          stdio: ["ignore", "pipe", "pipe"],
          env: { ...process.env, TOLLGATE_REDIS_PREFIX: prefix },
        },
      );
      let output = "";
      child.stdout.on("data", (data: Buffer) => {
        output += data.toString();
      });
      child.stderr.on("data", (data: Buffer) => {
        output += data.toString();
      });
      const [code] = (await once(child, "exit")) as [number | null];
      expect(code, output).toBe(0);
      expect(output).toContain(`Updated key ${record.publicId}`);
      const reopened = await openStore(`sqlite:${database}`);
      expect((await reopened.getApiKeyByPublicId(record.publicId))?.rpm).toBe(5);
      await reopened.close();
      await expect.poll(() => messages.length, { timeout: 2_000 }).toBe(1);
      expect(JSON.parse(messages[0] ?? "{}")).toMatchObject({
        event: { type: "key-changed", publicId: record.publicId },
      });
    } finally {
      subscriber.disconnect();
    }
  });
});
