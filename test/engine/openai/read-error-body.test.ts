import { describe, expect, it } from "vitest";
import { readErrorBody } from "../../../src/engine/openai/read-error-body.ts";

/** With no endpoint secrets: only the shapes of credentials are removed. */
function readBody(text: string) {
  return readErrorBody(text, []);
}

describe("readErrorBody", () => {
  it("reads OpenAI's error shape", () => {
    expect(
      readBody(
        JSON.stringify({
          error: {
            message: "Invalid 'temperature'.",
            type: "invalid_request_error",
            param: "temperature",
            code: "invalid_value",
          },
        }),
      ),
    ).toEqual({
      message: "Invalid 'temperature'.",
      type: "invalid_request_error",
      param: "temperature",
      code: "invalid_value",
    });
  });

  // Regression (security review): a vLLM traceback in a stream's error event, or in a 200 that is
  // an error, reached every client with the upstream's file paths and hosts.
  it("passes on no message that holds a stack trace", () => {
    const traces = [
      'Traceback (most recent call last):\n  File "/opt/venv/lib/python3.11/site-packages/vllm/serving_chat.py", line 512, in gen\nRuntimeError: engine dead',
      'engine dead (File "/srv/app/server.py", line 9, in handler; File "/srv/app/db.py", line 3, in get)',
      "TypeError: x is undefined\\n    at handle (/srv/app/server.js:10:5)\\n    at main (/srv/app/main.js:3:1)",
      "thread 'tokio-runtime-worker' panicked at /home/build/server/src/engine.rs:123:45:\nengine dead",
      "System.Exception: dead\n   at Acme.Server.Handle() in /src/app/Server.cs:line 42",
      "System.Exception: dead\n   at Acme.Server.Handle() in C:\\build\\Server.cs:line 12",
      "PHP Fatal error: dead\nStack trace:\n#0 /var/www/api/public/index.php(5): Chat->run()\n#1 {main}",
      "/app/lib/llm/server.rb:12:in 'handle': dead (RuntimeError)",
      "TypeError: x is undefined\n    at handle (/srv/app/server.js:10:5)\n    at process.processTicksAndRejections (node:internal/process/task_queues:95:5)",
      "java.lang.IllegalStateException: dead\n\tat com.example.Worker.run(Worker.java:42)",
      "panic: dead\n\ngoroutine 1 [running]:\nmain.main()",
    ];
    for (const message of traces) {
      expect(
        readBody(JSON.stringify({ error: { message, type: "InternalServerError", code: 500 } })),
      ).toEqual({
        message: undefined,
        type: "InternalServerError",
        code: "500",
        param: undefined,
        unreadable: "its error message holds a stack trace, which is not passed on",
      });
    }
    // Ordinary messages that name a file, a line or a position are passed on.
    for (const message of [
      "error parsing tool call: raw='File \"a\", line'",
      "Unexpected token at position 12:5",
      'invalid syntax in the tool call: File "main.py", line 3',
      "at most 4 stop sequences; see docs at https://example.com/stop:1",
    ])
      expect(readBody(JSON.stringify({ error: { message } })).message).toBe(message);
  });

  // Regression: an upstream's escape sequences reached the client's message raw, and an SDK or a
  // CLI that prints it to a terminal recoloured or cleared it.
  it("writes control characters but whitespace as escapes", () => {
    const body = readBody(
      JSON.stringify({
        error: { message: "line1\nINFO fake\r\n\u001b[31mred\u001b[0m \u0007 \u202eevil", param: "x\u001by" },
      }),
    );
    expect(body.message).toBe("line1 INFO fake \\u001b[31mred\\u001b[0m \\u0007 \\u202eevil");
    expect(body.param).toBe("x\\u001by");
    // Shortened before they are written so: an escape is never cut in two.
    const long = readBody(
      JSON.stringify({ error: { message: `${"word ".repeat(59)}${"\u001b".repeat(10)}` } }),
    );
    expect(long.message).toMatch(/^(word ){59}(\\u001b)+…$/);
  });

  it("reads the shapes other compatible servers use", () => {
    expect(readBody('{"error":"model overloaded"}').message).toBe("model overloaded");
    expect(readBody('{"message":"bad things"}').message).toBe("bad things");
    expect(readBody('{"detail":"Not Found"}').message).toBe("Not Found");
    expect(readBody('{"detail":[{"msg":"field required"},{"msg":"value too big"}]}').message).toBe(
      "field required; value too big",
    );
    expect(readBody("upstream timed out\n").message).toBe("upstream timed out");
    expect(readBody('{"error":{"code":429}}').code).toBe("429");
  });

  it("reads the fields at the top level (vLLM's errors, llama.cpp's error events)", () => {
    expect(
      readBody('{"object":"error","message":"too long","type":"BadRequestError","param":null,"code":400}'),
    ).toEqual({ message: "too long", type: "BadRequestError", code: "400", param: undefined });
  });

  it("names the field of a FastAPI validation error", () => {
    expect(
      readBody(
        JSON.stringify({
          detail: [
            { loc: ["body", "stream_options"], msg: "Extra inputs are not permitted" },
            { loc: ["body", "messages", 0, "role"], msg: "Input should be 'user'" },
          ],
        }),
      ).message,
    ).toBe("stream_options: Extra inputs are not permitted; messages.0.role: Input should be 'user'");
  });

  it("reads Mistral's validation errors, held in an object as the message (regression: no message, stream_options never left out)", () => {
    const mistral = {
      object: "error",
      message: {
        detail: [
          {
            type: "extra_forbidden",
            loc: ["body", "stream_options", "include_usage"],
            msg: "Extra inputs are not permitted",
            input: true,
          },
        ],
      },
      type: "invalid_request_error",
      param: null,
      code: null,
    };
    expect(readBody(JSON.stringify(mistral)).message).toBe(
      "stream_options.include_usage: Extra inputs are not permitted",
    );
    // One level only: an object within it is no message.
    expect(readBody(JSON.stringify({ message: { detail: { detail: "deep" } } })).message).toBeUndefined();
  });

  it("says nothing for empty bodies and HTML pages", () => {
    expect(readBody("")).toEqual({
      message: undefined,
      type: undefined,
      code: undefined,
      param: undefined,
    });
    expect(readBody("<html><body>502 Bad Gateway</body></html>").message).toBeUndefined();
  });

  it("removes anything shaped like a credential and shortens long messages", () => {
    const body = readBody(
      JSON.stringify({
        error: { message: "Incorrect API key provided: sk-proj-abcdef123456. Header was Bearer xyz.123" },
      }),
    );
    expect(body.message).toBe("Incorrect API key provided: [redacted]. Header was [redacted]");
    const long = readBody(JSON.stringify({ error: { message: "word ".repeat(200) } }));
    expect(long.message?.length).toBe(300);
    expect(long.message?.endsWith("…")).toBe(true);
  });

  // Regression: the cut at 299 code units split an emoji, and the client got a lone "\ud83d".
  it("never cuts an emoji in half when it shortens a message", () => {
    // 298 units of words, then the emoji at units 299 and 300: the cut falls between its halves.
    const words = `${"word ".repeat(59)}abc`;
    const body = readBody(
      JSON.stringify({ error: { message: `${words}😀 and more`, type: `${words}😀 x` } }),
    );
    expect(body.message).toBe(`${words}…`);
    expect(body.type).toBe(`${words}…`);
    const fits = readBody(JSON.stringify({ error: { message: `${words.slice(1)}😀 and more` } }));
    expect(fits.message).toBe(`${words.slice(1)}😀…`);
  });

  it("removes the endpoint's secrets from every field, before shortening", () => {
    const secrets = ["vllm-local-7f3a", "azkey-9c1e2f"];
    const body = readErrorBody(
      JSON.stringify({
        error: {
          message: `${"word ".repeat(58)}token vllm-local-7f3a refused`,
          type: "denied_for_azkey-9c1e2f",
          code: "azkey-9c1e2f",
          param: "api-key=azkey-9c1e2f",
        },
      }),
      secrets,
    );
    expect(body).toEqual({
      message: `${"word ".repeat(58)}token [re…`,
      type: "denied_for_[redacted]",
      code: "[redacted]",
      param: "api-key=[redacted]",
    });
    expect(readErrorBody("vllm-local-7f3a is not allowed", secrets).message).toBe(
      "[redacted] is not allowed",
    );
  });
});

