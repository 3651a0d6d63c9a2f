import { type TSchema, Type } from "@sinclair/typebox";
import { Nullable, StringEnum } from "./schema-helpers.ts";

/**
 * The admin API's response shapes, for `/openapi.json`: what the admin routes
 * (`routes/admin-*.ts`) answer (`renderKey`, `describeAccount`, `renderUsageRow` and
 * `renderUsageGroup`). Amounts are decimal strings in the account currency, never numbers;
 * instants are ISO 8601 UTC.
 */

const Amount = (description: string) =>
  Type.String({ description: `${description} A decimal string, such as "10" or "0.25".` });

const Instant = (description: string) => Type.String({ format: "date-time", description });

export const AdminAccountSchema = Type.Object({
  id: Type.String({ description: "A UUID." }),
  name: Type.String(),
  balance: Amount("Credits minus settled charges."),
  reserved: Amount("Set aside for requests running now."),
  spent: Amount("Settled charges, all time."),
});

/** A page of a listing of `items` (accounts, keys), oldest first, with its cursor. */
function listPage(items: TSchema, what: string) {
  return Type.Object(
    {
      object: Type.Literal("list"),
      data: Type.Array(items, { description: `The ${what}, oldest first.` }),
      has_more: Type.Boolean({ description: `True when more ${what} follow this page.` }),
      next_after: Nullable(
        Type.String({
          description:
            "The cursor of the page's last entry: pass it as `after` for the next page. On an empty page, the `after` the request gave; null when it gave none.",
        }),
      ),
    },
    { description: `A page of ${what}.` },
  );
}

export const AdminAccountListSchema = listPage(AdminAccountSchema, "accounts");

export const AdminCreditSchema = Type.Object({
  credit: Type.Object({
    id: Type.String(),
    amount: Amount("The amount added."),
    note: Nullable(Type.String()),
    created_at: Instant("When the credit was made."),
  }),
  account: AdminAccountSchema,
});

const keyProperties = {
  public_id: Type.String({ description: "The part of the key between `sk-tg-` and the next `-`." }),
  account_id: Nullable(
    Type.String({ description: "The account the key spends from; null for an admin key." }),
  ),
  account: Nullable(Type.String({ description: "That account's name." })),
  role: StringEnum(["user", "admin"]),
  name: Type.String({ description: "The key's label; may be empty." }),
  models: Nullable(
    Type.Array(Type.String(), { description: "The model ids the key may use; null for every model." }),
  ),
  rpm: Nullable(Type.Integer({ description: "Requests per minute; null for no limit." })),
  tpm: Nullable(Type.Integer({ description: "Tokens per minute; null for no limit." })),
  expires_at: Nullable(Instant("When the key stops working; null for never.")),
  revoked_at: Nullable(Instant("When the key was revoked; null while it is not.")),
  created_at: Instant("When the key was made."),
};

/** A key as the admin API shows it: never its secret or hash. */
export const AdminKeySchema = Type.Object(keyProperties);

export const AdminCreatedKeySchema = Type.Object({
  key: Type.String({ description: "The whole key, `sk-tg-...`: shown this once, only its hash is stored." }),
  ...keyProperties,
});

export const AdminRevokedKeySchema = Type.Object({
  ...keyProperties,
  already_revoked: Type.Boolean({ description: "True when the key had been revoked before this call." }),
});

export const AdminKeyListSchema = listPage(AdminKeySchema, "keys");

export const AdminUsageRowSchema = Type.Object({
  request_id: Type.String({ description: "The request's `x-request-id`." }),
  account: Type.String({ description: "The account's name." }),
  key: Type.String({ description: "The key's public id." }),
  model: Type.String(),
  prompt_tokens: Type.Integer(),
  completion_tokens: Type.Integer(),
  cost: Amount("The charge."),
  finish_reason: Nullable(Type.String()),
  error_code: Nullable(Type.String()),
  estimated: Type.Boolean({ description: "True when Tollgate counted the tokens itself." }),
  created: Instant("When the row was written: as the request was settled, at its end."),
  user: Nullable(Type.String({ description: "The `user` the request named." })),
  queue_ms: Nullable(Type.Integer({ description: "Milliseconds the request waited for the model." })),
  first_token_ms: Nullable(
    Type.Integer({ description: "Milliseconds from the request to the model's first token (or part)." }),
  ),
  total_ms: Type.Integer({ description: "Milliseconds from the request to its end." }),
  id: Type.String({
    description: "The row's own id, unique (request ids may repeat): it tells apart rows read twice.",
  }),
});

export const AdminUsagePageSchema = Type.Object(
  {
    object: Type.Literal("list"),
    data: Type.Array(AdminUsageRowSchema, { description: "The rows, oldest first." }),
    has_more: Type.Boolean({ description: "True when more rows follow this page." }),
    next_after: Nullable(
      Type.String({
        description:
          "The cursor of the page's last row: pass it as `after` for the next page, or later for the rows added since. On an empty page, the `after` the request gave (so a poller stays where it was); null when it gave none.",
      }),
    ),
  },
  { description: "A page of usage rows (without `group_by`)." },
);

const groupTotals = {
  requests: Type.Integer(),
  prompt_tokens: Type.Integer(),
  completion_tokens: Type.Integer(),
  cost: Amount("The charges."),
};

export const AdminUsageGroupsSchema = Type.Union(
  [
    Type.Object({
      object: Type.Literal("list"),
      group_by: Type.Literal("day"),
      data: Type.Array(
        Type.Object({ day: Type.String({ format: "date", description: "A UTC day." }), ...groupTotals }),
      ),
    }),
    Type.Object({
      object: Type.Literal("list"),
      group_by: Type.Literal("model"),
      data: Type.Array(Type.Object({ model: Type.String(), ...groupTotals })),
    }),
    Type.Object({
      object: Type.Literal("list"),
      group_by: Type.Literal("key"),
      data: Type.Array(
        Type.Object({
          key: Type.String({ description: "The key's public id." }),
          account: Type.String({ description: "The name of the account the key spends from." }),
          ...groupTotals,
        }),
      ),
    }),
  ],
  {
    description:
      "Usage totals per group (with `group_by`), in ascending order of the group; every group at once.",
  },
);
