import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildApp } from "../../src/api/build-app.ts";
import { readCharset } from "../../src/api/register-json-body-parser.ts";
import { AppError } from "../../src/errors/app-error.ts";
import { ModelRegistry } from "../../src/models/model-registry.ts";

let app: FastifyInstance;
let url: string;

beforeAll(async () => {
  app = buildApp({
    registry: new ModelRegistry([], () => undefined),
    authenticate: async () => {
      throw new AppError("invalid_api_key", "Not a key.");
    },
  });
  // A route that answers the body it was given, parsed by the app's one JSON parser.
  app.post("/echo", async (request) => ({ body: request.body }));
  await app.listen({ host: "127.0.0.1", port: 0 });
  const address = app.server.address();
  url = `http://127.0.0.1:${typeof address === "object" && address !== null ? address.port : 0}/echo`;
});

afterAll(async () => {
  await app?.close();
});

async function post(contentType: string, body: Uint8Array, headers: Record<string, string> = {}) {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": contentType, ...headers },
    body,
  });
  return { status: response.status, body: (await response.json()) as unknown };
}

/** `{"text":"<text>"}` in the single-byte windows-1252 encoding (which `latin1` names too). */
function windows1252Json(text: string): Uint8Array {
  const bytes: number[] = [];
  for (const character of `{"text":"${text}"}`)
    bytes.push(character === "€" ? 0x80 : character.charCodeAt(0));
  return Uint8Array.from(bytes);
}