// Regression: a JSON body over the 64 KiB bound was cut, did not parse, and its raw text (a stack
// trace, file paths, a database URL) became the client's message.
describe("readErrorBody: JSON bodies that do not parse", () => {
  const trace = `Traceback (most recent call last): File "/srv/secret-svc/app/handlers.py", db=postgres://svc@db-primary.internal:5432/prod${" frame".repeat(20_000)}`;
  const traced = JSON.stringify({
    error: { message: "Invalid request", type: "invalid_request_error", debug: { trace } },
  });

  it("passes on only the message a cut body begins with", () => {
    const body = readErrorBody(traced.slice(0, 64 * 1024), [], { cut: true });
    expect(body).toEqual({
      message: "Invalid request",
      type: "invalid_request_error",
      code: undefined,
      param: undefined,
    });
  });

  it("passes on a message the cut fell inside of, cut and marked so", () => {
    const text = JSON.stringify({ error: { message: `Prompt refused: ${"too long ".repeat(20_000)}` } });
    const body = readErrorBody(text.slice(0, 64 * 1024), [], { cut: true });
    expect(body.message?.startsWith("Prompt refused: too long too long")).toBe(true);
    expect(body.message?.endsWith("…")).toBe(true);
    expect(body.message?.length).toBeLessThanOrEqual(300);
  });

  it("says the message is too long to read where what is left of it is only redactions", () => {
    const text = JSON.stringify({ error: { message: "X".repeat(200_000) } });
    const body = readErrorBody(text.slice(0, 64 * 1024), [], { cut: true });
    expect(body.message).toBeUndefined();
    expect(body.unreadable).toBe("its error message is too long to read");
  });

  it("says why where no message can be read, and passes none of the body on", () => {
    const late = JSON.stringify({ error: { debug: { trace }, message: "Invalid request" } });
    const cut = readErrorBody(late.slice(0, 64 * 1024), [], { cut: true });
    expect(cut.message).toBeUndefined();
    expect(cut.unreadable).toBe("its error body is too long to read");
    const malformed = readErrorBody(`{"trace": ${JSON.stringify(trace.slice(0, 200))}, oops}`, []);
    expect(malformed.message).toBeUndefined();
    expect(malformed.unreadable).toBe("its error body is not valid JSON");
    expect(readErrorBody("[1, 2", []).unreadable).toBe("its error body is not valid JSON");
  });

  it("still passes a plain-text body on, and says nothing of an HTML page", () => {
    expect(readErrorBody("model overloaded, retry", []).message).toBe("model overloaded, retry");
    expect(readErrorBody("<html><body>cut", [], { cut: true })).toEqual({
      message: undefined,
      type: undefined,
      code: undefined,
      param: undefined,
    });
  });
});

// Regression: an upstream that repeated its own URL in a 400 had it passed on to the client.
describe("readErrorBody: the endpoint's own names", () => {
  it("replaces the upstream's origin and host with 'the upstream server' in every field", () => {
    const names = ["http://127.0.0.1:33044", "127.0.0.1:33044", "127.0.0.1"];
    const body = readErrorBody(
      JSON.stringify({
        error: {
          message:
            "bad request to http://127.0.0.1:33044/v1/chat/completions?token=QUERYSECRET from 127.0.0.1",
          param: "url=http://127.0.0.1:33044",
        },
      }),
      ["QUERYSECRET"],
      { names },
    );
    expect(body.message).toBe(
      "bad request to the upstream server/v1/chat/completions?token=[redacted] from the upstream server",
    );
    expect(body.param).toBe("url=the upstream server");
  });
});
