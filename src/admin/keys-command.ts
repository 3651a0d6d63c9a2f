import type { ApiKeyPage, ApiKeyRecord, Store } from "../store/store.ts";
import { CliError, type OutputSink, pacedByReader } from "./cli-error.ts";
import { createKey } from "./create-key.ts";
import { dispatchSubcommand, writeSubcommandHelp } from "./dispatch-subcommand.ts";
import { requireAccount } from "./find-account.ts";
import { findRefusedAdminKey } from "./find-refused-admin-key.ts";
import { createTableLayout, formatInstant } from "./format-table.ts";
import { parseCommandArguments, stringOption } from "./parse-command-arguments.ts";
import { parseInstant } from "./parse-instant.ts";
import { readAccountNames } from "./read-account-names.ts";
import { showTyped } from "./read-key-reference.ts";
import { readPages } from "./read-pages.ts";
import { revokeKey } from "./revoke-key.ts";
import { type KeyUpdate, NOTHING_TO_CHANGE, updateKey } from "./update-key.ts";
import { validateAllowedModels, validateExpiry, validateKeyName } from "./validate-key-settings.ts";
import { withCliErrors } from "./with-cli-errors.ts";

const USAGE = {
  create:
    "tollgate keys create --account NAME|ID [--name N] [--models a,b] [--rpm N] [--tpm N] [--expires ISO]",
  list: "tollgate keys list [--account NAME|ID]",
  revoke: "tollgate keys revoke PUBLIC_ID|KEY",
  update:
    "tollgate keys update PUBLIC_ID|KEY [--name N] [--models a,b|--all-models] [--rpm N|--no-rpm] [--tpm N|--no-tpm] [--expires ISO|--no-expiry]",
} as const;

const ACCOUNTS_HINT = "List accounts with `tollgate accounts list`.";
const KEYS_HINT = "List keys with `tollgate keys list`.";

/**
 * Said when no admin key in the store works any more and this command's config sets no
 * `admin_key`. The server's may still set one (its `${VAR}` may be set only in the server's
 * environment).
 */
export const LAST_ADMIN_KEY_NOTICE =
  "That was the last admin key in the store: the admin API now takes only the config's admin_key (TOLLGATE_ADMIN_KEY), if it sets one. Without one, restart the server: `tollgate serve` makes a new admin key and prints it once.";

/** Options of {@link runKeysCommand}. */
export interface KeysCommandOptions {
  now?: () => Date;
  /** The catalogue's model ids: `--models` must name some of them. Default: not checked. */
  knownModels?: readonly string[];
  /**
   * Tells the servers of a key that `revoke` has just revoked or `update` has just changed
   * (scale-out: Redis), so they drop it at once.
   */
  afterKeyChanged?: (publicId: string) => Promise<void>;
  /**
   * The admin key this command's config sets (`admin_key`, `TOLLGATE_ADMIN_KEY`) and where it
   * comes from (`TOLLGATE_ADMIN_KEY`, `admin_key in FILE`): what `revoke` of the last admin key
   * says a restart does depends on it. Default: none set.
   */
  configuredAdminKey?: { key: string; source: string };
}

/**
 * Writes the usage that `argv` (what follows `keys`) asks for, and returns whether it did; it
 * needs no store, so the CLI calls it before opening one.
 */
export function writeKeysHelp(argv: readonly string[], out: OutputSink): boolean {
  return writeSubcommandHelp({ group: "keys", usage: USAGE, argv, out });
}

/**
 * `tollgate keys ...`: `argv` holds what follows `keys` (the dispatcher has already taken out
 * global options such as `--config`). Writes to `out`; throws a {@link CliError} for anything
 * the operator got wrong. A new key is printed once, alone on the first line; no command ever
 * prints a secret again.
 */
