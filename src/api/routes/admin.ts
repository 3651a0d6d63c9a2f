import { Readable } from "node:stream";
import { type Static, Type } from "@sinclair/typebox";
import type { FastifyBaseLogger, FastifyInstance } from "fastify";
import { createAccount } from "../../admin/create-account.ts";
import { createKey } from "../../admin/create-key.ts";
import { creditAccount } from "../../admin/credit-account.ts";
import { describeAccount, summarizeAccount } from "../../admin/describe-account.ts";
import { requireAccount } from "../../admin/find-account.ts";
import { hasNulCharacter } from "../../admin/has-nul-character.ts";
import { listAccountSummaries } from "../../admin/list-account-summaries.ts";
import { decodePageCursor, encodePageCursor, type PageCursor } from "../../admin/page-cursor.ts";
import { readAccountNames } from "../../admin/read-account-names.ts";
import { hideKeySecrets } from "../../admin/read-key-reference.ts";
import { revokeKey } from "../../admin/revoke-key.ts";
import {
  decodeUsageCursor,
  encodeUsageCursor,
  readUsagePages,
  renderUsageGroup,
  renderUsageRow,
  selectUsage,
  sumUsageGroups,
  usageCsvLines,
} from "../../admin/usage-report.ts";
import { formatAmount, MoneyFormatError, parseAmount } from "../../billing/money.ts";
import { AppError } from "../../errors/app-error.ts";
import { type KeyRole, type Store, USAGE_GROUPINGS, type UsageRecord } from "../../store/store.ts";
import { Nullable, StringEnum } from "../schemas/schema-helpers.ts";
import { registerKeyUpdateRoute } from "./admin-key-update.ts";
import {
  describeSuggestion,
  mapAdminErrors,
  readInstant,
  readKeyIdParam,
  rejectUnknownFields,
  renderKey,
} from "./admin-route-helpers.ts";

/** Options of {@link registerAdminRoutes}. */
export interface AdminRoutesOptions {
  store: Store;
  /** The authenticated key of a request (the caller has already refused requests without one). */
  getKey: (request: object) => { role: KeyRole; publicId: string };
  /**
   * Called once a key is revoked or changed here (`POST /admin/keys/:id/revoke`, `PATCH
   * /admin/keys/:id`), so the caller can drop it from caches at once.
   */
  onKeyChanged?: (publicId: string) => void;
  /** Called once an account is credited here. */
  onAccountCredited?: (accountId: string) => void;
  /** The clock for new accounts, keys and credits. Default: now. */
  now?: () => Date;
  /** The catalogue's model ids now: a key's new `models` must be among them. Default: not checked. */
  modelIds?: () => readonly string[];
}

const DecimalAmount = (description: string) =>
  Type.String({ description: `${description} A decimal string, such as "10" or "0.25"; never a number.` });

export const CreateAccountBody = Type.Object({
  name: Type.String({ description: "Unique: letters, digits, '.', '_', '@', '-'; at most 64 characters." }),
  balance: Type.Optional(Nullable(DecimalAmount("The opening balance; default 0."))),
});

export const CreditBody = Type.Object({
  amount: DecimalAmount("The amount to add; more than 0."),
  note: Type.Optional(Nullable(Type.String({ description: "Why; at most 500 characters." }))),
});

export const CreateKeyBody = Type.Object({
  account: Type.String({ description: "The account the key spends from: its name or id." }),
  name: Type.Optional(Nullable(Type.String({ description: "A label; at most 100 characters." }))),
  models: Type.Optional(
    Nullable(
      Type.Array(Type.String(), {
        minItems: 1,
        maxItems: 1000,
        description: "The model ids the key may use; leave it out for every model.",
      }),
    ),
  ),
  rpm: Type.Optional(Nullable(Type.Integer({ minimum: 1, description: "Requests per minute." }))),
  tpm: Type.Optional(Nullable(Type.Integer({ minimum: 1, description: "Tokens per minute." }))),
  expires_at: Type.Optional(
    Nullable(Type.String({ description: "ISO 8601, such as 2025-12-31 or 2025-12-31T18:00:00Z." })),
  ),
});

