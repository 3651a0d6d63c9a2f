/**
 * The `/admin` part of the OpenAPI document (create-openapi-document.ts): the admin routes'
 * request and response schemas and their paths, built from the schemas the routes validate with.
 */
import type { TObject } from "@sinclair/typebox";
import { headerReference } from "./openapi-headers.ts";
import {
  ANY_REQUEST_ERRORS,
  errorResponses,
  json,
  jsonBody,
  KEY_ERROR,
  REQUEST_TOO_LARGE,
  reference,
  response,
  STORE_UNAVAILABLE,
  toJson,
  VALIDATION_CODES,
} from "./openapi-responses.ts";
import { UpdateKeyBody } from "./routes/admin-key-update.ts";
import { MAX_PAGE_LIMIT } from "./routes/admin-paging.ts";
import {
  AccountsQuery,
  CreateAccountBody,
  CreateKeyBody,
  CreditBody,
  IdParams,
  KeysQuery,
  UsageQuery,
} from "./schemas/admin-request-schemas.ts";
import {
  AdminAccountListSchema,
  AdminAccountSchema,
  AdminCreatedKeySchema,
  AdminCreditSchema,
  AdminKeyListSchema,
  AdminKeySchema,
  AdminRevokedKeySchema,
  AdminUsageGroupsSchema,
  AdminUsagePageSchema,
} from "./schemas/admin-response-schemas.ts";

/**
 * An admin request body as the document shows it. The route refuses fields its schema does not
 * name (a typo must not silently drop a balance), with its own message rather than through the
 * schema: the document says so with `additionalProperties`.
 */
function closedBody(schema: TObject): Record<string, unknown> {
  return { ...toJson(schema), additionalProperties: false };
}

/**
 * The errors of a route under `/admin`: the admin key first (SPEC §11), then the request. Admin
 * keys have no rate limits: only a user key's 403 reports them.
 */
function adminErrors(statuses: Record<string, string> = {}) {
  return errorResponses(
    {
      ...ANY_REQUEST_ERRORS,
      "400": `${VALIDATION_CODES}; an unknown query parameter or body field is \`invalid_value\`. Or \`invalid_http_request\`.`,
      "401": KEY_ERROR,
      "403": "`admin_key_required`: the key is not an admin key.",
      "503": STORE_UNAVAILABLE,
      ...statuses,
    },
    { rateLimited: ["403"] },
  );
}

/**
 * The query parameters of a route, from the schema it validates its query string with. A page's
 * `limit` is validated as text (its own check words the error) but documented as the whole number
 * it must spell, so that a generated client takes a number.
 */
function queryParameters(schema: TObject) {
  const required = new Set(schema.required ?? []);
  return Object.entries(toJson(schema.properties)).map(([name, property]) => {
    const description = (property as { description?: unknown }).description;
    return {
      name,
      in: "query",
      required: required.has(name),
      ...(typeof description === "string" ? { description } : {}),
      schema:
        name === "limit"
          ? { ...(property as object), type: "integer", minimum: 1, maximum: MAX_PAGE_LIMIT }
          : property,
    };
  });
}

/** The `{id}` path parameter of an admin route, from the schema the route validates it with. */
function idParameter(description: string) {
  return { name: "id", in: "path", required: true, description, schema: toJson(IdParams.properties.id) };
}

const adminSecurity = [{ adminKey: [] }];

/** The admin schemas of `components.schemas`: request bodies, then answers. */
export function adminComponentSchemas() {
  return {
    CreateAccountRequest: closedBody(CreateAccountBody),
    CreditRequest: closedBody(CreditBody),
    CreateKeyRequest: closedBody(CreateKeyBody),
    UpdateKeyRequest: closedBody(UpdateKeyBody),
    Account: toJson(AdminAccountSchema),
    AccountList: toJson(AdminAccountListSchema),
    Credit: toJson(AdminCreditSchema),
    Key: toJson(AdminKeySchema),
    CreatedKey: toJson(AdminCreatedKeySchema),
    RevokedKey: toJson(AdminRevokedKeySchema),
    KeyList: toJson(AdminKeyListSchema),
    UsagePage: toJson(AdminUsagePageSchema),
    UsageGroups: toJson(AdminUsageGroupsSchema),
  };
}

