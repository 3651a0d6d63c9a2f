import { describe, expect, it } from "vitest";
import { parsePostgresUrl } from "../../src/store/postgres/parse-postgres-url.ts";

describe("parsePostgresUrl", () => {
  it("passes a URL without schema to pg unchanged", () => {
    const url = "postgres://tollgate:s3cret@db.internal:6432/tollgate?sslmode=require";
    expect(parsePostgresUrl(url)).toEqual({
      connectionString: url,
      schema: undefined,
      redacted: "postgres://tollgate@db.internal:6432/tollgate",
    });
  });

  it("turns ?schema=NAME into the connections' search_path", () => {
    const location = parsePostgresUrl("postgresql://tollgate@localhost/tollgate?schema=tenant_1");
    expect(location.schema).toBe("tenant_1");
    const connection = new URL(location.connectionString);
    expect(connection.searchParams.get("schema")).toBeNull();
    expect(connection.searchParams.get("options")).toBe("-c search_path=tenant_1");
    expect(location.redacted).toBe("postgresql://tollgate@localhost/tollgate?schema=tenant_1");
  });

  it("keeps the URL's own options and sets the search_path after them", () => {
    const location = parsePostgresUrl(
      "postgres://localhost/tollgate?options=-c%20statement_timeout%3D5000&schema=app&application_name=replica-a",
    );
    const connection = new URL(location.connectionString);
    expect(connection.searchParams.get("options")).toBe("-c statement_timeout=5000 -c search_path=app");
    expect(connection.searchParams.get("application_name")).toBe("replica-a");
  });

  it("leaves the password and every other parameter out of the redacted URL", () => {
    const location = parsePostgresUrl("postgres://u:p%40ss@host/db?password=hunter2&sslkey=/k");
    expect(location.redacted).toBe("postgres://u@host/db");
  });

  it("refuses a user, password or database name whose % escape is broken, without quoting it (regression: pg's unrelated error)", () => {
    for (const [url, part] of [
      ["postgres://u:PG%zzsecret@host/db?schema=sec", "password"],
      ["postgres://u%:p@host/db", "user"],
      ["postgres://u:p@host/d%e9b", "database name"],
    ]) {
      const error = (() => {
        try {
          parsePostgresUrl(url as string);
        } catch (caught) {
          return caught as Error;
        }
        throw new Error(`${url} was taken`);
      })();
      expect(error.message).toMatch(
        new RegExp(
          `^The PostgreSQL database URL's ${part} has a % that is not followed by two hexadecimal digits`,
        ),
      );
      expect(error.message).not.toContain("secret");
    }
    expect(parsePostgresUrl("postgres://u:p%25%40ss@host/db").redacted).toBe("postgres://u@host/db");
  });

  it("refuses two schemas", () => {
    expect(() => parsePostgresUrl("postgres://h/db?schema=a&schema=b")).toThrow(/more than one schema/);
  });
});
