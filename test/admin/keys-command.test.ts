import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runAccountsCommand } from "../../src/admin/accounts-command.ts";
import { CliError } from "../../src/admin/cli-error.ts";
import { createKey as createStoredKey } from "../../src/admin/create-key.ts";
import { LAST_ADMIN_KEY_NOTICE, runKeysCommand } from "../../src/admin/keys-command.ts";
import { LISTING_PAGE_ROWS } from "../../src/admin/read-pages.ts";
import { parseApiKey } from "../../src/auth/api-key.ts";
import { createAuthenticator } from "../../src/auth/authenticator.ts";
import { openStore } from "../../src/store/open-store.ts";
import type { ApiKeyPage, Store } from "../../src/store/store.ts";
import { makeTemporaryDirectory, newDatabaseUrl } from "../store/temporary-directory.ts";
import { collectOutput } from "./cli-output.ts";

const directory = makeTemporaryDirectory();
const now = () => new Date("2025-06-01T12:00:00.000Z");
let store: Store;

beforeEach(async () => {
  store = await openStore(newDatabaseUrl(directory));
  await runAccountsCommand(store, ["create", "acme", "--balance", "10"], collectOutput(), { now });
});

afterEach(async () => {
  await store.close();
});

async function run(...argv: string[]): Promise<string[]> {
  const out = collectOutput();
  await runKeysCommand(store, argv, out, { now, knownModels: ["qwen3-0.6b", "org/model:Q4", "m1", "m2"] });
  return out.lines;
}

async function createKey(...options: string[]): Promise<{ key: string; publicId: string; lines: string[] }> {
  const lines = await run("create", "--account", "acme", ...options);
  const key = lines[0] ?? "";
  return { key, publicId: parseApiKey(key)?.publicId ?? "", lines };
}

describe("keys create", () => {
  it("prints the whole key alone on the first line, then its public id and settings", async () => {
    const { key, publicId, lines } = await createKey(
      "--name",
      "ci",
      "--models",
      "qwen3-0.6b, org/model:Q4",
      "--rpm",
      "60",
      "--tpm",
      "10000",
      "--expires",
      "2030-01-01",
    );
    expect(key).toMatch(/^sk-tg-[a-z0-9]{12}-[A-Za-z0-9]{43}$/);
    const account = await store.getAccountByName("acme");
    expect(lines.slice(1)).toEqual([
      `public id: ${publicId}`,
      `account:   acme (${account?.id})`,
      "name:      ci",
      "models:    qwen3-0.6b,org/model:Q4",
      "rpm:       60",
      "tpm:       10000",
      "expires:   2030-01-01T00:00:00Z",
      "Keep the key now: it is not shown again.",
    ]);
    expect(lines.slice(1).join("\n")).not.toContain(key.slice(-43));
  });

  it("makes a key that authenticates with its settings", async () => {
    const { key } = await createKey("--models", "m1", "--rpm", "5");
    const account = await store.getAccountByName("acme");
    expect(
      await createAuthenticator({ store, now: () => now().getTime() }).authenticate(`Bearer ${key}`),
    ).toMatchObject({
      accountId: account?.id,
      role: "user",
      allowedModels: ["m1"],
      rpm: 5,
      tpm: undefined,
    });
  });

  it("shows defaults for a key without settings", async () => {
    const { lines } = await createKey();
    expect(lines.slice(3, 8)).toEqual([
      "name:      -",
      "models:    all",
      "rpm:       no limit",
      "tpm:       no limit",
      "expires:   never",
    ]);
  });

  it.each([
    ["no account", ["create"], /--account is required/],
    ["an unknown account", ["create", "--account", "nobody"], /No account has the name or id "nobody"/],
    [
      "an rpm of 0",
      ["create", "--account", "acme", "--rpm", "0"],
      /--rpm must be a whole number from 1 to 9007199254740991/,
    ],
    [
      "an rpm too large to hold (regression: it said 'of at least 1')",
      ["create", "--account", "acme", "--rpm", "100000000000000000000"],
      /--rpm must be a whole number from 1 to 9007199254740991 \(leave it out for no limit\), not '100000000000000000000'/,
    ],
    ["a fractional tpm", ["create", "--account", "acme", "--tpm", "1.5"], /--tpm must be a whole number/],
    [
      "an empty model list",
      ["create", "--account", "acme", "--models", " , "],
      /--models needs at least one/,
    ],
    [
      "a model not in the catalogue",
      ["create", "--account", "acme", "--models", "m1,qwen3-06b"],
      /No model 'qwen3-06b' in the catalogue\. Did you mean 'qwen3-0\.6b'\?/,
    ],
    [
      "an expiry in the past",
      ["create", "--account", "acme", "--expires", "2020-01-01"],
      /not in the future/,
    ],
    [
      "a bad expiry",
      ["create", "--account", "acme", "--expires", "soon"],
      /--expires: "soon" is not an ISO 8601 date/,
    ],
    [
      "a name with a line break or an escape",
      ["create", "--account", "acme", "--name", "evil\u001b[31mRED\nx"],
      /cannot hold control characters/,
    ],
    [
      "a name with a text-direction mark, which shows the rest of a table row reversed",
      ["create", "--account", "acme", "--name", "\u202eevil"],
      /cannot hold control characters/,
    ],
    [
      "a whole key as the name",
      ["create", "--account", "acme", "--name", "sk-tg-abcdef123456-SECRETsecret0123"],
      /is an API key; choose a name/,
    ],
    ["an unknown option", ["create", "--account", "acme", "--role", "admin"], /Unknown option '--role'/],
    ["a positional", ["create", "acme"], /Unexpected argument 'acme'/],
  ])("refuses %s with a CliError", async (_case, argv, message) => {
    const error = await run(...argv).catch((reason: unknown) => reason);
    expect(error).toBeInstanceOf(CliError);
    expect((error as Error).message).toMatch(message);
    expect(await store.listApiKeys()).toEqual([]);
  });
});