export const IdParams = Type.Object({ id: Type.String() });

/**
 * Rows in a page of `GET /admin/usage` as JSON (accounts and keys in a page of their listings)
 * unless `limit` says otherwise, and the most it may say.
 */
export const DEFAULT_PAGE_LIMIT = 1000;
export const MAX_PAGE_LIMIT = 10_000;

export const KeysQuery = Type.Object({
  account: Type.Optional(Type.String({ description: "Only the keys of this account (name or id)." })),
  limit: Type.Optional(
    Type.String({
      description: `Keys per page, 1 to ${MAX_PAGE_LIMIT} (${DEFAULT_PAGE_LIMIT} unless given).`,
    }),
  ),
  after: Type.Optional(Type.String({ description: "The next_after of the previous page: keys after it." })),
});

export const AccountsQuery = Type.Object({
  limit: Type.Optional(
    Type.String({
      description: `Accounts per page, 1 to ${MAX_PAGE_LIMIT} (${DEFAULT_PAGE_LIMIT} unless given).`,
    }),
  ),
  after: Type.Optional(
    Type.String({ description: "The next_after of the previous page: accounts after it." }),
  ),
});

export const UsageQuery = Type.Object({
  account: Type.Optional(Type.String({ description: "An account name or id." })),
  key: Type.Optional(
    Type.String({ description: "A key's public id, or the whole key (only its public id is used)." }),
  ),
  model: Type.Optional(Type.String()),
  since: Type.Optional(Type.String({ description: "ISO 8601; rows at or after it." })),
  until: Type.Optional(Type.String({ description: "ISO 8601; rows before it." })),
  group_by: Type.Optional(StringEnum(USAGE_GROUPINGS)),
  format: Type.Optional(StringEnum(["json", "csv"])),
  limit: Type.Optional(
    Type.String({
      description: `Rows per page, 1 to ${MAX_PAGE_LIMIT} (JSON: ${DEFAULT_PAGE_LIMIT} unless given; CSV: every row unless given).`,
    }),
  ),
  after: Type.Optional(Type.String({ description: "The next_after of the previous page: rows after it." })),
});

/** Body fields that name a record to find, not a value to store: one with a NUL finds nothing. */
const REFERENCE_FIELDS: ReadonlySet<string> = new Set(["account"]);

/**
 * The `Idempotency-Key` header of a credit, if sent: 1 to 255 visible ASCII characters (as the
 * IETF draft and payment APIs have it), so that a client retrying a credit after a timeout gets
 * the one it made instead of a second.
 */
function readIdempotencyKey(value: string | string[] | undefined): string | undefined {
  if (value === undefined) return undefined;
  const key = Array.isArray(value) ? undefined : value.trim();
  if (key === undefined || !/^[\x21-\x7e]{1,255}$/.test(key)) {
    throw new AppError(
      "invalid_value",
      "The Idempotency-Key header must be one value of 1 to 255 visible ASCII characters (a UUID, say).",
      { param: "idempotency-key" },
    );
  }
  return key;
}

/** 403 `admin_key_required`: a user key on `/admin/*`. */
export function adminKeyRequired(): AppError {
  return new AppError(
    "admin_key_required",
    "The admin API needs an admin key. Pass the admin key (the one `tollgate serve` printed when it made it, or admin_key / TOLLGATE_ADMIN_KEY) as `Authorization: Bearer ...`.",
  );
}

