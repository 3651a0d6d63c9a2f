import type { Static } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import { createAccount } from "../../admin/create-account.ts";
import { creditAccount } from "../../admin/credit-account.ts";
import { describeAccount, summarizeAccount } from "../../admin/describe-account.ts";
import { requireAccount } from "../../admin/find-account.ts";
import { listAccountSummaries } from "../../admin/list-account-summaries.ts";
import { encodePageCursor } from "../../admin/page-cursor.ts";
import { formatAmount, MoneyFormatError, parseAmount } from "../../billing/money.ts";
import { AppError } from "../../errors/app-error.ts";
import { AccountsQuery, CreateAccountBody, CreditBody, IdParams } from "../schemas/admin-request-schemas.ts";
import type { AdminRoutesOptions } from "./admin.ts";
import { finishPage, readPageRequest } from "./admin-paging.ts";
import { mapAdminErrors, rejectUnknownFields } from "./admin-route-helpers.ts";

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

/**
 * The account routes of the admin API: `POST /admin/accounts`, `GET /admin/accounts`, `GET
 * /admin/accounts/:id` and `POST /admin/accounts/:id/credits`. Register them in the admin scope
 * (`registerAdminRoutes`), whose hooks check the admin key, the query and NULs.
 */
export function registerAccountRoutes(admin: FastifyInstance, options: AdminRoutesOptions): void {
  const { store } = options;
  const clock = options.now === undefined ? {} : { now: options.now };

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
      const { limit, after } = await readPageRequest(request.query, "accounts");
      // A page at a time, oldest first: on SQLite reading every account at once holds the event
      // loop (about half a second at 100,000 accounts), and with it every request in flight.
      const accounts = await listAccountSummaries(store, {
        limit: limit + 1,
        after: after === undefined ? undefined : { createdAt: after.createdAt, name: after.tieBreaker },
      });
      const page = finishPage(accounts, limit, request.query.after, ({ account }) =>
        encodePageCursor("accounts", account.createdAt, account.name),
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
      const amountNano = readAmount("amount", body.amount, "the amount to credit must be more than 0");
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
}

/**
 * Reads a decimal amount field; a bad one is a 400 naming it. `rule` replaces what a negative
 * amount is told (money's "amounts are zero or more"), for an amount that must be more than 0, as
 * the CLI says it (accounts-command.ts).
 */
function readAmount(field: string, text: string, rule?: string): bigint {
  try {
    return parseAmount(text);
  } catch (error) {
    if (error instanceof MoneyFormatError) {
      const message =
        error.reason === "negative" && rule !== undefined
          ? `${error.message.replace(/;.*$/s, "")}; ${rule}`
          : error.message;
      throw new AppError("invalid_value", `Invalid '${field}': ${message}.`, { param: field });
    }
    throw error;
  }
}