describe("keys create with a model a large catalogue lacks", () => {
  it("lists the first 20 ids, says how many more, and shows control characters escaped", async () => {
    const account = await store.getAccountByName("acme");
    const knownModels = Array.from({ length: 25 }, (_, index) => `model-${index}\u001b[2J`);
    const refused = createStoredKey(
      store,
      { role: "user", accountId: account?.id, allowedModels: ["zzz\u001b]0;x\u0007"] },
      { knownModels },
    );
    await expect(refused).rejects.toThrow(
      `No model 'zzz\\u001b]0;x\\u0007' in the catalogue. The catalogue has: ${knownModels
        .slice(0, 20)
        .map((id) => id.replace("\u001b", "\\u001b"))
        .join(", ")} and 5 more (see GET /v1/models or \`tollgate models list\`).`,
    );
  });
});

describe("keys --help", () => {
  it("prints the subcommand's usage wherever it stands, and creates nothing", async () => {
    expect(await run("create", "--help")).toEqual([
      "Usage: tollgate keys create --account NAME|ID [--name N] [--models a,b] [--rpm N] [--tpm N] [--expires ISO]",
    ]);
    expect(await run("create", "--account", "acme", "-h")).toHaveLength(1);
    expect(await run("revoke", "--help")).toEqual(["Usage: tollgate keys revoke PUBLIC_ID|KEY"]);
    expect(await store.listApiKeys({})).toEqual([]);
  });
});

