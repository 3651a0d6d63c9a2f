import { AppError } from "../errors/app-error.ts";

/**
 * The 503 of a rate-limited key's request while Redis is down under `fail-closed`: a
 * `store_unavailable` whose store is Redis, which the request log names as such (it said "the
 * store is unavailable" with the database working).
 */
export class RateLimitsUnavailableError extends AppError {}