export async function runKeysCommand(
  store: Store,
  argv: readonly string[],
  out: OutputSink,
  options: KeysCommandOptions = {},
): Promise<void> {
  await dispatchSubcommand({
    group: "keys",
    usage: USAGE,
    argv,
    out,
    handlers: {
      create: (rest) => createCommand(store, rest, out, options),
      list: (rest) => listCommand(store, rest, out),
      revoke: (rest) => revokeCommand(store, rest, out, options),
      update: (rest) => updateCommand(store, rest, out, options),
    },
  });
}

async function createCommand(
  store: Store,
  argv: readonly string[],
  out: OutputSink,
  options: KeysCommandOptions,
): Promise<void> {
  const { values } = parseCommandArguments(argv, {
    options: {
      account: { type: "string" },
      name: { type: "string" },
      models: { type: "string" },
      rpm: { type: "string" },
      tpm: { type: "string" },
      expires: { type: "string" },
    },
    positionals: 0,
    usage: USAGE.create,
  });
  const accountRef = stringOption(values, "account");
  if (accountRef === undefined) {
    throw new CliError(`--account is required: the account the key spends from.\nUsage: ${USAGE.create}`);
  }
  const modelsText = stringOption(values, "models");
  const rpmText = stringOption(values, "rpm");
  const tpmText = stringOption(values, "tpm");
  const expiresText = stringOption(values, "expires");
  const settings = {
    name: stringOption(values, "name"),
    allowedModels: modelsText === undefined ? undefined : parseModelList(modelsText),
    rpm: rpmText === undefined ? undefined : parseLimit("--rpm", rpmText),
    tpm: tpmText === undefined ? undefined : parseLimit("--tpm", tpmText),
    expiresAt: expiresText === undefined ? undefined : parseExpiresOption(expiresText),
  };

  // Checked before the store is touched: a command whose arguments are refused creates no
  // database (README), and an unknown model or a past expiry was refused only after one was.
  await withCliErrors(async () => {
    validateKeyName(settings.name ?? "");
    if (settings.allowedModels !== undefined)
      validateAllowedModels(settings.allowedModels, options.knownModels);
    validateExpiry(settings.expiresAt, options.now?.() ?? new Date());
  });
  const account = await withCliErrors(() => requireAccount(store, accountRef), { notFound: ACCOUNTS_HINT });
  const created = await withCliErrors(() =>
    createKey(
      store,
      { role: "user", accountId: account.id, ...settings },
      {
        ...(options.now === undefined ? {} : { now: options.now }),
        ...(options.knownModels === undefined ? {} : { knownModels: options.knownModels }),
      },
    ),
  );
  out.write(created.key);
  writeKeySettings(out, created.record, `${account.name} (${account.id})`);
  out.write("Keep the key now: it is not shown again.");
}

/** A key's settings, a line each, as `create` and `update` print them: never its secret. */
function writeKeySettings(out: OutputSink, record: ApiKeyRecord, account: string): void {
  out.write(`public id: ${record.publicId}`);
  out.write(`account:   ${account}`);
  out.write(`name:      ${record.name === "" ? "-" : record.name}`);
  out.write(`models:    ${describeModels(record)}`);
  out.write(`rpm:       ${record.rpm ?? "no limit"}`);
  out.write(`tpm:       ${record.tpm ?? "no limit"}`);
  out.write(`expires:   ${record.expiresAt === undefined ? "never" : formatInstant(record.expiresAt)}`);
}

/**
 * `keys update`: changes a key's settings in place (its holder keeps the key), then tells the
 * servers, as `revoke` does. Each setting is given, cleared (`--all-models`, `--no-rpm`,
 * `--no-tpm`, `--no-expiry`), or left out to keep it.
 */
