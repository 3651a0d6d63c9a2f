import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runAccountsCommand } from "../../src/admin/accounts-command.ts";
import { CliError } from "../../src/admin/cli-error.ts";
import { createKey as createStoredKey } from "../../src/admin/create-key.ts";
import { runKeysCommand } from "../../src/admin/keys-command.ts";
import { parseApiKey } from "../../src/auth/api-key.ts";
import { createAuthenticator } from "../../src/auth/authenticator.ts";
import { openStore } from "../../src/store/open-store.ts";
import type { Store } from "../../src/store/store.ts";
import { makeTemporaryDirectory, newDatabaseUrl } from "../store/temporary-directory.ts";
import { collectOutput } from "./cli-output.ts";

const directory = makeTemporaryDirectory();
const now = () => new Date("2025-06-01T12:00:00.000Z");
let store: Store;
/** The public ids `afterKeyChanged` was told of (what the CLI publishes to the servers). */
let told: string[];

beforeEach(async () => {
  store = await openStore(newDatabaseUrl(directory));
  told = [];
  await runAccountsCommand(store, ["create", "acme", "--balance", "10"], collectOutput(), { now });
});

afterEach(async () => {
  await store.close();
});

async function run(...argv: string[]): Promise<string[]> {
  const out = collectOutput();
  await runKeysCommand(store, argv, out, {
    now,
    knownModels: ["qwen3-0.6b", "m1", "m2"],
    afterKeyChanged: async (publicId) => {
      told.push(publicId);
    },
  });
  return out.lines;
}

async function createKey(...options: string[]): Promise<{ key: string; publicId: string }> {
  const lines = await run("create", "--account", "acme", ...options);
  const key = lines[0] ?? "";
  return { key, publicId: parseApiKey(key)?.publicId ?? "" };
}