describe("a JSON body with a declared charset", () => {
  it("is decoded with a latin1, ISO-8859-1 or windows-1252 charset, not read as UTF-8", async () => {
    const body = windows1252Json("café à 5 €");
    for (const contentType of [
      "application/json; charset=latin1",
      "application/json; charset=ISO-8859-1",
      "application/json;charset=iso-8859-1",
      'application/json; charset="windows-1252"',
      "Application/JSON; Charset=CP1252",
    ]) {
      expect(await post(contentType, body), contentType).toEqual({
        status: 200,
        body: { body: { text: "café à 5 €" } },
      });
    }
  });

  it("is decoded as UTF-16, little or big endian", async () => {
    const json = '{"text":"日本語 ✓"}';
    const littleEndian = Buffer.from(json, "utf16le");
    const bigEndian = Buffer.from(littleEndian).swap16();
    for (const [contentType, body] of [
      ["application/json; charset=utf-16le", littleEndian],
      ["application/json; charset=utf-16", littleEndian],
      ["application/json; charset=UTF-16BE", bigEndian],
      // Regression: with its byte order mark, as Java's "UTF-16" writes it (big endian), it
      // was decoded little endian, and refused as JSON that did not parse.
      ["application/json; charset=utf-16", Buffer.concat([Buffer.from([0xfe, 0xff]), bigEndian])],
      ["application/json; charset=utf-16", Buffer.concat([Buffer.from([0xff, 0xfe]), littleEndian])],
    ] as const) {
      expect(await post(contentType, body), contentType).toEqual({
        status: 200,
        body: { body: { text: "日本語 ✓" } },
      });
    }
  });

  it("is read as UTF-8 without a charset, with UTF-8 or an alias of it, or with other parameters", async () => {
    const body = Buffer.from('{"text":"café 日本"}');
    for (const contentType of [
      "application/json",
      "application/json; charset=utf-8",
      "application/json; charset=UTF-8",
      "application/json; charset=utf8",
      "application/json; charset=unicode-1-1-utf-8",
      "application/json; version=2",
    ]) {
      expect(await post(contentType, body), contentType).toEqual({
        status: 200,
        body: { body: { text: "café 日本" } },
      });
    }
  });

  it("may start with a UTF-8 byte order mark, whatever parameters its content type has", async () => {
    const body = Buffer.from('\uFEFF{"text":"café"}');
    for (const contentType of [
      "application/json",
      "application/json; charset=utf-8",
      "application/json; charset=UTF-8; version=2",
      "application/json; version=2",
    ]) {
      expect(await post(contentType, body), contentType).toEqual({
        status: 200,
        body: { body: { text: "café" } },
      });
    }
    // Only one: a second is text before the JSON.
    const twice = await post("application/json", Buffer.from('\uFEFF\uFEFF{"text":"café"}'));
    expect(twice).toMatchObject({ status: 400, body: { error: { code: "invalid_json" } } });
  });

  it("is refused, naming the charset, when the charset is not one the server can decode", async () => {
    for (const charset of ["klingon", "utf-32"]) {
      expect(await post(`application/json; charset=${charset}`, Buffer.from("{}"))).toEqual({
        status: 400,
        body: {
          error: {
            message: `The request body's charset '${charset}' is not supported; send the JSON in UTF-8 ('Content-Type: application/json').`,
            type: "invalid_request_error",
            param: null,
            code: "invalid_content_type",
          },
        },
      });
    }
  });

  it("is refused when its bytes are not valid in its charset, not read with U+FFFD in their place", async () => {
    const invalidUtf8 = Buffer.concat([
      Buffer.from('{"text":"bad '),
      Buffer.from([0xff, 0xfe]),
      Buffer.from(' x"}'),
    ]);
    // A UTF-8 sequence cut short, an overlong encoding, an encoded surrogate.
    const alsoInvalid = [
      Buffer.from([0xe6, 0x97]),
      Buffer.from([0xc0, 0xaf]),
      Buffer.from([0xed, 0xa0, 0x80]),
    ].map((bytes) => Buffer.concat([Buffer.from('{"text":"'), bytes, Buffer.from('"}')]));
    for (const contentType of [
      "application/json",
      "application/json; charset=utf-8",
      "application/json; version=2",
    ]) {
      for (const body of [invalidUtf8, ...alsoInvalid]) {
        expect(await post(contentType, body), contentType).toEqual({
          status: 400,
          body: {
            error: {
              message:
                "The request body holds bytes that are not valid UTF-8; send the JSON as UTF-8 text, or name the charset it is written in ('Content-Type: application/json; charset=...').",
              type: "invalid_request_error",
              param: null,
              code: "invalid_json",
            },
          },
        });
      }
    }
    // UTF-16 with half a surrogate pair.
    const loneSurrogate = Buffer.concat([
      Buffer.from('{"text":"', "utf16le"),
      Buffer.from([0x3d, 0xd8]),
      Buffer.from('"}', "utf16le"),
    ]);
    expect(await post("application/json; charset=utf-16le", loneSurrogate)).toMatchObject({
      status: 400,
      body: { error: { code: "invalid_json", message: expect.stringContaining("not valid 'utf-16le'") } },
    });
    // A replacement character the client sent is text like any other.
    expect(await post("application/json", Buffer.from('{"text":"\uFFFD �"}'))).toEqual({
      status: 200,
      body: { body: { text: "� �" } },
    });
  });

  it("still refuses a compressed body, and invalid JSON, whatever its charset", async () => {
    const compressed = await post("application/json; charset=latin1", Buffer.from("{}"), {
      "content-encoding": "gzip",
    });
    expect(compressed).toMatchObject({ status: 400, body: { error: { code: "invalid_content_type" } } });
    // An empty Content-Encoding names no coding: the body is plain.
    expect(await post("application/json", Buffer.from("{}"), { "content-encoding": "" })).toEqual({
      status: 200,
      body: { body: {} },
    });
    const invalid = await post("application/json; charset=latin1", Buffer.from("{"));
    expect(invalid).toMatchObject({ status: 400, body: { error: { code: "invalid_json" } } });
    expect(await post("application/json-seq", Buffer.from("{}"))).toMatchObject({
      status: 400,
      body: { error: { code: "invalid_content_type" } },
    });
  });
});

describe("readCharset", () => {
  it("reads the charset parameter, quoted or not, in any case", () => {
    expect(readCharset("application/json")).toBeUndefined();
    expect(readCharset(undefined)).toBeUndefined();
    expect(readCharset("application/json; charset=latin1")).toBe("latin1");
    expect(readCharset('application/json; version=2; CHARSET="utf-16"')).toBe("utf-16");
    expect(readCharset("application/json;charset=UTF-8 ; version=2")).toBe("UTF-8");
  });
});
