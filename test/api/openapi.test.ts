import { Validator } from "@seriousme/openapi-schema-validator";
import { Ajv2020 } from "ajv/dist/2020.js";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createOpenApiDocument } from "../../src/api/create-openapi-document.ts";
import type { CatalogModel } from "../../src/catalog/catalog.ts";
import {
  type MockUpstream,
  resetAfter,
  startMockUpstream,
  textEvents,
} from "../engine/openai/mock-upstream.ts";
import {
  createUpstreamModelEntry,
  startTestServer,
  type TestServer,
  TINY_MODEL,
} from "../support/test-server.ts";

describe("the OpenAPI document", () => {
  it("is valid OpenAPI 3.1", async () => {
    const validator = new Validator();
    const result = await validator.validate(createOpenApiDocument({ version: "1.0.0" }));
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe("3.1");
  });

  it("is checked by a validator that does reject broken documents", async () => {
    const broken = {
      ...createOpenApiDocument({ version: "1.0.0" }),
      paths: { "/x": { get: { responses: 5 } } },
    };
    expect((await new Validator().validate(broken)).valid).toBe(false);
  });

  it("describes the request with the schema that validates it", () => {
    const document = createOpenApiDocument({ version: "1.0.0" }) as {
      components: {
        schemas: Record<string, { properties: Record<string, { minimum?: number; maximum?: number }> }>;
      };
    };
    const request = document.components.schemas.ChatCompletionRequest!;
    expect(request.properties.temperature).toMatchObject({ minimum: 0, maximum: 2 });
    expect(Object.keys(request.properties)).toEqual(
      expect.arrayContaining([
        "model",
        "messages",
        "stream",
        "tools",
        "tool_choice",
        "response_format",
        "seed",
        "user",
      ]),
    );
  });

  it("documents a page's limit as the whole number it must be, though the query carries text", () => {
    const document = createOpenApiDocument({ version: "1.0.0" }) as {
      paths: Record<string, { get?: { parameters?: { name: string; schema: unknown }[] } }>;
    };
    const limits = Object.entries(document.paths).flatMap(([path, operations]) =>
      (operations.get?.parameters ?? [])
        .filter((parameter) => parameter.name === "limit")
        .map((parameter) => [path, parameter.schema]),
    );
    expect(limits.map(([path]) => path)).toEqual(["/admin/accounts", "/admin/keys", "/admin/usage"]);
    for (const [, schema] of limits)
      expect(schema).toMatchObject({ type: "integer", minimum: 1, maximum: 10_000 });
  });
});

/** An operation's documented response for a status, or `undefined`. */
interface DocumentedResponse {
  headers?: Record<string, { $ref: string }>;
  content?: Record<string, { schema: unknown }>;
}

/** A header component of the document. */
interface DocumentedHeader {
  required?: boolean;
  schema: { type?: string };
}

type Paths = Record<string, Record<string, { responses: Record<string, DocumentedResponse> }>>;

function pathsOf(document: Record<string, unknown>): Paths {
  return document.paths as Paths;
}

/**
 * The routes a Fastify app serves, as `METHOD /path` in the router's own syntax, read from
 * `printRoutes`: each line is a node of the radix tree, indented four characters per level,
 * whose text is appended to its parent's; nodes that end a route list its methods.
 */
function readRegisteredRoutes(app: FastifyInstance): string[] {
  const prefixes: string[] = [];
  const routes: string[] = [];
  for (const line of app.printRoutes().split("\n")) {
    const match = /^(.*?)[├└]── (.*?)(?: \(([A-Z, ]+)\))?$/.exec(line);
    if (match === null) continue;
    const depth = (match[1] ?? "").length / 4;
    prefixes.length = depth;
    const path = `${prefixes.join("")}${match[2] ?? ""}`;
    prefixes.push(match[2] ?? "");
    for (const method of match[3]?.split(", ") ?? []) routes.push(`${method} ${path}`);
  }
  return routes;
}

