import { describe, expect, it } from "vitest";
import { encodePageCursor } from "../../src/admin/page-cursor.ts";
import { TINY_MODEL } from "../support/test-server.ts";
import { useTestServer } from "../support/use-test-server.ts";

const server = useTestServer();

async function admin(method: string, path: string, body?: unknown, key = server().adminKey) {
  const response = await fetch(`${server().origin}${path}`, {
    method,
    headers: {
      ...(key === "" ? {} : { authorization: `Bearer ${key}` }),
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return {
    status: response.status,
    headers: response.headers,
    text,
    body: text.startsWith("{") ? JSON.parse(text) : undefined,
  };
}

function chat(key: string, extra: Record<string, unknown> = {}) {
  return fetch(`${server().baseUrl}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({
      model: TINY_MODEL,
      messages: [{ role: "user", content: "Hi" }],
      max_tokens: 2,
      ...extra,
    }),
  });
}

describe("the admin API on the real server", () => {
  it("needs a key (401) and an admin key (403)", async () => {
    const none = await admin("GET", "/admin/accounts", undefined, "");
    expect(none.status).toBe(401);
    expect(none.body.error.code).toBe("invalid_api_key");
    const user = await admin("GET", "/admin/accounts", undefined, server().starterKey);
    expect(user.status).toBe(403);
    expect(user.body.error).toMatchObject({ code: "admin_key_required", type: "permission_error" });
    // Paths under /admin that do not exist as well: no key learns which ones do.
    for (const [method, path] of [
      ["GET", "/admin/nope"],
      ["DELETE", "/admin/accounts"],
      ["GET", "/admin"],
      // Runs of slashes are one (a base URL with a trailing slash): the same answers.
      ["GET", "//admin/nope"],
      ["DELETE", "//admin//accounts/"],
    ] as const) {
      expect((await admin(method, path, undefined, "")).status).toBe(401);
      expect((await admin(method, path, undefined, server().starterKey)).status).toBe(403);
      const found = await admin(method, path);
      expect(found.status).toBe(404);
      expect(found.body.error.code).toBe("not_found");
    }
  });

  it("opens an account, credits it, makes a key that works at once, and revokes it at once", async () => {
    const created = await admin("POST", "/admin/accounts", { name: "acme", balance: "0" });
    expect(created.status).toBe(201);
    const key = await admin("POST", "/admin/keys", { account: "acme", name: "ci" });
    expect(key.status).toBe(201);
    const secret: string = key.body.key;
    expect(secret).toMatch(/^sk-tg-/);

    // No balance yet: refused with 403; a credit takes effect on the next request.
    expect((await chat(secret)).status).toBe(403);
    const credit = await admin("POST", "/admin/accounts/acme/credits", { amount: "0.5", note: "top-up" });
    expect(credit.status).toBe(201);
    expect((await chat(secret)).status).toBe(200);

    const shown = await admin("GET", "/admin/accounts/acme");
    expect(shown.body).toMatchObject({ name: "acme", reserved: "0" });
    expect(shown.body.balance).not.toBe("0.5");

    const publicId = secret.split("-")[2];
    expect((await admin("POST", `/admin/keys/${publicId}/revoke`)).status).toBe(200);
    const refused = await chat(secret);
    expect(refused.status).toBe(401);

    const usage = await admin("GET", "/admin/usage?account=acme&format=csv");
    expect(usage.status).toBe(200);
    expect(usage.headers.get("content-type")).toMatch(/^text\/csv/);
    expect(usage.text.split("\r\n")[0]).toContain("request_id");
  });

  it("shows each usage row's user and timings, as the ledger stores them", async () => {
    await admin("POST", "/admin/accounts", { name: "timed", balance: "1" });
    const key = await admin("POST", "/admin/keys", { account: "timed", name: "ci" });
    const answered = await chat(key.body.key, { user: "end-user-7" });
    expect(answered.status).toBe(200);
    await answered.text();
    const usage = await admin("GET", "/admin/usage?account=timed");
    expect(usage.status).toBe(200);
    const [row] = usage.body.data;
    expect(row).toMatchObject({ user: "end-user-7", finish_reason: expect.any(String) });
    expect(Number.isInteger(row.total_ms)).toBe(true);
    expect(row.queue_ms).toBeGreaterThanOrEqual(0);
    expect(row.first_token_ms).toBeGreaterThanOrEqual(row.queue_ms);
    expect(row.total_ms).toBeGreaterThanOrEqual(row.first_token_ms);
  });

  it("takes a revoke sent with a JSON content type and no body, as HTTP clients often send it", async () => {
    const key = await admin("POST", "/admin/keys", { account: "starter", name: "empty-body" });
    const publicId = (key.body.key as string).split("-")[2];
    const response = await fetch(`${server().origin}/admin/keys/${publicId}/revoke`, {
      method: "POST",
      headers: { authorization: `Bearer ${server().adminKey}`, "content-type": "application/json" },
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ public_id: publicId, already_revoked: false });
    // `{}` is no body either; a field or another value is refused, not dropped without a word.
    expect((await admin("POST", `/admin/keys/${publicId}/revoke`, {})).body).toMatchObject({
      already_revoked: true,
    });
    const other = await admin("POST", "/admin/keys", { account: "starter", name: "with-body" });
    const otherId = (other.body.key as string).split("-")[2];
    const withField = await admin("POST", `/admin/keys/${otherId}/revoke`, { reason: "left" });
    expect(withField.status).toBe(400);
    expect(withField.body.error).toMatchObject({ code: "invalid_value", param: "reason" });
    const withArray = await admin("POST", `/admin/keys/${otherId}/revoke`, [1]);
    expect(withArray.status).toBe(400);
    expect(withArray.body.error.code).toBe("invalid_type");
    const listed = await admin("GET", "/admin/keys?account=starter");
    expect(
      listed.body.data.find((key: { public_id: string }) => key.public_id === otherId).revoked_at,
    ).toBeNull();
    // A route that reads a body still says that it is empty.
    const empty = await fetch(`${server().origin}/admin/accounts`, {
      method: "POST",
      headers: { authorization: `Bearer ${server().adminKey}`, "content-type": "application/json" },
    });
    expect(empty.status).toBe(400);
    expect(((await empty.json()) as { error: { code: string } }).error.code).toBe("invalid_json");
  });

  it("refuses a key for a model the catalogue does not have, naming the one meant", async () => {
    const before = (await server().store.listApiKeys()).length;
    const response = await admin("POST", "/admin/keys", { account: "starter", models: [`${TINY_MODEL}y`] });
    expect(response.status).toBe(400);
    expect(response.body.error).toEqual({
      message: `No model '${TINY_MODEL}y' in the catalogue. Did you mean '${TINY_MODEL}'?`,
      type: "invalid_request_error",
      param: "models",
      code: "invalid_value",
    });
    expect(await server().store.listApiKeys()).toHaveLength(before);
    const made = await admin("POST", "/admin/keys", { account: "starter", models: [TINY_MODEL] });
    expect(made.status).toBe(201);
    expect(made.body.models).toEqual([TINY_MODEL]);
  });

  it("looks at the key before an id too long to name anything, which it then does not find", async () => {
    const long = "a".repeat(101);
    const unauthenticated = await admin("GET", `/admin/accounts/${long}`, undefined, "");
    expect(unauthenticated.status).toBe(401);
    expect(unauthenticated.body.error.code).toBe("invalid_api_key");
    const unknown = await admin("GET", `/admin/accounts/${long}`);
    expect(unknown.status).toBe(404);
    expect(unknown.body.error).toMatchObject({ code: "not_found", param: "account" });
    // A public id has a form of its own, which a long one does not have.
    const revoked = await admin("POST", `/admin/keys/${long}/revoke`);
    expect(revoked.body.error).toMatchObject({
      code: "invalid_value",
      message: expect.stringMatching(/12 /),
    });
  });

  it("refuses unknown query parameters, naming the one meant, instead of widening the answer", async () => {
    const usage = await admin("GET", "/admin/usage?acount=nobody&limit=1");
    expect(usage.status).toBe(400);
    expect(usage.body.error).toEqual({
      message:
        "Unknown query parameter 'acount'. Did you mean 'account'? The parameters are: account, key, model, since, until, group_by, format, limit, after.",
      type: "invalid_request_error",
      param: "acount",
      code: "invalid_value",
    });
    const keys = await admin("GET", "/admin/keys?acount=beta");
    expect(keys.status).toBe(400);
    expect(keys.body.error).toMatchObject({ param: "acount", code: "invalid_value" });
    expect(keys.body.error.message).toContain("Did you mean 'account'?");
    const accounts = await admin("GET", "/admin/accounts?name=acme");
    expect(accounts.status).toBe(400);
    expect(accounts.body.error.message).toBe(
      "Unknown query parameter 'name'. The parameters are: limit, after.",
    );
    // Known ones still work.
    expect((await admin("GET", "/admin/keys?account=starter")).status).toBe(200);
  });

  it("names the account that differs only in case from an unknown usage filter", async () => {
    const answer = await admin("GET", "/admin/usage?account=STARTER");
    expect(answer.status).toBe(404);
    expect(answer.body.error).toMatchObject({
      code: "not_found",
      message: 'No account has the name or id "STARTER". Names match exactly: did you mean "starter"?',
    });
  });

  it("refuses another listing's cursor, saying whose it is (was read as a position)", async () => {
    const usagePage = await admin("GET", "/admin/usage?limit=1");
    const cursor = usagePage.body.next_after ?? encodePageCursor("usage", new Date(), "row");
    const answer = await admin("GET", `/admin/accounts?after=${cursor}`);
    expect(answer.status).toBe(400);
    expect(answer.body.error).toMatchObject({
      code: "invalid_value",
      param: "after",
      message:
        "after is the next_after of a page of usage, not of accounts: pass the next_after of this listing's last page.",
    });
  });

  it("refuses a query parameter given twice, saying so (was 'expected a string')", async () => {
    for (const path of ["/admin/usage?limit=1&limit=2", "/admin/keys?account=beta&account=beta"]) {
      const answer = await admin("GET", path);
      expect(answer.status).toBe(400);
      const name = path.includes("limit") ? "limit" : "account";
      expect(answer.body.error).toEqual({
        message: `Query parameter '${name}' is given more than once; give it once.`,
        type: "invalid_request_error",
        param: name,
        code: "invalid_value",
      });
    }
  });

  it("takes a whole key in GET /admin/usage?key= by its public id, and never repeats a secret", async () => {
    const made = await admin("POST", "/admin/keys", { account: "starter", name: "usage-by-key" });
    const key: string = made.body.key;
    expect((await chat(key)).status).toBe(200);
    const usage = await admin("GET", `/admin/usage?key=${key}`);
    expect(usage.status).toBe(200);
    expect(usage.body.data).toHaveLength(1);
    expect(usage.body.data[0].key).toBe(made.body.public_id);

    const secret = key.split("-")[3] ?? "";
    const mistyped = await admin("GET", `/admin/usage?key=sk-tg-${made.body.public_id}x-${secret}`);
    expect(mistyped.status).toBe(400);
    expect(mistyped.body.error.param).toBe("key");
    expect(mistyped.text).not.toContain(secret);
    const asAccount = await admin("GET", `/admin/keys?account=${key}`);
    expect(asAccount.status).toBe(404);
    expect(asAccount.text).not.toContain(secret);

    // Pasted where an amount, a date or a model goes, it is refused without its secret too.
    const pasted = [
      await admin("POST", "/admin/keys", { account: "starter", models: [key] }),
      await admin("POST", "/admin/keys", { account: "starter", expires_at: key }),
      await admin("POST", "/admin/accounts/starter/credits", { amount: key }),
      await admin("GET", `/admin/usage?since=${key}`),
    ];
    for (const refused of pasted) {
      expect(refused.status).toBe(400);
      expect(refused.text).toContain(`sk-tg-${made.body.public_id}-...`);
      expect(refused.text).not.toContain(secret);
    }
  });

  it("credits once per Idempotency-Key, however often the request is retried", async () => {
    expect((await admin("POST", "/admin/accounts", { name: "retrying", balance: "0" })).status).toBe(201);
    const credit = (amount: string, key: string) =>
      fetch(`${server().origin}/admin/accounts/retrying/credits`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${server().adminKey}`,
          "content-type": "application/json",
          "idempotency-key": key,
        },
        body: JSON.stringify({ amount, note: "top-up" }),
      });
    const first = await credit("1.5", "order-42");
    expect(first.status).toBe(201);
    expect(first.headers.get("idempotent-replayed")).toBeNull();
    const made = (await first.json()) as { credit: { id: string }; account: { balance: string } };
    expect(made.account.balance).toBe("1.5");
    const retries = await Promise.all([credit("1.5", "order-42"), credit("1.5", "order-42")]);
    for (const retry of retries) {
      expect(retry.status).toBe(201);
      expect(retry.headers.get("idempotent-replayed")).toBe("true");
      const body = (await retry.json()) as { credit: { id: string }; account: { balance: string } };
      expect(body.credit.id).toBe(made.credit.id);
      expect(body.account.balance).toBe("1.5");
    }
    // The same key for another amount is a mistake, refused; a new key credits again.
    const misused = await credit("2", "order-42");
    expect(misused.status).toBe(400);
    expect(((await misused.json()) as { error: { param: string } }).error.param).toBe("idempotency-key");
    expect((await credit("2", "order-43")).status).toBe(201);
    const account = await admin("GET", "/admin/accounts/retrying");
    expect(account.body.balance).toBe("3.5");
    expect((await credit("1", "")).status).toBe(400);
  });

  it("refuses to let an admin key revoke itself, which would lock its holder out", async () => {
    const ownId = server().adminKey.split("-")[2];
    const refused = await admin("POST", `/admin/keys/${ownId}/revoke`);
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatchObject({ code: "invalid_value", param: "id" });
    expect(refused.body.error.message).toMatch(/cannot revoke itself/);
    expect((await admin("GET", "/admin/accounts")).status).toBe(200);
  });

  it("gives back the after cursor on an empty page, so a poller following next_after stays put", async () => {
    const made = await admin("POST", "/admin/keys", { account: "starter", name: "poller" });
    expect((await chat(made.body.key)).status).toBe(200);
    const first = await admin("GET", `/admin/usage?key=${made.body.public_id}`);
    expect(first.body.data).toHaveLength(1);
    const cursor: string = first.body.next_after;
    expect(cursor).toEqual(expect.any(String));
    // Nothing new: the same cursor again, not null (which would start over from the first row).
    const empty = await admin("GET", `/admin/usage?key=${made.body.public_id}&after=${cursor}`);
    expect(empty.body).toEqual({ object: "list", data: [], has_more: false, next_after: cursor });
    expect((await chat(made.body.key)).status).toBe(200);
    const next = await admin("GET", `/admin/usage?key=${made.body.public_id}&after=${empty.body.next_after}`);
    expect(next.body.data).toHaveLength(1);
    expect(next.body.data[0].request_id).not.toBe(first.body.data[0].request_id);
    // Without a cursor, an empty page has none to give.
    const nothing = await admin("GET", "/admin/usage?model=no-such-model");
    expect(nothing.body).toMatchObject({ data: [], next_after: null });
  });

  it("counts a credit note's and a key name's characters as code points", async () => {
    const note = `${"x".repeat(499)}\u{1F680}`;
    const credited = await admin("POST", "/admin/accounts/starter/credits", { amount: "0.01", note });
    expect(credited.status).toBe(201);
    expect(credited.body.credit.note).toBe(note);
    const tooLong = await admin("POST", "/admin/accounts/starter/credits", {
      amount: "0.01",
      note: `x${note}`,
    });
    expect(tooLong.status).toBe(400);
    expect(tooLong.body.error).toMatchObject({ code: "invalid_value", param: "note" });
    const name = `${"n".repeat(99)}\u{1F511}`;
    const key = await admin("POST", "/admin/keys", { account: "starter", name });
    expect(key.status).toBe(201);
    expect(key.body.name).toBe(name);
    expect((await admin("POST", "/admin/keys", { account: "starter", name: `n${name}` })).status).toBe(400);
  });

  it("validates bodies like the public API: amounts are decimal strings", async () => {
    const response = await admin("POST", "/admin/accounts", { name: "numbers", balance: 5 });
    expect(response.status).toBe(400);
    expect(response.body.error).toMatchObject({ code: "invalid_type", param: "balance" });
  });
});