/**
 * The admin HTTP API under `/admin` (SPEC §6): accounts (create, list, get, credit), keys
 * (create, list, revoke, and update in `admin-key-update.ts`) and usage (filter, group, CSV).
 * JSON bodies, amounts as decimal strings, unknown body fields and query parameters refused (a
 * typo must not silently drop a balance or widen a listing). Register it inside the authenticated scope: a request without a valid key
 * has had its 401 already; this answers a non-admin key with 403 `admin_key_required` before
 * looking at the body.
 *
 * Responses: an account is `{id, name, balance, reserved, spent}`; a key is `{public_id,
 * account_id, account, role, name, models, rpm, tpm, expires_at, revoked_at, created_at}` (`null`
 * where unset), with the whole `key` once, on creation; lists are `{object: "list", data}`. Usage
 * rows come in pages (`limit`, `after`), with `has_more` and `next_after` (the cursor of the last
 * row, for the next page or for rows that come later; on an empty page the `after` it was asked
 * with, null without one); usage as CSV streams every row.
 */
export function registerAdminRoutes(app: FastifyInstance, options: AdminRoutesOptions): void {
  const { store } = options;
  const clock = options.now === undefined ? {} : { now: options.now };

  app.register(async (admin) => {
    admin.addHook("onRequest", async (request) => {
      if (options.getKey(request).role !== "admin") throw adminKeyRequired();
    });

    // After the admin check, before the schema's: a misspelt filter must not widen a listing.
    admin.addHook("preValidation", async (request) => {
      rejectUnknownQueryParameters(request.query, request.routeOptions.schema?.querystring);
    });

    // After the schema's: the same answer on every store to a value no store keeps.
    admin.addHook("preHandler", async (request) => {
      rejectNulCharacters(request.body, request.routeOptions.schema?.body);
    });

    admin.post<{ Body: Static<typeof CreateAccountBody> }>(
      "/admin/accounts",
      { schema: { body: CreateAccountBody } },
      async (request, reply) => {
        const body = request.body;
        rejectUnknownFields(body, CreateAccountBody);
        const balanceNano = body.balance == null ? 0n : readAmount("balance", body.balance);
        const account = await mapAdminErrors(() =>
          createAccount(store, { name: body.name, balanceNano }, clock),
        );
        reply.code(201);
        // A new account's money is what it opened with: no read after the commit, whose failure
        // would answer 503 for an account made (and its retry be refused, the name taken).
        return summarizeAccount(account, {
          balanceNano: account.balanceNano,
          reservedNano: 0n,
          spentNano: 0n,
        });
      },
    );

    admin.get<{ Querystring: Static<typeof AccountsQuery> }>(
      "/admin/accounts",
      { schema: { querystring: AccountsQuery } },
      async (request) => {
        const { limit, after } = await readPageRequest(request.query);
        // A page at a time, oldest first: on SQLite reading every account at once holds the event
        // loop (about half a second at 100,000 accounts), and with it every request in flight.
        const accounts = await listAccountSummaries(store, {
          limit: limit + 1,
          after: after === undefined ? undefined : { createdAt: after.createdAt, name: after.tieBreaker },
        });
        const page = finishPage(accounts, limit, request.query.after, ({ account }) =>
          encodePageCursor(account.createdAt, account.name),
        );
        return { object: "list", data: page.items.map((each) => each.summary), ...page.position };
      },
    );

    admin.get<{ Params: Static<typeof IdParams> }>(
      "/admin/accounts/:id",
      { schema: { params: IdParams } },
      async (request) =>
        await mapAdminErrors(async () => {
          const account = await requireAccount(store, request.params.id);
          return await describeAccount(store, account);
        }),
    );

    admin.post<{ Params: Static<typeof IdParams>; Body: Static<typeof CreditBody> }>(
      "/admin/accounts/:id/credits",
      { schema: { params: IdParams, body: CreditBody } },
      async (request, reply) => {
        const body = request.body;
        rejectUnknownFields(body, CreditBody);
        const amountNano = readAmount("amount", body.amount);
        const idempotencyKey = readIdempotencyKey(request.headers["idempotency-key"]);
        const { account, credit, replayed, money } = await mapAdminErrors(async () => {
          const found = await requireAccount(store, request.params.id);
          const made = await creditAccount(
            store,
            { account: found, amountNano, note: body.note ?? undefined, idempotencyKey },
            clock,
          );
          return { account: found, ...made };
        });
        options.onAccountCredited?.(account.id);
        // A retry with the same key gets the credit it made, and says so.
        if (replayed) reply.header("idempotent-replayed", "true");
        reply.code(201);
        return {
          credit: {
            id: credit.id,
            amount: formatAmount(credit.amountNano),
            note: credit.note ?? null,
            created_at: credit.createdAt.toISOString(),
          },
          // As the credit's own transaction read it: a read after the commit that failed would
          // answer 503 for a credit made, and the client's retry would credit again.
          account: summarizeAccount(account, money),
        };
      },
    );

    admin.post<{ Body: Static<typeof CreateKeyBody> }>(
      "/admin/keys",
      { schema: { body: CreateKeyBody } },
      async (request, reply) => {
        const body = request.body;
        rejectUnknownFields(body, CreateKeyBody);
        const expiresAt = body.expires_at == null ? undefined : readInstant("expires_at", body.expires_at);
        const { account, created } = await mapAdminErrors(async () => {
          const found = await requireAccount(store, body.account);
          const made = await createKey(
            store,
            {
              role: "user",
              accountId: found.id,
              name: body.name ?? undefined,
              allowedModels: body.models ?? undefined,
              rpm: body.rpm ?? undefined,
              tpm: body.tpm ?? undefined,
              expiresAt,
            },
            { ...clock, ...(options.modelIds === undefined ? {} : { knownModels: options.modelIds() }) },
          );
          return { account: found, created: made };
        });
        reply.code(201);
        return { key: created.key, ...renderKey(created.record, account.name) };
      },
    );

    admin.get<{ Querystring: Static<typeof KeysQuery> }>(
      "/admin/keys",
      { schema: { querystring: KeysQuery } },
      async (request) => {
        const reference = request.query.account;
        const { limit, after } = await readPageRequest(request.query);
        const account =
          reference === undefined ? undefined : await mapAdminErrors(() => requireAccount(store, reference));
        // A page at a time, as accounts: every key at once held a SQLite server's event loop
        // about 0.7 s at 100,000 keys.
        const page = finishPage(
          await store.listApiKeys(account === undefined ? {} : { accountId: account.id }, {
            limit: limit + 1,
            after:
              after === undefined ? undefined : { createdAt: after.createdAt, publicId: after.tieBreaker },
          }),
          limit,
          request.query.after,
          (key) => encodePageCursor(key.createdAt, key.publicId),
        );
        const keys = page.items;
        const names = await readAccountNames(
          store,
          keys.map((key) => key.accountId),
          new Map(account === undefined ? [] : [[account.id, account.name]]),
        );
        return {
          object: "list",
          data: keys.map((key) =>
            renderKey(key, key.accountId === undefined ? undefined : names.get(key.accountId)),
          ),
          ...page.position,
        };
      },
    );

    admin.post<{ Params: Static<typeof IdParams> }>(
      "/admin/keys/:id/revoke",
      { schema: { params: IdParams } },
      async (request) => {
        rejectAnyBody(request.body);
        const publicId = readKeyIdParam(request.params.id);
        // A key revoking itself would lock its holder out of the admin API at once (and a store's
        // generated admin key is never made again): that is done from the CLI, on purpose.
        if (publicId === options.getKey(request).publicId) {
          throw new AppError(
            "invalid_value",
            "An admin key cannot revoke itself over the API: revoke it with another admin key, or run `tollgate keys revoke` on the server.",
            { param: "id" },
          );
        }
        const outcome = await mapAdminErrors(() => revokeKey(store, publicId, clock));
        options.onKeyChanged?.(publicId);
        const record = await store.getApiKeyByPublicId(publicId);
        if (record === undefined) throw new AppError("not_found", `No key has the public id ${publicId}.`);
        const account =
          record.accountId === undefined ? undefined : await store.getAccountById(record.accountId);
        return { ...renderKey(record, account?.name), already_revoked: !outcome.newlyRevoked };
      },
    );

    registerKeyUpdateRoute(admin, options);

    admin.get<{ Querystring: Static<typeof UsageQuery> }>(
      "/admin/usage",
      { schema: { querystring: UsageQuery } },
      async (request, reply) => {
        const query = request.query;
        const grouping = query.group_by;
        if (grouping !== undefined && (query.limit !== undefined || query.after !== undefined)) {
          throw new AppError(
            "invalid_value",
            "limit and after page rows; group_by answers every group at once.",
            {
              param: query.after === undefined ? "limit" : "after",
            },
          );
        }
        const limit = query.limit === undefined ? undefined : readPageLimit(query.limit);
        const selection = await mapAdminErrors(() => selectUsage(store, query));
        const cursor = query.after;
        const after =
          cursor === undefined ? undefined : await mapAdminErrors(async () => decodeUsageCursor(cursor));
        if (query.format === "csv") {
          // Streamed a page at a time: an export of the whole ledger holds one page in memory.
          const lines = usageCsvLines(store, selection, grouping, { after, limit });
          const stream = await startCsvStream(lines, request.log);
          reply.type("text/csv; charset=utf-8");
          return stream;
        }
        if (grouping !== undefined) {
          const groups = await sumUsageGroups(store, selection, grouping);
          return {
            object: "list",
            group_by: grouping,
            data: groups.map((group) => renderUsageGroup(group, grouping)),
          };
        }
        const pageRows = limit ?? DEFAULT_PAGE_LIMIT;
        const records: UsageRecord[] = [];
        for await (const page of readUsagePages(store, selection, { after, limit: pageRows + 1 })) {
          records.push(...page);
        }
        const page = finishPage(records, pageRows, cursor, encodeUsageCursor);
        return {
          object: "list",
          data: page.items.map((record) => renderUsageRow(record, selection.accountNames)),
          ...page.position,
        };
      },
    );
  });
}