/** A route's path as OpenAPI writes it: `:id` as `{id}`, the model id's wildcard as `{model_id}`. */
function toOpenApiPath(path: string): string {
  return path.replace(/:(\w+)/g, "{$1}").replace(/\/\*$/, "/{model_id}");
}

/**
 * Every object schema of the document closed with `additionalProperties: false` (where it says
 * nothing else), so a live answer with a field the document does not name fails validation.
 */
function closeObjects(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(closeObjects);
  if (typeof schema !== "object" || schema === null) return schema;
  const closed = Object.fromEntries(Object.entries(schema).map(([key, value]) => [key, closeObjects(value)]));
  if ("properties" in closed && !("additionalProperties" in closed)) closed.additionalProperties = false;
  return closed;
}

const DOCUMENT_ID = "https://tollgate.test/openapi.json";

/** HTTP's own headers, which say how the message travels: the document describes the rest. */
const TRANSPORT_HEADERS = new Set([
  "content-type",
  "content-length",
  "date",
  "connection",
  "keep-alive",
  "transfer-encoding",
]);

/** Validates bodies and headers against the document's responses, with JSON Schema 2020-12 as OpenAPI 3.1 has it. */
function createResponseValidator(document: Record<string, unknown>) {
  // Not strict: the document holds OpenAPI's own keys (paths, operationId, ...) around its schemas.
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  ajv.addFormat("date-time", (text: string) => /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/.test(text));
  ajv.addFormat("date", (text: string) => /^\d{4}-\d\d-\d\d$/.test(text));
  ajv.addSchema({ ...(closeObjects(document) as object), $id: DOCUMENT_ID });
  const paths = pathsOf(document);
  const components = document.components as { headers: Record<string, DocumentedHeader> };
  return {
    /** The validation errors of `body` as the response of `method path` with `status` (`[]` when valid). */
    errors(method: string, path: string, status: number, contentType: string, body: unknown) {
      const documented = paths[path]?.[method]?.responses[String(status)];
      if (documented?.content?.[contentType] === undefined)
        return [`${method} ${path} ${status} ${contentType} is not documented`];
      const pointer = ["paths", path, method, "responses", String(status), "content", contentType, "schema"]
        .map((part) => part.replaceAll("~", "~0").replaceAll("/", "~1"))
        .join("/");
      const validate = ajv.getSchema(`${DOCUMENT_ID}#/${pointer}`);
      if (validate === undefined) return [`no schema at ${pointer}`];
      // A stream's schema is that of each event's data; `[DONE]` ends every stream.
      const values =
        contentType === "text/event-stream"
          ? (body as string[]).filter((data) => data !== "[DONE]").map((data) => JSON.parse(data) as unknown)
          : [body];
      return values.flatMap((value) =>
        validate(value)
          ? []
          : (validate.errors ?? []).map((error) => `${error.instancePath} ${error.message}`),
      );
    },
    /**
     * The headers of the response that it does not document, or whose value its schema refuses,
     * and those it documents as required that the response lacks.
     */
    headerErrors(method: string, path: string, status: number, headers: Record<string, string>) {
      const documented = paths[path]?.[method]?.responses[String(status)]?.headers ?? {};
      const missing = Object.entries(documented)
        .filter(([, { $ref }]) => components.headers[$ref.split("/").at(-1) ?? ""]?.required === true)
        .filter(([name]) => headers[name] === undefined)
        .map(([name]) => `${method} ${path} ${status} lacks the required ${name}`);
      return [
        ...missing,
        ...Object.entries(headers).flatMap(([name, value]) => {
          if (TRANSPORT_HEADERS.has(name)) return [];
          const reference = documented[name]?.$ref;
          if (reference === undefined)
            return [`${method} ${path} ${status} does not document ${name}: ${value}`];
          const header = components.headers[reference.split("/").at(-1) ?? ""];
          const validate = ajv.compile(header?.schema ?? false);
          const typed = header?.schema.type === "integer" ? Number(value) : value;
          return validate(typed) ? [] : [`${name}: ${value} is not ${JSON.stringify(header?.schema)}`];
        }),
      ];
    },
  };
}

