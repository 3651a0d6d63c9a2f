import { Type } from "@sinclair/typebox";
import { USAGE_GROUPINGS } from "../../store/usage-query.ts";
import { DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT } from "../routes/admin-paging.ts";
import { Nullable, StringEnum } from "./schema-helpers.ts";

/**
 * The admin API's request shapes (bodies, path parameters, query strings): the routes validate
 * with them, and `/openapi.json` shows them.
 */

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