/** The paths under `/admin`, each behind the admin key. */
export function adminPaths() {
  return {
    "/admin/accounts": {
      post: {
        operationId: "createAccount",
        summary: "Opens an account.",
        security: adminSecurity,
        requestBody: jsonBody("CreateAccountRequest"),
        responses: {
          "201": response("The new account", json(reference("Account"))),
          ...adminErrors({ "413": REQUEST_TOO_LARGE }),
        },
      },
      get: {
        operationId: "listAccounts",
        summary: "Lists the accounts with their money, a page at a time, oldest first.",
        security: adminSecurity,
        parameters: queryParameters(AccountsQuery),
        responses: {
          "200": response("The accounts", json(reference("AccountList"))),
          ...adminErrors(),
        },
      },
    },
    "/admin/accounts/{id}": {
      get: {
        operationId: "retrieveAccount",
        summary: "Retrieves one account with its money.",
        security: adminSecurity,
        parameters: [idParameter("The account's name or id.")],
        responses: {
          "200": response("The account", json(reference("Account"))),
          ...adminErrors({ "404": "`not_found`: no account has this name or id." }),
        },
      },
    },
    "/admin/accounts/{id}/credits": {
      post: {
        operationId: "creditAccount",
        summary: "Adds money to an account's balance.",
        security: adminSecurity,
        parameters: [
          idParameter("The account's name or id."),
          {
            name: "Idempotency-Key",
            in: "header",
            required: false,
            description:
              "1 to 255 visible ASCII characters: a retry with the same key gets the credit it made instead of a second one.",
            schema: { type: "string", minLength: 1, maxLength: 255 },
          },
        ],
        requestBody: jsonBody("CreditRequest"),
        responses: {
          "201": response("The credit, and the account after it", json(reference("Credit")), {
            "idempotent-replayed": headerReference("IdempotentReplayed"),
          }),
          ...adminErrors({
            "404": "`not_found`: no account has this name or id.",
            "413": REQUEST_TOO_LARGE,
          }),
        },
      },
    },
    "/admin/keys": {
      post: {
        operationId: "createKey",
        summary: "Makes a user key for an account; the whole key is shown once, in this answer.",
        security: adminSecurity,
        requestBody: jsonBody("CreateKeyRequest"),
        responses: {
          "201": response("The new key, with its secret", json(reference("CreatedKey"))),
          ...adminErrors({
            "404": "`not_found`: no account has this name or id.",
            "413": REQUEST_TOO_LARGE,
          }),
        },
      },
      get: {
        operationId: "listKeys",
        summary: "Lists the keys, never their secrets, a page at a time, oldest first.",
        security: adminSecurity,
        parameters: queryParameters(KeysQuery),
        responses: {
          "200": response("The keys", json(reference("KeyList"))),
          ...adminErrors({ "404": "`not_found`: no account has this name or id." }),
        },
      },
    },
    "/admin/keys/{id}": {
      patch: {
        operationId: "updateKey",
        summary:
          "Changes a key's name, models, rate limits or expiry in place: the key's holder keeps it. Every replica uses the new settings within a second. A field left out keeps its value; null clears it.",
        security: adminSecurity,
        parameters: [
          idParameter(
            "The key's public id (the 12 lowercase letters and digits after `sk-tg-`). An admin key has no models or rate limits: only its name and expiry change.",
          ),
        ],
        requestBody: jsonBody("UpdateKeyRequest"),
        responses: {
          "200": response("The key with its new settings", json(reference("Key"))),
          ...adminErrors({
            "400": `${VALIDATION_CODES}; an unknown body field, a body with no field, or a revoked key (\`param: "id"\`; a revoked key cannot be changed) is \`invalid_value\`. Or \`invalid_http_request\`.`,
            "404": "`not_found`: no key has this public id.",
            "413": REQUEST_TOO_LARGE,
          }),
        },
      },
    },
    "/admin/keys/{id}/revoke": {
      post: {
        operationId: "revokeKey",
        summary: "Revokes a key; it stops working on every replica within a second. No body.",
        security: adminSecurity,
        parameters: [
          idParameter(
            "The key's public id (the 12 lowercase letters and digits after `sk-tg-`); an admin key cannot revoke itself here.",
          ),
        ],
        responses: {
          "200": response("The key, revoked", json(reference("RevokedKey"))),
          ...adminErrors({
            "404": "`not_found`: no key has this public id.",
            "413": REQUEST_TOO_LARGE,
          }),
        },
      },
    },
    "/admin/usage": {
      get: {
        operationId: "listUsage",
        summary: "Usage rows or totals, filtered, as JSON pages or as CSV.",
        security: adminSecurity,
        parameters: queryParameters(UsageQuery),
        responses: {
          "200": response(
            "The usage",
            {
              "application/json": {
                schema: { anyOf: [reference("UsagePage"), reference("UsageGroups")] },
              },
              "text/csv": {
                schema: {
                  type: "string",
                  description:
                    "With `format=csv`: a header line, then one line per row (every row, streamed, unless `limit` is given: then a page, whose position the headers `x-has-more` and `x-next-after` give as the JSON page's `has_more` and `next_after` do; the columns of the JSON rows, in order) or per group (the group, `account` when grouping by key, `requests`, `prompt_tokens`, `completion_tokens`, `cost`). Lines end with CRLF.",
                },
              },
            },
            {
              "x-has-more": headerReference("XHasMore"),
              "x-next-after": headerReference("XNextAfter"),
            },
          ),
          ...adminErrors({ "404": "`not_found`: no such account or key." }),
        },
      },
    },
  };
}