/** The `limit` (DEFAULT_PAGE_LIMIT unless given) and `after` of a page of accounts or keys. */
async function readPageRequest(query: {
  limit?: string | undefined;
  after?: string | undefined;
}): Promise<{ limit: number; after: PageCursor | undefined }> {
  const cursor = query.after;
  return {
    limit: query.limit === undefined ? DEFAULT_PAGE_LIMIT : readPageLimit(query.limit),
    after: cursor === undefined ? undefined : await mapAdminErrors(async () => decodePageCursor(cursor)),
  };
}

/**
 * A page of a listing from `items`, read with one more than `limit` to say whether another page
 * follows: its first `limit` items, `has_more`, and `next_after`, the cursor of its last item; an
 * empty page gives back the cursor it was asked with (`after`), so that a poller following
 * next_after stays where it was instead of starting again from the first row.
 */
function finishPage<Item>(
  items: Item[],
  limit: number,
  after: string | undefined,
  cursorOf: (last: Item) => string,
): { items: Item[]; position: { has_more: boolean; next_after: string | null } } {
  const hasMore = items.length > limit;
  if (hasMore) items.length = limit;
  const last = items.at(-1);
  return {
    items,
    position: { has_more: hasMore, next_after: last === undefined ? (after ?? null) : cursorOf(last) },
  };
}

