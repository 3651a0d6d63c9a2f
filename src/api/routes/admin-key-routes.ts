import type { Static } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import { createKey } from "../../admin/create-key.ts";
import { requireAccount } from "../../admin/find-account.ts";
import { encodePageCursor } from "../../admin/page-cursor.ts";
import { readAccountNames } from "../../admin/read-account-names.ts";
import { revokeKey } from "../../admin/revoke-key.ts";
import { AppError } from "../../errors/app-error.ts";
import { CreateKeyBody, IdParams, KeysQuery } from "../schemas/admin-request-schemas.ts";
import type { AdminRoutesOptions } from "./admin.ts";
import { finishPage, readPageRequest } from "./admin-paging.ts";
import { rejectAnyBody } from "./admin-request-checks.ts";
import {
  mapAdminErrors,
  readInstant,
  readKeyIdParam,
  rejectUnknownFields,
  renderKey,
} from "./admin-route-helpers.ts";

/**
 * The key routes of the admin API: `POST /admin/keys`, `GET /admin/keys` and `POST
 * /admin/keys/:id/revoke` (`PATCH /admin/keys/:id` is in `admin-key-update.ts`). Register them in
 * the admin scope (`registerAdminRoutes`), whose hooks check the admin key, the query and NULs.
 */
export function registerKeyRoutes(admin: FastifyInstance, options: AdminRoutesOptions): void {
  const { store } = options;
  const clock = options.now === undefined ? {} : { now: options.now };

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
      const { limit, after } = await readPageRequest(request.query, "keys");
      const account =
        reference === undefined ? undefined : await mapAdminErrors(() => requireAccount(store, reference));
      // A page at a time, as accounts: every key at once held a SQLite server's event loop
      // about 0.7 s at 100,000 keys.
      const page = finishPage(
        await store.listApiKeys(account === undefined ? {} : { accountId: account.id }, {
          limit: limit + 1,
          after: after === undefined ? undefined : { createdAt: after.createdAt, publicId: after.tieBreaker },
        }),
        limit,
        request.query.after,
        (key) => encodePageCursor("keys", key.createdAt, key.publicId),
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
      // Named as the path names it, as PATCH does (param "id", not the store's "key").
      const outcome = await mapAdminErrors(() => revokeKey(store, publicId, clock), { key: "id" });
      options.onKeyChanged?.(publicId);
      const record = await store.getApiKeyByPublicId(publicId);
      if (record === undefined) throw new AppError("not_found", `No key has the public id ${publicId}.`);
      const account =
        record.accountId === undefined ? undefined : await store.getAccountById(record.accountId);
      return { ...renderKey(record, account?.name), already_revoked: !outcome.newlyRevoked };
    },
  );
}