async function updateCommand(
  store: Store,
  argv: readonly string[],
  out: OutputSink,
  options: KeysCommandOptions,
): Promise<void> {
  const { values, positionals } = parseCommandArguments(argv, {
    options: {
      name: { type: "string" },
      models: { type: "string" },
      "all-models": { type: "boolean" },
      rpm: { type: "string" },
      "no-rpm": { type: "boolean" },
      tpm: { type: "string" },
      "no-tpm": { type: "boolean" },
      expires: { type: "string" },
      "no-expiry": { type: "boolean" },
    },
    positionals: 1,
    usage: USAGE.update,
  });
  const setting = <Value>(given: string, cleared: string, parse: (text: string) => Value) => {
    const text = stringOption(values, given);
    const clear = values[cleared] === true;
    if (text !== undefined && clear) {
      throw new CliError(`Give --${given} or --${cleared}, not both.\nUsage: ${USAGE.update}`);
    }
    return clear ? null : text === undefined ? undefined : parse(text);
  };
  const update: KeyUpdate = {
    name: stringOption(values, "name"),
    allowedModels: setting("models", "all-models", parseModelList),
    rpm: setting("rpm", "no-rpm", (text) => parseLimit("--rpm", text)),
    tpm: setting("tpm", "no-tpm", (text) => parseLimit("--tpm", text)),
    expiresAt: setting("expires", "no-expiry", parseExpiresOption),
  };
  if (Object.values(update).every((value) => value === undefined)) {
    throw new CliError(`${NOTHING_TO_CHANGE}\nUsage: ${USAGE.update}`);
  }
  // As `create`: the arguments are checked before the store is touched.
  await withCliErrors(async () => {
    if (update.name != null) validateKeyName(update.name);
    if (update.allowedModels != null) validateAllowedModels(update.allowedModels, options.knownModels);
    if (update.expiresAt != null) validateExpiry(update.expiresAt, options.now?.() ?? new Date());
  });
  const record = await withCliErrors(
    () =>
      updateKey(store, positionals[0] ?? "", update, {
        ...(options.now === undefined ? {} : { now: options.now }),
        ...(options.knownModels === undefined ? {} : { knownModels: options.knownModels }),
      }),
    { notFound: KEYS_HINT },
  );
  await options.afterKeyChanged?.(record.publicId);
  const account = record.accountId === undefined ? undefined : await store.getAccountById(record.accountId);
  out.write(`Updated key ${record.publicId}: every server uses its new settings within 1 second.`);
  writeKeySettings(
    out,
    record,
    record.accountId === undefined ? "(admin)" : `${account?.name ?? "?"} (${record.accountId})`,
  );
}

function parseModelList(text: string): string[] {
  const models = text
    .split(",")
    .map((model) => model.trim())
    .filter((model) => model !== "");
  if (models.length === 0) {
    throw new CliError("--models needs at least one model id, such as --models qwen3-0.6b,gpt-4o-mini.");
  }
  return models;
}

function parseLimit(option: string, text: string): number {
  const value = /^[0-9]+$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new CliError(
      `${option} must be a whole number from 1 to ${Number.MAX_SAFE_INTEGER} (leave it out for no limit), not '${showTyped(text)}'.`,
    );
  }
  return value;
}

function parseExpiresOption(text: string): Date {
  try {
    return parseInstant(text);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new CliError(`--expires: ${reason}`, { cause: error });
  }
}

