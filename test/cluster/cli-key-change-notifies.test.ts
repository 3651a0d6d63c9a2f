/**
 * `tollgate keys revoke` and `tollgate keys update` on a deployment with Redis tell the servers at
 * once, on the channel their invalidation buses listen to, as the admin API does: they drop the
 * key (revoked, or its settings changed) instead of finding out through their 1-second key cache.
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
import type { ApiKeyRecord } from "../../src/store/store.ts";
import { checkTestRedis, createTestPrefix } from "./redis-test-connection.ts";

const redis = await checkTestRedis();
const cli = join(import.meta.dirname, "../../src/cli.ts");
const folder = mkdtempSync(join(tmpdir(), "tollgate-cli-key-change-"));

afterAll(() => rmSync(folder, { recursive: true, force: true }));

/** Each command: its arguments after the public id, what it prints, and the key as it leaves it. */
const commands: [string, string[], string, (key: ApiKeyRecord | undefined) => void][] = [
  ["revoke", [], "Revoked key", (key) => expect(key?.revokedAt).toBeInstanceOf(Date)],
  ["update", ["--rpm", "5"], "Updated key", (key) => expect(key?.rpm).toBe(5)],
];

describe.skipIf("skipped" in redis)("keys revoke and keys update with Redis in the config", () => {
  it.each(commands)(
    "%s publishes the key's change for the servers to drop it at once",
    async (command, args, said, check) => {
      if ("skipped" in redis) return;
      const database = join(folder, `${command}.db`);
      const store = await openStore(`sqlite:${database}`);
      const account = await createAccount(store, { name: command, balanceNano: 0n });
      const { record } = await createKey(store, { role: "user", accountId: account.id, rpm: 1 });
      await store.close();
      const configFile = join(folder, `${command}.yaml`);
      writeFileSync(configFile, `database: sqlite:${database}\nredis: ${redis.url}\nmodels: []\n`);

      const prefix = createTestPrefix(`cli-${command}`);
      const subscriber = new Redis(redis.url);
      const messages: string[] = [];
      subscriber.on("message", (_channel: string, message: string) => messages.push(message));
      await subscriber.subscribe(`${prefix}invalidate`);
      try {
        const child = spawn(
          process.execPath,
          [cli, "keys", command, record.publicId, ...args, "--config", configFile],
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
        expect(output).toContain(`${said} ${record.publicId}`);
        const reopened = await openStore(`sqlite:${database}`);
        check(await reopened.getApiKeyByPublicId(record.publicId));
        await reopened.close();
        await expect.poll(() => messages.length, { timeout: 2_000 }).toBe(1);
        expect(JSON.parse(messages[0] ?? "{}")).toMatchObject({
          event: { type: "key-changed", publicId: record.publicId },
        });
      } finally {
        subscriber.disconnect();
      }
    },
  );
});