/** The `limit` of a listing (a query string, so text): a whole number of rows in range. */
function readPageLimit(text: string): number {
  const limit = /^[0-9]{1,6}$/.test(text) ? Number(text) : Number.NaN;
  if (limit >= 1 && limit <= MAX_PAGE_LIMIT) return limit;
  throw new AppError("invalid_value", `limit must be a whole number from 1 to ${MAX_PAGE_LIMIT}.`, {
    param: "limit",
  });
}

/**
 * The CSV as a stream, once its first lines (the header and the first page: see
 * {@link usageCsvLines}) are read: a store that fails before any row is sent gets the request
 * its error answer. Past that the status is sent, and a failure can only cut the response short:
 * it is logged, since the client sees only a connection closed early.
 */
async function startCsvStream(lines: AsyncGenerator<string[]>, log: FastifyBaseLogger): Promise<Readable> {
  const join = (chunk: string[]) => chunk.map((line) => `${line}\r\n`).join("");
  const first = await lines.next();
  async function* chunks(): AsyncGenerator<string> {
    if (first.done === true) return;
    yield join(first.value);
    try {
      for await (const chunk of lines) yield join(chunk);
    } catch (error) {
      log.error({ err: error }, "usage CSV cut short: reading a later page failed");
      throw error;
    }
  }
  return Readable.from(chunks());
}

