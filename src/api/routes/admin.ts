import type { FastifyInstance } from "fastify";
import { AppError } from "../../errors/app-error.ts";
import type { KeyRole, Store } from "../../store/store.ts";
import { registerAccountRoutes } from "./admin-account-routes.ts";
import { registerKeyRoutes } from "./admin-key-routes.ts";
import { registerKeyUpdateRoute } from "./admin-key-update.ts";
import {
  rejectRepeatedQueryParameters,
  rejectUnknownQueryParameters,
  rejectUnstorableCharacters,
} from "./admin-request-checks.ts";
import { registerUsageRoute } from "./admin-usage-routes.ts";

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
  /** How long a CSV export may wait for a client that reads nothing (write-event-stream.ts). */
  clientStallTimeoutMs?: number | undefined;
}

/** 403 `admin_key_required`: a user key on `/admin/*`. */
export function adminKeyRequired(): AppError {
  return new AppError(
    "admin_key_required",
    "The admin API needs an admin key. Pass the admin key (the one `tollgate serve` printed when it made it, or admin_key / TOLLGATE_ADMIN_KEY) as `Authorization: Bearer ...`.",
  );
}

/**
 * The admin HTTP API under `/admin` (SPEC §6): accounts (create, list, get, credit: in
 * `admin-account-routes.ts`), keys (create, list, revoke in `admin-key-routes.ts`, and update in
 * `admin-key-update.ts`) and usage (filter, group, CSV: in `admin-usage-routes.ts`), their request
 * shapes in `schemas/admin-request-schemas.ts`. JSON bodies, amounts as decimal strings, unknown
 * body fields and query parameters refused (a typo must not silently drop a balance or widen a
 * listing). Register it inside the authenticated scope: a request without a valid key has had its
 * 401 already; this answers a non-admin key with 403 `admin_key_required` before looking at the
 * body.
 *
 * Responses: an account is `{id, name, balance, reserved, spent}`; a key is `{public_id,
 * account_id, account, role, name, models, rpm, tpm, expires_at, revoked_at, created_at}` (`null`
 * where unset), with the whole `key` once, on creation; lists are `{object: "list", data}`. Usage
 * rows come in pages (`limit`, `after`), with `has_more` and `next_after` (the cursor of the last
 * row, for the next page or for rows that come later; on an empty page the `after` it was asked
 * with, null without one); usage as CSV streams every row.
 */
export function registerAdminRoutes(app: FastifyInstance, options: AdminRoutesOptions): void {
  app.register(async (admin) => {
    admin.addHook("onRequest", async (request) => {
      if (options.getKey(request).role !== "admin") throw adminKeyRequired();
    });

    // After the admin check, before the schema's: a misspelt filter must not widen a listing.
    admin.addHook("preValidation", async (request) => {
      rejectUnknownQueryParameters(request.query, request.routeOptions.schema?.querystring);
      rejectRepeatedQueryParameters(request.query);
    });

    // After the schema's: the same answer on every store to a value no store keeps.
    admin.addHook("preHandler", async (request) => {
      rejectUnstorableCharacters(request.body, request.routeOptions.schema?.body);
    });

    registerAccountRoutes(admin, options);
    registerKeyRoutes(admin, options);
    registerKeyUpdateRoute(admin, options);
    registerUsageRoute(admin, options);
  });
}