describe("keys list", () => {
  it("prints every key without its secret", async () => {
    const first = await createKey("--name", "ci", "--models", "m1,m2", "--rpm", "60");
    const second = await createKey();
    const lines = await run("list");
    expect(lines[0]).toMatch(
      /^PUBLIC ID\s+ACCOUNT\s+NAME\s+MODELS\s+RPM\s+TPM\s+EXPIRES\s+REVOKED\s+CREATED$/,
    );
    const rowOf = (publicId: string) => lines.find((line) => line.startsWith(publicId))?.split(/\s{2,}/);
    expect(lines).toHaveLength(3);
    expect(rowOf(first.publicId)).toEqual([
      first.publicId,
      "acme",
      "ci",
      "m1,m2",
      "60",
      "-",
      "never",
      "-",
      "2025-06-01T12:00:00Z",
    ]);
    expect(rowOf(second.publicId)?.slice(0, 4)).toEqual([second.publicId, "acme", "-", "all"]);
    for (const { key } of [first, second]) expect(lines.join("\n")).not.toContain(key.slice(-43));
  });

  it("filters by account", async () => {
    await runAccountsCommand(store, ["create", "beta"], collectOutput(), { now });
    const acme = await createKey();
    await run("create", "--account", "beta");
    const lines = await run("list", "--account", "acme");
    expect(lines).toHaveLength(2);
    expect(lines[1]?.startsWith(acme.publicId)).toBe(true);
  });

  it("says how to make a key when there is none", async () => {
    expect(await run("list")).toEqual([
      "No keys yet. Create one with `tollgate keys create --account NAME`.",
    ]);
  });

  describe("of more keys than a page", () => {
    const KEYS = LISTING_PAGE_ROWS + 3;
    let publicIds: string[];
    let pages: (ApiKeyPage | undefined)[];

    beforeEach(async () => {
      const account = await store.getAccountByName("acme");
      publicIds = [];
      for (let index = 0; index < KEYS; index++) {
        const createdAt = new Date(Date.UTC(2025, 0, 1) + index * 1000);
        const { record } = await createStoredKey(
          store,
          { role: "user", accountId: account?.id, name: "" },
          { now: () => createdAt },
        );
        publicIds.push(record.publicId);
      }
      pages = [];
      const listApiKeys = store.listApiKeys.bind(store);
      store.listApiKeys = (filter, page) => {
        pages.push(page);
        return listApiKeys(filter, page);
      };
    });

    it("lists every key, oldest first, a page at a time", async () => {
      const lines = await run("list");
      expect(lines.filter((line) => line.startsWith("PUBLIC ID"))).toHaveLength(1);
      const listed = lines
        .filter((line) => !line.startsWith("PUBLIC ID"))
        .map((line) => line.split(/\s+/)[0]);
      expect(listed).toEqual(publicIds);
      expect(pages.map((page) => page?.limit)).toEqual([LISTING_PAGE_ROWS, LISTING_PAGE_ROWS]);
    });

    it("stops reading once the reader has gone", async () => {
      const lines: string[] = [];
      const out = { write: (line: string) => void lines.push(line), closed: true };
      await runKeysCommand(store, ["list"], out, { now });
      expect(pages.map((page) => page?.limit)).toEqual([LISTING_PAGE_ROWS]);
    });
  });
});

describe("keys create names", () => {
  it("counts a name's characters as code points: 100 with an emoji fit, 101 do not", async () => {
    const name = `${"n".repeat(98)}\u{1F511}\u{1F680}`;
    const { lines } = await createKey("--name", name);
    expect(lines[3]).toBe(`name:      ${name}`);
    await expect(createKey("--name", `n${name}`)).rejects.toThrow(/at most 100 characters/);
  });

  it("keeps the zero-width joiner of an emoji sequence in a name", async () => {
    const family = "team \u{1F468}\u200d\u{1F469}\u200d\u{1F467}";
    const { lines } = await createKey("--name", family);
    expect(lines[3]).toBe(`name:      ${family}`);
  });
});