describe("keys update", () => {
  it("changes every setting in place, prints them as create does, never the secret, and tells the servers", async () => {
    const { key, publicId } = await createKey("--name", "ci", "--rpm", "1");
    const lines = await run(
      "update",
      publicId,
      "--name",
      "deploy",
      "--models",
      "m1, m2",
      "--rpm",
      "5",
      "--tpm",
      "10000",
      "--expires",
      "2030-01-01",
    );
    const account = await store.getAccountByName("acme");
    expect(lines).toEqual([
      `Updated key ${publicId}: every server uses its new settings within 1 second.`,
      `public id: ${publicId}`,
      `account:   acme (${account?.id})`,
      "name:      deploy",
      "models:    m1,m2",
      "rpm:       5",
      "tpm:       10000",
      "expires:   2030-01-01T00:00:00Z",
    ]);
    expect(lines.join("\n")).not.toContain(key.slice(-43));
    expect(told).toEqual([publicId]);
    // The same key works, with the new settings.
    expect(
      await createAuthenticator({ store, now: () => now().getTime() }).authenticate(`Bearer ${key}`),
    ).toMatchObject({ publicId, name: "deploy", allowedModels: ["m1", "m2"], rpm: 5, tpm: 10_000 });
  });

  it("keeps what it is not given, and clears limits, models and expiry on request", async () => {
    const { key, publicId } = await createKey(
      "--name",
      "ci",
      "--models",
      "m1",
      "--rpm",
      "60",
      "--tpm",
      "1000",
      "--expires",
      "2030-01-01",
    );
    expect((await run("update", key, "--rpm", "120")).slice(3, 8)).toEqual([
      "name:      ci",
      "models:    m1",
      "rpm:       120",
      "tpm:       1000",
      "expires:   2030-01-01T00:00:00Z",
    ]);
    expect(
      (
        await run("update", publicId, "--all-models", "--no-rpm", "--no-tpm", "--no-expiry", "--name", "")
      ).slice(3, 8),
    ).toEqual([
      "name:      -",
      "models:    all",
      "rpm:       no limit",
      "tpm:       no limit",
      "expires:   never",
    ]);
    expect(told).toEqual([publicId, publicId]);
  });

  it("gives an expired key a later expiry, which makes it work again", async () => {
    const account = await store.getAccountByName("acme");
    const created = await createStoredKey(
      store,
      { role: "user", accountId: account?.id, expiresAt: new Date("2025-06-01T12:30:00.000Z") },
      { now },
    );
    const later = () => new Date("2025-07-01T00:00:00.000Z");
    const authenticate = () =>
      createAuthenticator({ store, now: () => later().getTime() }).authenticate(`Bearer ${created.key}`);
    await expect(authenticate()).rejects.toThrow(/expired/);
    const out = collectOutput();
    await runKeysCommand(store, ["update", created.record.publicId, "--expires", "2026-01-01"], out, {
      now: later,
    });
    expect(out.lines).toContain("expires:   2026-01-01T00:00:00Z");
    await expect(authenticate()).resolves.toMatchObject({ publicId: created.record.publicId });
  });

  it("changes an admin key's name and expiry, and refuses models and limits, which it has none of", async () => {
    const { record } = await createStoredKey(store, { role: "admin", accountId: undefined }, { now });
    const lines = await run("update", record.publicId, "--name", "ops", "--expires", "2030-01-01");
    expect(lines.slice(1)).toEqual([
      `public id: ${record.publicId}`,
      "account:   (admin)",
      "name:      ops",
      // An admin key may use no model (SPEC section 11): "all" said otherwise.
      "models:    none (admin key)",
      "rpm:       no limit",
      "tpm:       no limit",
      "expires:   2030-01-01T00:00:00Z",
    ]);
    for (const option of [
      ["--rpm", "5"],
      ["--tpm", "5"],
      ["--models", "m1"],
    ]) {
      await expect(run("update", record.publicId, ...option)).rejects.toThrow(
        new CliError(
          `Key ${record.publicId} is an admin key: it has no account, models or rate limits, so only its name and expiry can be changed.`,
        ),
      );
    }
    expect(await store.getApiKeyByPublicId(record.publicId)).toMatchObject({ name: "ops", rpm: undefined });
  });

  it("refuses to change a revoked key, and says when it was revoked", async () => {
    const { publicId } = await createKey("--rpm", "1");
    await run("revoke", publicId);
    told.length = 0;
    await expect(run("update", publicId, "--rpm", "100")).rejects.toThrow(
      new CliError(
        `Key ${publicId} was revoked at 2025-06-01T12:00:00Z, and a revoked key cannot be changed: make a new key instead.`,
      ),
    );
    expect((await store.getApiKeyByPublicId(publicId))?.rpm).toBe(1);
    expect(told).toEqual([]);
  });

  it.each([
    [
      "no setting",
      [],
      /^Nothing to change: give a new name, models, rpm, tpm or expiry\.\nUsage: tollgate keys update/,
    ],
    ["an rpm and no rpm", ["--rpm", "5", "--no-rpm"], /Give --rpm or --no-rpm, not both/],
    ["models and every model", ["--models", "m1", "--all-models"], /Give --models or --all-models, not both/],
    [
      "an expiry and none",
      ["--expires", "2030-01-01", "--no-expiry"],
      /Give --expires or --no-expiry, not both/,
    ],
    ["an rpm of 0", ["--rpm", "0"], /--rpm must be a whole number from 1 to 9007199254740991/],
    ["a fractional tpm", ["--tpm", "1.5"], /--tpm must be a whole number/],
    ["an empty model list", ["--models", " , "], /--models needs at least one/],
    [
      "a model not in the catalogue",
      ["--models", "qwen3-06b"],
      /No model 'qwen3-06b' in the catalogue\. Did you mean 'qwen3-0\.6b'\?/,
    ],
    ["an expiry in the past", ["--expires", "2020-01-01"], /not in the future/],
    ["a bad expiry", ["--expires", "soon"], /--expires: "soon" is not an ISO 8601 date/],
    ["a name with an escape", ["--name", "evil\u001b[31m"], /cannot hold control characters/],
    [
      "a whole key as the name",
      ["--name", "sk-tg-abcdef123456-SECRETsecret0123"],
      /is an API key; choose a name/,
    ],
    ["an unknown option", ["--account", "acme"], /Unknown option '--account'/],
  ])("refuses %s with a CliError and changes nothing", async (_case, options, message) => {
    const { publicId } = await createKey("--name", "ci", "--rpm", "1");
    const before = await store.getApiKeyByPublicId(publicId);
    const error = await run("update", publicId, ...options).catch((reason: unknown) => reason);
    expect(error).toBeInstanceOf(CliError);
    expect((error as Error).message).toMatch(message);
    expect(await store.getApiKeyByPublicId(publicId)).toEqual(before);
    expect(told).toEqual([]);
  });

  it("refuses an unknown key, text that names no key, and a missing key", async () => {
    await expect(run("update", "zzzzzzzzzzzz", "--rpm", "5")).rejects.toThrow(
      new CliError("No key has the public id zzzzzzzzzzzz. List keys with `tollgate keys list`."),
    );
    await expect(run("update", "not-a-key", "--rpm", "5")).rejects.toThrow(/Name the key by its public id/);
    await expect(run("update", "--rpm", "5")).rejects.toThrow(
      /^Missing argument PUBLIC_ID\|KEY\.\nUsage: tollgate keys update/,
    );
  });

  it("prints its usage for --help, and is listed with the other subcommands", async () => {
    expect(await run("update", "--help")).toEqual([
      "Usage: tollgate keys update PUBLIC_ID|KEY [--name N] [--models a,b|--all-models] [--rpm N|--no-rpm] [--tpm N|--no-tpm] [--expires ISO|--no-expiry]",
    ]);
    expect(await run("--help")).toContain(
      "  tollgate keys update PUBLIC_ID|KEY [--name N] [--models a,b|--all-models] [--rpm N|--no-rpm] [--tpm N|--no-tpm] [--expires ISO|--no-expiry]",
    );
  });
});