/**
 * Refuses a NUL character (U+0000) in a body field the route's schema names, other than one
 * that names a record to find ({@link REFERENCE_FIELDS}; finding nothing is the answer there):
 * PostgreSQL cannot store one where SQLite would, so it is refused on both, naming the field.
 */
function rejectNulCharacters(body: unknown, schema: unknown): void {
  if (typeof body !== "object" || body === null || !isObjectSchema(schema)) return;
  for (const [field, value] of Object.entries(body)) {
    // Unknown fields are the handler's to refuse, by name and with the one meant.
    if (REFERENCE_FIELDS.has(field) || !Object.hasOwn(schema.properties, field)) continue;
    const texts: unknown[] = Array.isArray(value) ? value : [value];
    if (texts.some((text) => typeof text === "string" && hasNulCharacter(text))) {
      throw new AppError(
        "invalid_value",
        `Invalid '${field}': it holds a NUL character (U+0000), which cannot be stored; remove it.`,
        { param: field },
      );
    }
  }
}

/**
 * Refuses a body on a request that takes none (no body, `{}` and `null` pass, as HTTP clients
 * send them): a field such as `{"reason": ...}` would otherwise be dropped without a word.
 */
function rejectAnyBody(body: unknown): void {
  if (body === undefined || body === null) return;
  if (typeof body !== "object" || Array.isArray(body)) {
    throw new AppError("invalid_type", "This request takes no body (or an empty JSON object).");
  }
  const unknown = Object.keys(body)[0];
  if (unknown === undefined) return;
  throw new AppError(
    "invalid_value",
    `Unknown field '${hideKeySecrets(unknown)}': this request takes none.`,
    {
      param: hideKeySecrets(unknown),
    },
  );
}

/**
 * Refuses query parameters the route's querystring schema does not name (every one where it has
 * none), naming the first one and the parameter meant: ignored, `?acount=acme` would list every
 * account's usage.
 */
function rejectUnknownQueryParameters(query: unknown, schema: unknown): void {
  if (typeof query !== "object" || query === null) return;
  const known = isObjectSchema(schema) ? Object.keys(schema.properties) : [];
  const unknown = Object.keys(query).find((name) => !known.includes(name));
  if (unknown === undefined) return;
  const shown = hideKeySecrets(unknown);
  const message =
    known.length === 0
      ? `Unknown query parameter '${shown}': this request takes none.`
      : `Unknown query parameter '${shown}'.${describeSuggestion(unknown, known)} The parameters are: ${known.join(", ")}.`;
  throw new AppError("invalid_value", message, { param: shown });
}

function isObjectSchema(schema: unknown): schema is { properties: Record<string, unknown> } {
  return (
    typeof schema === "object" &&
    schema !== null &&
    "properties" in schema &&
    typeof schema.properties === "object" &&
    schema.properties !== null
  );
}

function readAmount(field: string, text: string): bigint {
  try {
    return parseAmount(text);
  } catch (error) {
    if (error instanceof MoneyFormatError) {
      throw new AppError("invalid_value", `Invalid '${field}': ${error.message}.`, { param: field });
    }
    throw error;
  }
}