describe("keys revoke", () => {
  it("revokes by public id", async () => {
    const { key, publicId } = await createKey();
    expect(await run("revoke", publicId)).toEqual([
      `Revoked key ${publicId}: it is refused everywhere within 1 second.`,
    ]);
    expect((await store.getApiKeyByPublicId(publicId))?.revokedAt).toEqual(now());
    await expect(createAuthenticator({ store }).authenticate(`Bearer ${key}`)).rejects.toThrow(/revoked/);
    const lines = await run("list");
    expect(lines[1]?.split(/\s{2,}/)[7]).toBe("2025-06-01T12:00:00Z");
  });

  it("revokes by the whole key without printing its secret", async () => {
    const { key, publicId } = await createKey();
    const lines = await run("revoke", key);
    expect(lines).toEqual([`Revoked key ${publicId}: it is refused everywhere within 1 second.`]);
    expect((await store.getApiKeyByPublicId(publicId))?.revokedAt).toBeDefined();
  });

  it("refuses a whole key whose secret is not the stored one, naming no secret (regression: revoked by its public id alone)", async () => {
    const { key, publicId } = await createKey();
    const garbled = `${key.slice(0, -1)}${key.endsWith("A") ? "B" : "A"}`;
    for (const command of [
      ["revoke", garbled],
      ["update", garbled, "--name", "x"],
    ]) {
      const refused = run(...command);
      await expect(refused).rejects.toThrow(`The key given is not key ${publicId}: its secret differs`);
      await expect(refused).rejects.not.toThrow(garbled.slice(-8));
    }
    const record = await store.getApiKeyByPublicId(publicId);
    expect(record?.revokedAt).toBeUndefined();
    expect(record?.name).not.toBe("x");
  });

  it("says when the key was already revoked", async () => {
    const { publicId } = await createKey();
    await run("revoke", publicId);
    expect(await run("revoke", publicId)).toEqual([`Key ${publicId} was already revoked.`]);
  });

  it("says so when it revokes the last admin key, and how to get a new one", async () => {
    const makeAdminKey = async () =>
      (await createStoredKey(store, { role: "admin", accountId: undefined }, { now })).record.publicId;
    const first = await makeAdminKey();
    const second = await makeAdminKey();
    // Another admin key still works: nothing more to say.
    expect(await run("revoke", first)).toEqual([
      `Revoked key ${first}: it is refused everywhere within 1 second.`,
    ]);
    expect(await run("revoke", second)).toEqual([
      `Revoked key ${second}: it is refused everywhere within 1 second.`,
      "That was the last admin key in the store: the admin API now takes only the config's admin_key (TOLLGATE_ADMIN_KEY), if it sets one. Without one, restart the server: `tollgate serve` makes a new admin key and prints it once.",
    ]);
    expect(await run("revoke", second)).toEqual([
      `Key ${second} was already revoked.`,
      LAST_ADMIN_KEY_NOTICE,
    ]);
    // A user key is not an admin key, whatever admin keys there are.
    const { publicId } = await createKey();
    expect(await run("revoke", publicId)).toEqual([
      `Revoked key ${publicId}: it is refused everywhere within 1 second.`,
    ]);
  });

  it("counts an expired admin key as gone when it says a revoked one was the last", async () => {
    const expired = await createStoredKey(
      store,
      { role: "admin", accountId: undefined, expiresAt: new Date("2025-06-01T12:30:00.000Z") },
      { now },
    );
    const active = await createStoredKey(store, { role: "admin", accountId: undefined }, { now });
    const out = collectOutput();
    await runKeysCommand(store, ["revoke", active.record.publicId], out, {
      now: () => new Date("2025-06-01T13:00:00.000Z"),
    });
    expect(out.lines).toContain(LAST_ADMIN_KEY_NOTICE);
    expect((await store.getApiKeyByPublicId(expired.record.publicId))?.revokedAt).toBeUndefined();
  });

  it("refuses an unknown key and text that names no key", async () => {
    await expect(run("revoke", "zzzzzzzzzzzz")).rejects.toThrow(
      new CliError("No key has the public id zzzzzzzzzzzz. List keys with `tollgate keys list`."),
    );
    await expect(run("revoke", "not-a-key")).rejects.toThrow(/Name the key by its public id/);
    await expect(run("revoke")).rejects.toThrow(
      /^Missing argument PUBLIC_ID\|KEY\.\nUsage: tollgate keys revoke/,
    );
  });
});
