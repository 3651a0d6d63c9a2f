/** A PostgreSQL database URL taken apart for `pg`. */
export interface PostgresLocation {
  /**
   * The URL to give `pg` as its `connectionString`: Tollgate's own `schema` parameter turned into
   * `options=-c search_path=SCHEMA`. May hold a password: never show it.
   */
  connectionString: string;
  /** The schema named by `?schema=NAME`; `undefined` when the URL names none. */
  schema: string | undefined;
  /** The URL without its password and parameters (the schema excepted): safe for errors and logs. */
  redacted: string;
}

/** A schema Tollgate creates and puts on the search path: a plain lowercase identifier. */
const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

const URL_SHAPE =
  "postgres://USER:PASSWORD@HOST:PORT/DATABASE (with special characters of the password percent-encoded)";

/**
 * Reads a `postgres://` or `postgresql://` URL: everything `pg` understands (user, password,
 * host, port, database, `sslmode`, `application_name`, `options`, ...), plus `schema=NAME`, which
 * puts the store's tables in that schema (created when missing) by setting the connections'
 * `search_path` to it. Without `schema`, the tables live in the connection's current schema
 * (usually `public`; `options=-c search_path=...` chooses another, which must exist).
 *
 * Errors never repeat the URL: it may hold a password.
 */
export function parsePostgresUrl(databaseUrl: string): PostgresLocation {
  let url: URL;
  try {
    url = new URL(databaseUrl);
  } catch {
    throw new Error(`The PostgreSQL database URL is not a valid URL. Write ${URL_SHAPE}.`);
  }
  if (url.protocol !== "postgres:" && url.protocol !== "postgresql:") {
    throw new Error(
      `A PostgreSQL database URL starts with postgres:// or postgresql://. Write ${URL_SHAPE}.`,
    );
  }

  // pg reads a part whose % escape is broken its own way, and then fails on something else: a
  // password "PG%zz" gave "-c search_path%3Dsec requires a value".
  for (const [part, value] of [
    ["user", url.username],
    ["password", url.password],
    ["database name", url.pathname],
  ] as const) {
    if (!hasValidEscapes(value))
      throw new Error(
        `The PostgreSQL database URL's ${part} has a % that is not followed by two hexadecimal digits (of UTF-8): write a literal % as %25. Write ${URL_SHAPE}.`,
      );
  }

  const schemas = url.searchParams.getAll("schema");
  if (schemas.length > 1) throw new Error("The PostgreSQL database URL names more than one schema.");
  const schema = schemas[0];
  if (schema !== undefined && (!SCHEMA_NAME.test(schema) || schema.startsWith("pg_"))) {
    throw new Error(
      `The schema "${schema}" in the PostgreSQL database URL is not one Tollgate uses: write 1 to 63 lowercase letters, digits and underscores, starting with a letter or underscore and not with pg_.`,
    );
  }

  let connectionString = databaseUrl;
  if (schema !== undefined) {
    url.searchParams.delete("schema");
    // Appended after the URL's own options, so it wins over a search_path set there.
    const options = [url.searchParams.get("options"), `-c search_path=${schema}`];
    url.searchParams.set("options", options.filter((option) => option !== null && option !== "").join(" "));
    connectionString = url.toString();
  }

  return { connectionString, schema, redacted: redact(url, schema) };
}

function redact(url: URL, schema: string | undefined): string {
  const user = url.username === "" ? "" : `${url.username}@`;
  const query = schema === undefined ? "" : `?schema=${schema}`;
  return `${url.protocol}//${user}${url.host}${url.pathname}${query}`;
}

/** Whether every `%` escape in `text` decodes (two hex digits each, together valid UTF-8). */
function hasValidEscapes(text: string): boolean {
  try {
    decodeURIComponent(text);
    return true;
  } catch {
    return false;
  }
}
