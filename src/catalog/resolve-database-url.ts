/**
 * Checks a database URL and makes a relative SQLite path absolute: `sqlite:PATH` (a path, or
 * `:memory:`) or `postgres://...` / `postgresql://...`. Relative SQLite paths are resolved
 * against `baseFolder`: the config file's folder for a value written in a file, the working
 * folder for the default and for `TOLLGATE_DATABASE_URL`. Messages never repeat the URL, which
 * may hold a password.
 */
import { isAbsolute, resolve } from "node:path";

export type DatabaseUrlResult = { ok: true; url: string } | { ok: false; problem: string };

const FIX = 'write "sqlite:PATH" (such as "sqlite:./data/tollgate.db") or "postgres://user:password@host/db"';

export function resolveDatabaseUrl(url: string, baseFolder: string): DatabaseUrlResult {
  if (url.startsWith("sqlite:")) {
    const path = url.slice("sqlite:".length);
    if (path === "") return { ok: false, problem: `the SQLite path is empty; ${FIX}` };
    if (path === ":memory:" || isAbsolute(path)) return { ok: true, url };
    return { ok: true, url: `sqlite:${resolve(baseFolder, path)}` };
  }
  if (url.startsWith("postgres://") || url.startsWith("postgresql://")) {
    if (!URL.canParse(url)) return { ok: false, problem: `is not a valid PostgreSQL URL; ${FIX}` };
    return { ok: true, url };
  }
  return { ok: false, problem: `must start with "sqlite:" or "postgres://"; ${FIX}` };
}