async function listCommand(store: Store, argv: readonly string[], out: OutputSink): Promise<void> {
  const { values } = parseCommandArguments(argv, {
    options: { account: { type: "string" } },
    positionals: 0,
    usage: USAGE.list,
  });
  const accountRef = stringOption(values, "account");
  const account =
    accountRef === undefined
      ? undefined
      : await withCliErrors(() => requireAccount(store, accountRef), { notFound: ACCOUNTS_HINT });
  const filter = account === undefined ? {} : { accountId: account.id };
  const pages = readPages(
    (limit, after: ApiKeyPage["after"]) => store.listApiKeys(filter, { limit, after }),
    (last) => ({ createdAt: last.createdAt, publicId: last.publicId }),
  );
  const layout = createTableLayout([
    "PUBLIC ID",
    "ACCOUNT",
    "NAME",
    "MODELS",
    "RPM",
    "TPM",
    "EXPIRES",
    "REVOKED",
    "CREATED",
  ]);
  const accountNames = new Map<string, string>();
  let listed = 0;
  for await (const keys of pacedByReader(pages, out)) {
    listed += keys.length;
    await readAccountNames(
      store,
      keys.map((key) => key.accountId),
      accountNames,
    );
    const rows = keys.map((key) => [
      key.publicId,
      key.accountId === undefined ? "(admin)" : (accountNames.get(key.accountId) ?? key.accountId),
      key.name === "" ? "-" : key.name,
      describeModels(key),
      key.rpm === undefined ? "-" : String(key.rpm),
      key.tpm === undefined ? "-" : String(key.tpm),
      key.expiresAt === undefined ? "never" : formatInstant(key.expiresAt),
      key.revokedAt === undefined ? "-" : formatInstant(key.revokedAt),
      formatInstant(key.createdAt),
    ]);
    for (const line of layout(rows)) out.write(line);
  }
  if (listed > 0) return;
  out.write(
    account === undefined
      ? "No keys yet. Create one with `tollgate keys create --account NAME`."
      : `Account ${account.name} has no keys yet. Create one with \`tollgate keys create --account ${account.name}\`.`,
  );
}

async function revokeCommand(
  store: Store,
  argv: readonly string[],
  out: OutputSink,
  options: KeysCommandOptions,
): Promise<void> {
  const { positionals } = parseCommandArguments(argv, { options: {}, positionals: 1, usage: USAGE.revoke });
  const outcome = await withCliErrors(
    () => revokeKey(store, positionals[0] ?? "", options.now === undefined ? {} : { now: options.now }),
    { notFound: KEYS_HINT },
  );
  if (outcome.newlyRevoked) await options.afterKeyChanged?.(outcome.publicId);
  out.write(
    outcome.newlyRevoked
      ? `Revoked key ${outcome.publicId}: it is refused everywhere within 1 second.`
      : `Key ${outcome.publicId} was already revoked.`,
  );
  if (outcome.lastAdminKey) {
    out.write(await describeLastAdminKeyRevoked(store, outcome.publicId, options));
  }
}

/**
 * What `revoke` says once no stored admin key works, given the admin key this command's config
 * sets: a server started with the same config and environment takes that key, unless it is a
 * stored key that was revoked or has expired, and then makes a new one (admin/bootstrap.ts).
 */
async function describeLastAdminKeyRevoked(
  store: Store,
  revokedPublicId: string,
  options: KeysCommandOptions,
): Promise<string> {
  const configured = options.configuredAdminKey;
  if (configured === undefined) return LAST_ADMIN_KEY_NOTICE;
  const now = (options.now ?? (() => new Date()))();
  const refused = await findRefusedAdminKey(store, configured.key, now);
  if (refused === undefined) {
    return `That was the last admin key in the store: the admin API now takes only the admin key that ${configured.source} sets, and a restart makes no new one while it is set.`;
  }
  const named =
    refused.publicId === revokedPublicId
      ? "this very key"
      : refused.reason === "user"
        ? `the user key ${refused.publicId}, which is no admin key`
        : `key ${refused.publicId}, which ${refused.reason === "revoked" ? "was revoked" : "has expired"} too`;
  return `That was the last admin key in the store, and ${configured.source} names ${named}: no admin key works now. Restart the server: \`tollgate serve\` makes a new admin key and prints it once. Then put the new key in ${configured.source} in place of ${refused.reason === "user" ? "the user key" : "the revoked one, which is refused for good"}.`;
}

/** The models a key may use; an admin key belongs to no account and may use none (SPEC §11). */
function describeModels(key: Pick<ApiKeyRecord, "allowedModels" | "role">): string {
  if (key.role === "admin") return "none (admin key)";
  return key.allowedModels === undefined ? "all" : key.allowedModels.join(",");
}