/** An upstream model whose answer breaks off mid-stream. */
const CUT_STREAM_MODEL = "cut-stream";
/** A local model whose file does not exist: it fails to load. */
const MISSING_FILE_MODEL = "missing-file";

function createMissingFileModelEntry(): CatalogModel {
  return {
    id: MISSING_FILE_MODEL,
    kind: "chat",
    ownedBy: "tollgate",
    pricing: { kind: "chat", inputPerMillion: "1", outputPerMillion: "1" },
    contextLength: 512,
    created: 1_700_000_002,
    engine: {
      type: "llama",
      model: "/nonexistent/missing.gguf",
      parallel: 1,
      maxQueue: 1,
      threads: 1,
      gpu: false,
    },
  };
}

describe("the OpenAPI document of a running server", () => {
  let server: TestServer;
  let cutStreamUpstream: MockUpstream;
  const document = createOpenApiDocument({ version: "1.0.0" });
  const validator = createResponseValidator(document);
  const expectValid = (
    method: string,
    path: string,
    answer: { status: number; contentType: string; headers: Record<string, string>; body: unknown },
  ) => {
    expect(validator.errors(method, path, answer.status, answer.contentType, answer.body)).toEqual([]);
    expect(validator.headerErrors(method, path, answer.status, answer.headers)).toEqual([]);
  };

  beforeAll(async () => {
    // The role, two deltas, then the connection breaks: Tollgate's 200 is out by then.
    cutStreamUpstream = await startMockUpstream(
      resetAfter(textEvents(["par", "tial"], { usage: undefined }).slice(0, 3)),
    );
    server = await startTestServer({
      extraModels: [
        createUpstreamModelEntry(CUT_STREAM_MODEL, cutStreamUpstream.baseUrl),
        createMissingFileModelEntry(),
      ],
    });
  });

  afterAll(async () => {
    await server?.close();
    await cutStreamUpstream?.close();
  });

  async function call(
    method: string,
    path: string,
    key: string | undefined,
    body?: unknown,
    extraHeaders: Record<string, string> = {},
  ) {
    const response = await fetch(`${server.origin}${path}`, {
      method,
      headers: {
        ...extraHeaders,
        ...(key === undefined ? {} : { authorization: `Bearer ${key}` }),
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const contentType = (response.headers.get("content-type") ?? "").split(";")[0] ?? "";
    const text = await response.text();
    return {
      status: response.status,
      contentType,
      headers: Object.fromEntries(response.headers),
      body: readBody(contentType, text),
    };
  }

  /** JSON parsed; a stream as the `data` of its events, in order; anything else as text. */
  function readBody(contentType: string, text: string): unknown {
    if (contentType === "application/json") return JSON.parse(text);
    if (contentType !== "text/event-stream") return text;
    return text
      .split("\n\n")
      .filter((event) => event !== "")
      .map((event) => event.replace(/^data: /, ""));
  }

  it("documents every route the server registers, and none it does not", () => {
    const registered = readRegisteredRoutes(server.server.app);
    // Fastify answers HEAD for every GET route by itself, as the GET without its body.
    const heads = registered.filter((route) => route.startsWith("HEAD "));
    for (const head of heads) expect(registered).toContain(head.replace(/^HEAD /, "GET "));
    const served = registered
      // Browsers' CORS preflights (cors.ts) are HTTP machinery, not an operation of the API.
      .filter((route) => !route.startsWith("HEAD ") && route !== "OPTIONS /v1/*")
      .map((route) => {
        const [method = "", path = ""] = route.split(" ");
        return `${method.toLowerCase()} ${toOpenApiPath(path)}`;
      })
      .sort();
    const documented = Object.entries(pathsOf(document))
      .flatMap(([path, operations]) => Object.keys(operations).map((method) => `${method} ${path}`))
      .sort();
    expect(served).toContain("post /admin/accounts/{id}/credits");
    expect(served).toContain("get /v1/models/{model_id}");
    expect(documented).toEqual(served);
  });

  it("describes what the admin API answers: accounts, credits, keys, usage as JSON and CSV", async () => {
    const account = await call("POST", "/admin/accounts", server.adminKey, {
      name: "documented",
      balance: "5",
    });
    expect(account.status).toBe(201);
    expectValid("post", "/admin/accounts", account);
    expectValid("get", "/admin/accounts", await call("GET", "/admin/accounts", server.adminKey));
    expectValid(
      "get",
      "/admin/accounts/{id}",
      await call("GET", "/admin/accounts/documented", server.adminKey),
    );
    const credit = await call("POST", "/admin/accounts/documented/credits", server.adminKey, {
      amount: "1.5",
    });
    expect(credit.status).toBe(201);
    expectValid("post", "/admin/accounts/{id}/credits", credit);

    const key = await call("POST", "/admin/keys", server.adminKey, {
      account: "documented",
      name: "docs",
      models: [TINY_MODEL],
      rpm: 60,
      expires_at: "2099-01-01",
    });
    expect(key.status).toBe(201);
    expectValid("post", "/admin/keys", key);
    expectValid("get", "/admin/keys", await call("GET", "/admin/keys", server.adminKey));

    // One real request, so that the usage has a row and a group to show.
    const chat = await call("POST", "/v1/chat/completions", (key.body as { key: string }).key, {
      model: TINY_MODEL,
      messages: [{ role: "user", content: "Hi" }],
      max_tokens: 2,
    });
    expect(chat.status).toBe(200);
    expectValid("post", "/v1/chat/completions", chat);
    const usage = await call("GET", "/admin/usage?account=documented", server.adminKey);
    expect((usage.body as { data: unknown[] }).data).toHaveLength(1);
    expectValid("get", "/admin/usage", usage);
    for (const grouping of ["day", "model", "key"]) {
      const groups = await call("GET", `/admin/usage?group_by=${grouping}`, server.adminKey);
      expect((groups.body as { data: unknown[] }).data.length).toBeGreaterThan(0);
      expectValid("get", "/admin/usage", groups);
    }
    const csv = await call("GET", "/admin/usage?format=csv", server.adminKey);
    expect(csv.contentType).toBe("text/csv");
    expectValid("get", "/admin/usage", csv);
    // A CSV page tells its position in headers: one more row, so that a next page follows.
    await call("POST", "/v1/chat/completions", (key.body as { key: string }).key, {
      model: TINY_MODEL,
      messages: [{ role: "user", content: "Hi" }],
      max_tokens: 1,
    });
    const csvPage = await call("GET", "/admin/usage?format=csv&limit=1", server.adminKey);
    expect(csvPage.headers).toMatchObject({ "x-has-more": "true", "x-next-after": expect.any(String) });
    expectValid("get", "/admin/usage", csvPage);

    const publicId = (key.body as { public_id: string }).public_id;
    const updated = await call("PATCH", `/admin/keys/${publicId}`, server.adminKey, {
      rpm: 120,
      models: null,
      expires_at: null,
    });
    expect(updated.status).toBe(200);
    expectValid("patch", "/admin/keys/{id}", updated);
    const revoked = await call("POST", `/admin/keys/${publicId}/revoke`, server.adminKey);
    expectValid("post", "/admin/keys/{id}/revoke", revoked);
    const refused = await call("PATCH", `/admin/keys/${publicId}`, server.adminKey, { rpm: 5 });
    expect(refused.status).toBe(400);
    expectValid("patch", "/admin/keys/{id}", refused);
    const unknown = await call("PATCH", "/admin/keys/abcdefabcdef", server.adminKey, { rpm: 5 });
    expect(unknown.status).toBe(404);
    expectValid("patch", "/admin/keys/{id}", unknown);
  });

  it("describes the errors the server answers in the contract's shape", async () => {
    expectValid("get", "/admin/keys", await call("GET", "/admin/keys", undefined));
    expectValid("get", "/admin/keys", await call("GET", "/admin/keys", server.starterKey));
    expectValid("get", "/admin/usage", await call("GET", "/admin/usage?acount=x", server.adminKey));
    expectValid("get", "/admin/accounts/{id}", await call("GET", "/admin/accounts/nobody", server.adminKey));
    expectValid(
      "post",
      "/admin/keys/{id}/revoke",
      await call("POST", "/admin/keys/abcdefabcdef/revoke", server.adminKey),
    );
    const tooLarge = await call("POST", "/admin/accounts", server.adminKey, { name: "x".repeat(1_100_000) });
    expect(tooLarge.status).toBe(413);
    expectValid("post", "/admin/accounts", tooLarge);
    const headersTooLarge = await call("GET", "/v1/models", server.starterKey, undefined, {
      "x-filler": "x".repeat(20_000),
    });
    expect(headersTooLarge.status).toBe(431);
    expectValid("get", "/v1/models", headersTooLarge);
    expectValid("get", "/health", await call("GET", "/health", undefined));
    expectValid("get", "/ready", await call("GET", "/ready", undefined));
    const metrics = await call("GET", "/metrics", undefined);
    expect(metrics.contentType).toBe("text/plain");
    expectValid("get", "/metrics", metrics);
    expectValid("get", "/openapi.json", await call("GET", "/openapi.json", undefined));
  });

  const streamed = { messages: [{ role: "user", content: "Hi" }], max_tokens: 2, stream: true };

  it("describes a stream's headers", async () => {
    const whole = await call("POST", "/v1/chat/completions", server.starterKey, {
      ...streamed,
      model: TINY_MODEL,
    });
    expect(whole.headers).toMatchObject({ "cache-control": "no-cache", "x-accel-buffering": "no" });
    expectValid("post", "/v1/chat/completions", whole);
  });

  it("describes an error after a stream's 200: one event in the contract's shape, then [DONE]", async () => {
    const cut = await call("POST", "/v1/chat/completions", server.starterKey, {
      ...streamed,
      model: CUT_STREAM_MODEL,
    });
    expect(cut.status).toBe(200);
    const events = cut.body as string[];
    expect(JSON.parse(events.at(-2) ?? "")).toMatchObject({ error: { code: "upstream_unavailable" } });
    expect(events.at(-1)).toBe("[DONE]");
    expectValid("post", "/v1/chat/completions", cut);
  });

  it("describes the rate-limit headers on every answer a limited key gets", async () => {
    const limited = await server.createKey({ rpm: 2, tpm: 10_000 });
    const chat = (body: object) =>
      call("POST", "/v1/chat/completions", limited, {
        messages: [{ role: "user", content: "Hi" }],
        max_tokens: 2,
        ...body,
      });
    const answers = [
      ["post", "/v1/chat/completions", await chat({ model: TINY_MODEL })],
      ["post", "/v1/chat/completions", await chat({ model: TINY_MODEL, stream: true })],
      // Two requests a minute: the third is refused, and still told where the limits stand.
      ["post", "/v1/chat/completions", await chat({ model: TINY_MODEL })],
      ["post", "/v1/chat/completions", await chat({ model: "nope" })],
      ["get", "/v1/models", await call("GET", "/v1/models", limited)],
      ["get", "/v1/models/{model_id}", await call("GET", "/v1/models/nope", limited)],
      ["get", "/admin/keys", await call("GET", "/admin/keys", limited)],
    ] as const;
    expect(answers.map(([, , answer]) => answer.status)).toEqual([200, 200, 429, 404, 200, 404, 403]);
    for (const [method, path, answer] of answers) {
      expect(answer.headers).toHaveProperty("x-ratelimit-limit-requests", "2");
      expect(answer.headers).toHaveProperty("x-ratelimit-reset-tokens");
      expectValid(method, path, answer);
    }
  });

  it("describes the 503 of a local model that failed to load, which no retry can mend", async () => {
    const refused = await call("POST", "/v1/chat/completions", server.starterKey, {
      model: MISSING_FILE_MODEL,
      messages: [{ role: "user", content: "Hi" }],
    });
    expect(refused.status).toBe(503);
    expect(refused.headers["x-should-retry"]).toBe("false");
    expectValid("post", "/v1/chat/completions", refused);
  });
});
