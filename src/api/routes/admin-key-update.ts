import { type Static, Type } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import { updateKey } from "../../admin/update-key.ts";
import { AppError } from "../../errors/app-error.ts";
import { IdParams } from "../schemas/admin-request-schemas.ts";
import { Nullable } from "../schemas/schema-helpers.ts";
import type { AdminRoutesOptions } from "./admin.ts";
import {
  mapAdminErrors,
  readInstant,
  readKeyIdParam,
  rejectUnknownFields,
  renderKey,
} from "./admin-route-helpers.ts";

export const UpdateKeyBody = Type.Object(
  {
    name: Type.Optional(
      Nullable(Type.String({ description: 'A label; at most 100 characters; "" or null for none.' })),
    ),
    models: Type.Optional(
      Nullable(
        Type.Array(Type.String(), {
          minItems: 1,
          maxItems: 1000,
          description: "The model ids the key may use, from the catalogue; null for every model.",
        }),
      ),
    ),
    rpm: Type.Optional(
      Nullable(Type.Integer({ minimum: 1, description: "Requests per minute; null for no limit." })),
    ),
    tpm: Type.Optional(
      Nullable(Type.Integer({ minimum: 1, description: "Tokens per minute; null for no limit." })),
    ),
    expires_at: Type.Optional(
      Nullable(
        Type.String({
          description:
            "When the key stops working, in the future: ISO 8601, such as 2025-12-31 or 2025-12-31T18:00:00Z; null for never.",
        }),
      ),
    ),
  },
  { description: "The settings to change: a field left out keeps its value." },
);

/** The body's fields, as a message names them. */
const FIELDS = Object.keys(UpdateKeyBody.properties).join(", ");

/**
 * `PATCH /admin/keys/:id`: changes a key's settings in place, keeping its secret (the holder
 * deploys nothing new), and answers the key as `GET /admin/keys` shows it. Register it in the
 * admin scope (`registerAdminRoutes`), whose hooks check the admin key, the query and NULs.
 *
 * A revoked key is refused with 400 `invalid_value` (`param: "id"`), as every other refusal of
 * what the request asks: the error catalogue has no 409, and the contract lists none. The key
 * is dropped from caches at once (`onKeyChanged`), so the next request goes by its new settings
 * on every replica.
 */
export function registerKeyUpdateRoute(admin: FastifyInstance, options: AdminRoutesOptions): void {
  const { store } = options;
  admin.patch<{ Params: Static<typeof IdParams>; Body: Static<typeof UpdateKeyBody> }>(
    "/admin/keys/:id",
    { schema: { params: IdParams, body: UpdateKeyBody } },
    async (request) => {
      const publicId = readKeyIdParam(request.params.id);
      const body = request.body;
      rejectUnknownFields(body, UpdateKeyBody);
      // An expiry a second away would lock its holder out as a revocation would (which the API
      // refuses an admin key for itself too), and none at all would let a key made to expire
      // (`keys create --role admin --expires`) make itself permanent: done with another admin key
      // or from the CLI.
      if (body.expires_at !== undefined && publicId === options.getKey(request).publicId) {
        throw new AppError(
          "invalid_value",
          "An admin key cannot change its own expiry over the API: change it with another admin key, or run `tollgate keys update` on the server.",
          { param: "expires_at" },
        );
      }
      if (Object.keys(body).length === 0) {
        throw new AppError("invalid_value", `Nothing to change: give at least one of ${FIELDS}.`);
      }
      const expires = body.expires_at;
      const record = await mapAdminErrors(
        () =>
          updateKey(
            store,
            publicId,
            {
              // null clears it, as it clears the other settings.
              name: body.name === null ? "" : body.name,
              allowedModels: body.models,
              rpm: body.rpm,
              tpm: body.tpm,
              expiresAt: expires == null ? expires : readInstant("expires_at", expires),
            },
            {
              ...(options.now === undefined ? {} : { now: options.now }),
              ...(options.modelIds === undefined ? {} : { knownModels: options.modelIds() }),
            },
          ),
        { key: "id" },
      );
      options.onKeyChanged?.(publicId);
      const account =
        record.accountId === undefined ? undefined : await store.getAccountById(record.accountId);
      return renderKey(record, account?.name);
    },
  );
}
