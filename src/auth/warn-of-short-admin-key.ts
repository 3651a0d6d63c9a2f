import type { Logger } from "pino";

/**
 * Shortest `admin_key` taken without a warning: 32 characters, as `openssl rand -hex 16` makes
 * (the keys Tollgate makes are longer). Failed guesses are not slowed down: a server answered
 * about 5,000 of them a second from one client in a security review.
 */
export const MIN_ADMIN_KEY_LENGTH = 32;

/**
 * Warns at start when the config's `admin_key` is short enough to guess: whoever guesses it can
 * credit accounts and make keys. Only a warning: a short key is still the operator's choice (a
 * server on a private network, a demo).
 */
export function warnOfShortAdminKey(adminKey: string | undefined, logger: Logger): void {
  if (adminKey === undefined || adminKey.length >= MIN_ADMIN_KEY_LENGTH) return;
  logger.warn(
    { length: adminKey.length, minimum: MIN_ADMIN_KEY_LENGTH },
    `admin_key is only ${adminKey.length} characters: whoever guesses it controls every account; use a long random one, such as the output of 'openssl rand -hex 32'`,
  );
}
